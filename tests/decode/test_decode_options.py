"""decode / tune-lm / forward: options the search cannot use are one-line errors (never silently ignored),
--threads sets torch's threads for the run, and decode logs its progress."""

import pytest
import torch

from tests.helpers.cli_helpers import one_error, run
from tests.helpers.corpus_world import build_world


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("world"))


def decode_error(tmp_path, *options):
    err = one_error(run("decode", tmp_path / "exp", tmp_path / "feats", tmp_path / "out", *options))
    assert "(fix: " in err and len(err) < 300, err
    assert not (tmp_path / "out").exists()
    return err


@pytest.mark.parametrize("options,says", [
    (["--method", "greedy", "--lm", "lm.arpa"], "--method greedy cannot use --lm: --lm selects the lexicon"),
    (["--method", "beam", "--words", "words.txt"], "--method beam cannot use --words"),
    (["--lm-weight", "0.7"], "--lm-weight weighs the scores of --lm, and no LM is given"),
    (["--lm-weight", "0.7", "--words", "words.txt"], "--lm-weight weighs the scores of --lm"),
    (["--word-bonus", "3"], "--word-bonus is for the lexicon search"),
    (["--engine", "flashlight"], "--engine is for the lexicon search"),
    (["--lm", "lm.arpa", "--oov-penalty", "5"], "--oov-penalty 5 is positive"),
    (["--threads", "-1"], "--threads must be >= 0"),
])
def test_decode_options_that_cannot_apply_are_errors(tmp_path, options, says):
    assert says in decode_error(tmp_path, *options)


def test_an_oov_penalty_of_zero_is_still_accepted():
    from asrtrain.decode.options import check_oov_penalty
    check_oov_penalty(0.0)
    check_oov_penalty(-8.0)


def test_tune_lm_refuses_a_positive_oov_penalty(tmp_path):
    err = one_error(run("tune-lm", tmp_path / "exp", tmp_path / "dev", tmp_path / "t", "--lm", "lm.arpa",
                        "--oov-penalties", "closed,5"))
    assert "--oov-penalties 5 is positive" in err and "fix: give e.g. -5" in err, err


def test_a_best_yaml_with_a_positive_oov_penalty_is_refused(tmp_path):
    from asrtrain.decode.tune import read_params
    from asrtrain.errors import AsrError

    (tmp_path / "best.yaml").write_text("lm_weight: 0.5\nword_bonus: 2\nbeam_size: 10\noov_penalty: 3\n")
    says = r"best.yaml:4: 'oov_penalty' must be 'closed' or a finite number <= 0, not 3"
    with pytest.raises(AsrError, match=says):
        read_params(tmp_path / "best.yaml")


@pytest.mark.parametrize("command", ["decode", "tune-lm", "forward"])
@pytest.mark.parametrize("threads,want", [([], 1), (["--threads", "2"], 2), (["--threads", "0"], None)])
def test_threads_are_set_for_the_run_and_put_back(tmp_path, monkeypatch, command, threads, want):
    import os

    import asrtrain.decode.run as run_mod
    import asrtrain.decode.tune as tune_mod

    seen = []

    def fake(*args, **kwargs):
        seen.append(torch.get_num_threads())
        if command == "tune-lm":
            return {"lm_weight": 0.5, "word_bonus": 1.0, "oov_penalty": "closed", "att_rescore": 0.0,
                    "beam_size": 8, "dev_wer": 1.0}
        return 3

    target = {"decode": (run_mod, "decode"), "forward": (run_mod, "forward"),
              "tune-lm": (tune_mod, "tune_lm")}
    monkeypatch.setattr(*target[command], fake)
    before = torch.get_num_threads()
    extra = ["--lm", "lm.arpa"] if command == "tune-lm" else []
    res = run(command, tmp_path / "exp", tmp_path / "data", tmp_path / "out", *extra, *threads)
    assert res.exit_code == 0, res.output
    assert seen == [want or len(os.sched_getaffinity(0))]
    assert torch.get_num_threads() == before


def test_beam_size_with_a_greedy_decode_is_an_error(world, tmp_path):
    # the exp config decodes greedy by default, so --beam-size alone would be ignored
    err = one_error(run("decode", world["exp"], world["feats"], tmp_path / "d", "--beam-size", "30",
                        "--device", "cpu"))
    assert "--beam-size 30 is for --method beam or the lexicon search; this decode is greedy" in err, err
    assert "fix: pass --method beam" in err and not (tmp_path / "d").exists()


def test_decode_logs_its_progress(world, tmp_path, caplog):
    with caplog.at_level("INFO"):
        res = run("decode", world["exp"], world["feats"], tmp_path / "d", "--method", "beam",
                  "--beam-size", "4", "--device", "cpu")
    assert res.exit_code == 0, res.output
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("decode: ")]
    n = len((tmp_path / "d" / "text").read_text().splitlines())
    assert n == 24 and lines[-1] == f"decode: {n}/{n} utt (100%)", lines
    assert 5 <= len(lines) <= 11, lines  # about every 10% (or 30 s), not every utterance


@pytest.mark.parametrize("command,args", [
    ("decode", ["exp", "feats", "out"]),
    ("forward", ["exp", "feats", "out.ark"]),
    ("tune-lm", ["exp", "feats", "t", "--lm", "lm.arpa"]),
])
def test_a_bad_device_names_the_option_not_the_train_key(tmp_path, command, args):
    err = one_error(run(command, *[tmp_path / a if i < 3 else a for i, a in enumerate(args)], "--device", "gpu"))
    assert "--device = 'gpu' is not one of auto, cpu, cuda, cuda:N" in err and "train.device" not in err, err
