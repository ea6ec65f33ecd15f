"""Hybrid interop: Kaldi alignments in, CE training, Kaldi log-likelihood ark out."""

import kaldiio
import numpy as np
from click.testing import CliRunner

from asrtrain.cli import cli

from tests.helpers.featfix import make_feat_dir


def test_alignments_to_ce_training_to_loglikes(tmp_path):
    feats = make_feat_dir(tmp_path / "train", 16)
    rng = np.random.default_rng(0)
    ali = {}
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path}/pdf.ark,{tmp_path}/pdf.scp") as w:
        for utt, mat in kaldiio.load_scp(str(feats / "feats.scp")).items():
            labels = np.repeat(rng.integers(0, 12, size=len(mat) // 3 + 1), 3)[: len(mat) - 1]  # one frame short
            ali[utt] = labels.astype(np.int32)
            w(utt, ali[utt])
    exp = tmp_path / "exp"
    args = ["train", "--train-data", str(feats), "--dev-data", str(feats), "--alignments", str(tmp_path / "pdf.scp"),
            "--loss", "ce", "--exp-dir", str(exp), "--set", "model.num_layers=1", "--set", "model.hidden=16",
            "--set", "train.epochs=2", "--set", "train.max_frames=2000", "--set", "model.subsample=3"]
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    priors = np.array([float(x) for x in (exp / "priors.txt").read_text().split()])
    assert priors.shape == (12,) and abs(priors.sum() - 1) < 1e-6
    assert "num_targets: 12" in (exp / "config.yaml").read_text()

    out = tmp_path / "loglikes.ark"
    r = CliRunner().invoke(cli, ["forward", str(exp), str(feats), str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    got = dict(kaldiio.load_scp(str(tmp_path / "loglikes.scp")))
    assert sorted(got) == sorted(ali)
    for utt, mat in kaldiio.load_scp(str(feats / "feats.scp")).items():
        assert got[utt].shape == ((len(mat) + 2) // 3, 12)
        # log-likelihood = log-posterior - log-prior: adding the priors back gives a distribution
        post = np.exp(got[utt] + np.log(priors))
        assert np.allclose(post.sum(1), 1.0, atol=1e-4)

    # CE models are not decoded by our CTC search
    r = CliRunner().invoke(cli, ["decode", str(exp), str(feats), str(tmp_path / "dec")])
    assert r.exit_code == 1 and "latgen-faster-mapped" in r.output
    # nor packed for transcribe (which decodes CTC models only): refused before anything is written
    (exp / "tokenizer.model").write_bytes(b"")  # whatever the exp dir holds, the loss decides
    r = CliRunner().invoke(cli, ["pack", str(exp), str(tmp_path / "pack")])
    assert r.exit_code == 1 and "CE targets" in r.output and "latgen-faster-mapped" in r.output, r.output
    assert not (tmp_path / "pack").exists()


def test_missing_alignments_is_a_clear_error(tmp_path):
    feats = make_feat_dir(tmp_path / "train", 4)
    r = CliRunner().invoke(cli, ["train", "--train-data", str(feats), "--alignments", str(tmp_path / "nope.scp"),
                                 "--loss", "ce", "--exp-dir", str(tmp_path / "exp")])
    assert r.exit_code == 1 and "nope.scp" in r.output and "Traceback" not in r.output
