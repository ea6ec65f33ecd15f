"""asrtrain export: the ONNX and TorchScript graphs give torch's log-probs on a padded batch of unequal
lengths (each utterance as it gets alone), and the export refuses in one line what it cannot write."""

import numpy as np
import pytest
import torch

from asrtrain.decode.ctc import greedy
from asrtrain.export.arrays import padded_batch
from asrtrain.export.graph import TOLERANCE, alone, check_features

LENGTHS = (83, 41, 5, 2)  # neither the traced nor the export-checked lengths


def _eager(exp):
    from asrtrain.decode.run import load_model
    return load_model(exp, None, "cpu")[1]


def _compare(lp, out_lengths, want):
    for i, w in enumerate(want):
        assert int(out_lengths[i]) == w.shape[0]
        assert np.abs(lp[i, : w.shape[0]] - w).max() <= TOLERANCE
        assert greedy(lp[i, : w.shape[0]])[0] == greedy(w)[0]


@pytest.mark.parametrize("variant", ["stack", "conv"])
def test_onnx_gives_each_utterance_of_a_padded_batch_its_log_probs_alone(exported, variant):
    import onnxruntime as ort
    exp, out = exported(variant)
    model = _eager(exp)
    feats = check_features(model.cfg.input_dim, LENGTHS, seed=7)
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    lp, out_lengths = session.run(None, dict(zip(("feats", "lengths"), padded_batch(feats))))
    _compare(lp, out_lengths, alone(model, feats))
    # the backward direction starts at each utterance's own end: the same batch with padding of other values
    x, lens = padded_batch(feats)
    x[1, LENGTHS[1]:] = 1e3
    lp2 = session.run(None, {"feats": x, "lengths": lens})[0]
    assert np.abs(lp2[1, : int(out_lengths[1])] - lp[1, : int(out_lengths[1])]).max() <= TOLERANCE


@pytest.mark.parametrize("variant", ["stack", "conv"])
def test_torchscript_gives_each_utterance_of_a_padded_batch_its_log_probs_alone(exported, variant):
    exp, out = exported(variant, "torchscript")
    model = _eager(exp)
    feats = check_features(model.cfg.input_dim, LENGTHS, seed=7)
    ts = torch.jit.load(str(out / "model.ts"), map_location="cpu")
    x, lens = padded_batch(feats)
    with torch.no_grad():
        lp, out_lengths = ts(torch.from_numpy(x), torch.from_numpy(lens))
    _compare(lp.numpy(), out_lengths.numpy(), alone(model, feats))


def test_export_dir_holds_what_a_deployment_needs_and_its_manifest(exported):
    import json
    exp, out = exported("conv")
    names = {p.name for p in out.iterdir()}
    assert {"model.onnx", "fbank.json", "cmvn.json", "tokenizer.model", "tokens.txt", "meta.json",
            "MANIFEST.sha256"} <= names
    listed = {ln.split()[1] for ln in (out / "MANIFEST.sha256").read_text().splitlines()}
    assert listed == names - {"MANIFEST.sha256"}
    cmvn = json.loads((out / "cmvn.json").read_text())
    from asrtrain.features.cmvn import read_stats, transform
    stats = read_stats(str(exp / "cmvn_global.ark"))
    assert cmvn["kind"] == "global" and np.allclose(cmvn["stats"], stats)
    assert np.allclose(cmvn["scale"], transform(stats, True)[0])
    meta = json.loads((out / "meta.json").read_text())
    assert meta["subsample"] == 2 and meta["check"]["max_abs_diff"] <= TOLERANCE
    ids = [int(ln.rsplit(" ", 1)[1]) for ln in (out / "tokens.txt").read_text().splitlines()]
    assert ids == list(range(meta["vocab_size"]))
    assert json.loads((out / "fbank.json").read_text())["num_mel_bins"] == 23


def test_an_export_that_differs_from_torch_is_refused_in_one_line_and_leaves_nothing(exported, tmp_path,
                                                                                      monkeypatch):
    from asrtrain.export import graph
    from tests.helpers.cli_helpers import one_error, run
    exp, _ = exported("stack")
    monkeypatch.setattr(graph, "TOLERANCE", -1.0)  # any difference, even 0, is now too large
    line = one_error(run("export", exp, tmp_path / "out"))
    assert "differ from torch's" in line
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []


def test_a_projected_lstm_is_refused_for_onnx_in_one_line_and_exports_as_torchscript(tmp_path):
    from tests.helpers.cli_helpers import one_error, run
    from tests.helpers.tiny_exp import write_tiny_exp
    exp = write_tiny_exp(tmp_path / "exp", proj=4)
    assert "--format torchscript" in one_error(run("export", exp, tmp_path / "onnx"))
    res = run("export", exp, tmp_path / "ts", "--format", "torchscript")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "ts" / "model.ts").is_file()
