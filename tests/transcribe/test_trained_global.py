"""A global-CMVN model: training keeps the training set's stats in the exp dir, pack ships them, and a
pack's weights are CPU tensors in our checksummed weights_only file."""

import json
import shutil

import numpy as np
import pytest

from tests.helpers.cli_helpers import run
from tests.helpers.featfix import make_task


@pytest.mark.slow
def test_training_keeps_the_global_stats_and_a_pack_transcribes_without_the_exp(tmp_path):
    from asrtrain.features.cmvn import read_stats
    tr, dv, tok = make_task(tmp_path / "feats", 8, 2)
    exp = tmp_path / "exp"
    args = ["train", "--train-data", tr, "--dev-data", dv, "--tokenizer", tok, "--exp-dir", exp]
    for s in ["model.num_layers=1", "model.hidden=8", "model.subsample=2", "train.epochs=1",
              "train.threads=1", "specaug.enabled=false"]:
        args += ["--set", s]
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert np.array_equal(read_stats(str(exp / "cmvn_global.ark")), read_stats(str(tr / "cmvn_global.ark")))
    # training records its data: the feature dirs' names, utterances and hours (utt2num_frames x 10 ms)
    record = json.loads((exp / "data.json").read_text())
    frames = sum(int(ln.split()[1]) for ln in (tr / "utt2num_frames").read_text().splitlines())
    assert record["train"]["name"] == tr.name and record["train"]["utterances"] == 8
    assert record["train"]["frames"] == frames and record["train"]["hours"] == round(frames * 0.01 / 3600, 6)
    assert record["dev"]["utterances"] == 2
    r = run("pack", exp, tmp_path / "model")
    assert r.exit_code == 0, r.output
    card = (tmp_path / "model" / "MODEL.md").read_text()
    assert f"train data: {tr.name}: 8 utterances" in card and "dev data" in card and "1 epochs" in card
    shutil.rmtree(exp)
    import asrtrain
    t = asrtrain.Transcriber.load(tmp_path / "model")
    res = t.transcribe(np.zeros(8000, np.float32) + 0.01, sample_rate=8000)
    assert isinstance(res.text, str) and res.segments == [(0.0, 1.0)]
