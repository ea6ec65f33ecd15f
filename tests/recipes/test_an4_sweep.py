"""scripts/an4_sweep.py: the rule that picks a variant on dev, and the parsers it reads runs with. The
sweep itself runs for hours on a GPU machine; a broken parser or rule would only show there."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import an4_sweep  # noqa: E402


def entry(mean, complete=True):
    return {"complete": complete, "wer_lm_dev": {"mean": mean}} if complete else {"complete": False}


def test_winner_is_lowest_mean_lm_dev_wer_among_complete_variants():
    res = {"base": entry(12.53), "d3": entry(12.2), "big": entry(11.0, complete=False)}
    assert an4_sweep.pick_winner(["base", "d3", "big"], res) == "d3"


def test_a_tie_keeps_the_variant_listed_first():
    res = {"base": entry(12.53), "d3": entry(12.53)}
    assert an4_sweep.pick_winner(["base", "d3"], res) == "base"
    assert an4_sweep.pick_winner(["d3", "base"], res) == "d3"


def test_no_complete_variant_means_no_winner():
    assert an4_sweep.pick_winner(["a"], {"a": entry(0, complete=False)}) is None


def test_scores_reads_only_this_runs_wer_and_cer_lines(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("stage 6: score\n"
                   "%WER 16.4 | 100 591 | 84.6 12.7 2.7 1.0 16.4 54.0 | d3_s1_greedy_dev\n"
                   "%CER 8.5 | 100 1915 | 92.7 3.0 4.2 1.3 8.5 54.0 | d3_s1_greedy_dev\n"
                   "%WER 12.5 | 100 591 | 89.2 9.0 1.9 1.7 12.5 42.0 | d3_s1_lm_dev\n"
                   "%WER 99.0 | 100 591 | 1 1 1 1 99.0 99.0 | d3_s10_lm_dev\n")
    assert an4_sweep.scores(log, "d3_s1") == {"wer_greedy_dev": 16.4, "cer_greedy_dev": 8.5,
                                              "wer_lm_dev": 12.5}
    assert an4_sweep.scores(tmp_path / "missing.log", "d3_s1") == {}


def test_curve_reads_dev_loss_and_epoch_seconds(tmp_path):
    (tmp_path / "train.log").write_text(
        "06:25:58 [0] INFO asrtrain.train: epoch 1: train_loss 2.5 dev_loss 1.6483 lr 2.00e-03 (8 s)\n"
        "06:26:06 [0] INFO asrtrain.train: epoch 2: train_loss 1.0 dev_loss 0.8137 lr 1.98e-03 (9 s)\n")
    assert an4_sweep.curve(tmp_path) == {"dev_loss": [1.6483, 0.8137], "epoch_s": [8, 9]}


@pytest.mark.parametrize("bad", ["a b", "x/y", ""])
def test_a_variant_name_that_cannot_be_a_tag_is_refused(bad):
    with pytest.raises(SystemExit, match="variant name"):
        an4_sweep.parse_variant(f"{bad}:model.dropout=0.3")


def test_missing_data_dir_is_one_line_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["an4_sweep.py", "--data", str(tmp_path / "nope"), "--work",
                                      str(tmp_path / "w"), "--out", str(tmp_path / "o"), "--variant", "base"])
    with pytest.raises(SystemExit, match=r"nope/train/wav.scp not found; give --data"):
        an4_sweep.main()
    assert not (tmp_path / "w").exists()
