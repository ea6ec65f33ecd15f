"""Bad input to decode, tune-lm, forward, average and score: one line ``asrtrain: error: ...`` naming the
file and the fix; no traceback, no hang, no silent acceptance, and no input file overwritten.

The clean world (a feature dir, an LM, a tiny trained exp dir) is corpus_world.py's, built once.
"""

import contextlib
import hashlib
import signal
from pathlib import Path

import pytest

from tests.helpers.cli_helpers import one_error, run
from tests.helpers.corpus_world import materialize


@contextlib.contextmanager
def no_hang(seconds=60):
    """Fail (instead of hanging the suite) when the block runs past ``seconds``."""
    def alarm(*_):
        raise TimeoutError(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def lm(world):
    return world["lm"] / "lm.arpa"


def has(err: str, *words: str) -> None:
    for w in words:
        assert w in err, err


# -- beam size, LM weight, word bonus (c02, c08, c09, c18, c19) -------------------------------------------

@pytest.mark.parametrize("beam", ["-3", "0"])
def test_decode_refuses_beam_below_one(world, tmp_path, beam):
    err = one_error(run("decode", world["exp"], world["feats"], tmp_path / "d", "--method", "beam",
                        "--beam-size", beam, "--device", "cpu"))
    has(err, f"beam size {beam}", ">= 1", "--beam-size")
    assert not (tmp_path / "d").exists()


def test_decode_refuses_negative_beam_with_lm_instead_of_hanging(world, tmp_path):
    with no_hang():
        err = one_error(run("decode", world["exp"], world["feats"], tmp_path / "d", "--lm", lm(world),
                            "--beam-size", "-1", "--device", "cpu"))
    has(err, "beam size -1", ">= 1")


@pytest.mark.parametrize("beam", ["-1", "0"])
def test_tune_lm_refuses_beam_below_one(world, tmp_path, beam):
    with no_hang():
        err = one_error(run("tune-lm", world["exp"], world["feats"], tmp_path / "t", "--lm", lm(world),
                            "--lm-weights", "0.5", "--word-bonuses", "1", "--beam-size", beam,
                            "--device", "cpu"))
    has(err, f"beam size {beam}", ">= 1")


@pytest.mark.parametrize("option,value,what", [("--lm-weight", "nan", "LM weight nan"),
                                               ("--lm-weight", "-inf", "LM weight -inf"),
                                               ("--word-bonus", "inf", "word bonus inf")])
def test_decode_refuses_non_finite_lm_weight_and_word_bonus(world, tmp_path, option, value, what):
    err = one_error(run("decode", world["exp"], world["feats"], tmp_path / "d", "--lm", lm(world),
                        option, value, "--device", "cpu"))
    has(err, what, "not finite", option)
    assert not (tmp_path / "d").exists()


def test_decode_refuses_params_with_infinite_lm_weight(world, tmp_path):
    params = tmp_path / "best.yaml"
    params.write_text("lm_weight: .inf\nword_bonus: 1\nbeam_size: 8\n")
    err = one_error(run("decode", world["exp"], world["feats"], tmp_path / "d", "--lm", lm(world),
                        "--params", params, "--device", "cpu"))
    has(err, f"{params}:1: ", "'lm_weight' must be a finite number")


# -- outputs that would overwrite inputs (c11, c12, c14, c16) ---------------------------------------------

def test_decode_refuses_out_dir_that_is_data_dir(world, tmp_path):
    dirs = materialize(world, tmp_path, {}, "{feats}")
    text = dirs["feats"] / "text"
    before = digest(text)
    err = one_error(run("decode", world["exp"], dirs["feats"], str(dirs["feats"]) + "/./",
                        "--device", "cpu"))
    has(err, "OUT_DIR must differ from DATA_DIR", "new output directory")
    assert digest(text) == before


def test_tune_lm_refuses_out_dir_that_is_data_dir(world, tmp_path):
    dirs = materialize(world, tmp_path, {}, "{feats}")
    text = dirs["feats"] / "text"
    before = digest(text)
    err = one_error(run("tune-lm", world["exp"], dirs["feats"], dirs["feats"], "--lm", lm(world),
                        "--lm-weights", "0.5", "--word-bonuses", "1", "--device", "cpu"))
    has(err, "OUT_DIR must differ from DATA_DIR")
    assert digest(text) == before
    assert not (dirs["feats"] / "best.yaml").exists()


@pytest.mark.parametrize("target", ["feats.ark", "feats.scp", "loglikes.ark"])
def test_forward_refuses_out_ark_over_the_features(world, tmp_path, target):
    dirs = materialize(world, tmp_path, {}, "{feats}")
    before = {p.name: digest(p) for p in dirs["feats"].iterdir() if p.is_file()}
    err = one_error(run("forward", world["exp"], dirs["feats"], dirs["feats"] / target, "--device", "cpu"))
    has(err, "OUT_ARK must not overwrite DATA_DIR's features", "outside DATA_DIR")
    assert {p.name: digest(p) for p in dirs["feats"].iterdir() if p.is_file()} == before


def test_forward_refuses_out_ark_that_is_a_directory(world, tmp_path):
    out = tmp_path / "dir16"
    out.mkdir()
    err = one_error(run("forward", world["exp"], world["feats"], out, "--device", "cpu"))
    has(err, f"{out}: is a directory")
    assert ".tmp" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir16"]


def test_forward_failed_write_leaves_no_temp_files(world, tmp_path):
    (tmp_path / "out.scp.tmp").mkdir()  # the scp's temp file cannot be opened: the write fails
    result = run("forward", world["exp"], world["feats"], tmp_path / "out.ark", "--device", "cpu")
    one_error(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.scp.tmp"]


# -- average (c04, c23, c29) ------------------------------------------------------------------------------

@pytest.mark.parametrize("k", ["0", "-1"])
def test_average_refuses_last_below_one(world, tmp_path, k):
    err = one_error(run("average", world["exp"], "--last", k, "--out", tmp_path / "avg.pt"))
    has(err, f"--last {k}", ">= 1")
    assert not (tmp_path / "avg.pt").exists()


def test_average_refuses_checkpoints_of_different_models(world, tmp_path):
    import torch

    from asrtrain.model.files import load_checked, save_checked

    dirs = materialize(world, tmp_path, {}, "{exp}")
    ckpts = dirs["exp"] / "checkpoints"
    payload = load_checked(ckpts / "epoch-0001.rank0.pt")
    key = next(iter(payload["avg_model"]))
    shape = list(payload["avg_model"][key].shape)
    payload["avg_model"][key] = torch.zeros(shape[0] + 4, *shape[1:])
    save_checked(payload, ckpts / "epoch-0002.rank0.pt")
    err = one_error(run("average", dirs["exp"], "--last", "2", "--out", tmp_path / "avg.pt"))
    has(err, "epoch-0001.rank0.pt", "epoch-0002.rank0.pt", "differ", key, str(shape))
    assert not (tmp_path / "avg.pt").exists()


def test_average_refuses_out_that_is_a_directory(world, tmp_path):
    err = one_error(run("average", world["exp"], "--last", "1", "--out", tmp_path))
    has(err, f"{tmp_path}: is a directory")
    assert ".tmp" not in err
    assert list(tmp_path.iterdir()) == []


def test_decode_names_a_directory_given_as_checkpoint(world, tmp_path):
    err = one_error(run("decode", world["exp"], world["feats"], tmp_path / "d", "--checkpoint", tmp_path,
                        "--device", "cpu"))
    has(err, f"{tmp_path}: is a directory", "model file")
    assert "not found" not in err


# -- score (c20, c30) -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../escaped", "a/b", ".."])
def test_score_refuses_report_name_outside_out_dir(world, tmp_path, name):
    out = tmp_path / "sc"
    text = world["feats"] / "text"
    err = one_error(run("score", text, text, "--out-dir", out, "--name", name))
    has(err, "--name", "plain file name")
    assert list(tmp_path.iterdir()) == []


def test_score_refuses_empty_reference(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("")
    err = one_error(run("score", empty, empty))
    has(err, f"{empty}: ", "no utterances")


def test_score_still_scores_an_empty_hypothesis_against_a_real_reference(tmp_path):
    (tmp_path / "ref").write_text("u1 a b\n")
    (tmp_path / "hyp").write_text("")
    result = run("score", tmp_path / "ref", tmp_path / "hyp")
    assert result.exit_code == 0, result.output
    assert "%WER 100.0" in result.output
