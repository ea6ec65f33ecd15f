"""The benchmark scripts' helpers that read finished runs (scripts/bench_common.py): they are not run by
the suite otherwise, and a broken one only shows after an hour of benchmark."""

import math

import pytest

from tests.helpers.scripts import load_script
from tests.helpers.strategy_runs import data, train  # noqa: F401 - the module-scoped feature fixture

bench_common = load_script("bench_common")


@pytest.mark.slow
def test_averaged_dev_curve_evaluates_every_epoch_checkpoint(data, tmp_path):  # noqa: F811
    Corpus, Run, averaged_dev_curve = bench_common.Corpus, bench_common.Run, bench_common.averaged_dev_curve
    tr, dev, tok = data
    exp = tmp_path / "runs" / "ad"
    r = train(data, exp, ["train.max_frames=1600"], "--strategy", "adpsgd", "--learners", "2")
    assert r.exit_code == 0, r.output
    run = Run(exp, 0.0)
    assert run.steps(0) == run.steps(1) > 0
    rows = averaged_dev_curve(run, Corpus(tr, dev, dev, dev / "text", tok, 40, None))
    assert [row["epoch"] for row in rows] == [1, 2]
    assert all(math.isfinite(row["dev_loss"]) and row["dev_loss"] > 0 and row["dev_wer"] >= 0 for row in rows)
    assert averaged_dev_curve(run, Corpus(tr, dev, dev, dev / "text", tok, 40, None), last_only=True) == rows[-1:]


def test_averaged_dev_curve_numbers_epochs_from_the_checkpoints_kept(data, tmp_path):  # noqa: F811
    """With fewer checkpoints kept than epochs run, each row is the epoch its checkpoint holds (the 16-learner
    large-batch grid evaluates 10 epochs; numbering them from 1 mislabelled the last 5 as epochs 1-5)."""
    Corpus, Run, averaged_dev_curve = bench_common.Corpus, bench_common.Run, bench_common.averaged_dev_curve
    tr, dev, tok = data
    exp = tmp_path / "runs" / "kept"
    r = train(data, exp, ["train.max_frames=1600", "train.epochs=3", "train.keep_checkpoints=2"])
    assert r.exit_code == 0, r.output
    rows = averaged_dev_curve(Run(exp, 0.0), Corpus(tr, dev, dev, dev / "text", tok, 40, None))
    assert [row["epoch"] for row in rows] == [2, 3]


def test_lb_reuse_names_the_settings_a_finished_run_was_not_trained_with(tmp_path):
    """--lb-reuse must not pass off a run trained with other settings as this grid's (it stops instead)."""
    settings_changed = load_script("bench_strategies").settings_changed
    (tmp_path / "config.yaml").write_text("train:\n  lr: 0.005\n  max_frames: 312\ndist:\n  averaging: fixed\n")
    assert settings_changed(tmp_path, ["train.lr=0.005", "train.max_frames=312", "dist.averaging=fixed"]) == []
    assert settings_changed(tmp_path, ["train.max_frames=100", "train.max_frames=312"]) == []  # last one wins
    assert settings_changed(tmp_path, ["train.lr=5e-3"]) == []  # read as training reads it, not as YAML 1.1
    assert settings_changed(tmp_path, ["train.lr=0.00707107", "dist.averaging=random", "model.hidden=8"]) == [
        "train.lr=0.005 (asked 0.00707107)", "dist.averaging=fixed (asked random)", "model.hidden=None (asked 8)"]


@pytest.mark.slow
def test_lb_strategies_subset_and_a_bad_one():
    """--lb-strategies picks which large-batch runs train (without SSGD the table has no ratios to it); a
    bad or empty name gets one line with the fix."""
    import argparse

    import pytest

    largebatch_sizes = load_script("bench_strategies").largebatch_sizes

    def sizes(v):
        return largebatch_sizes(False, argparse.Namespace(
            lb_base=5000, lb_mult=(1,), learners=16, lb_seeds=(1,), lr_rule="none", lb_reuse=False,
            lb_strategies=v))

    assert sizes(None)["lb_strategies"] == ("ssgd", "adpsgd-fixed", "adpsgd-random")
    assert sizes(("ssgd",))["lb_strategies"] == ("ssgd",)
    assert sizes(("adpsgd-fixed",))["lb_strategies"] == ("adpsgd-fixed",)
    assert sizes(None)["lr_rule"] == dict.fromkeys(("ssgd", "adpsgd-fixed", "adpsgd-random"), "none")
    two = largebatch_sizes(False, argparse.Namespace(  # at 2 learners random partners do not run: no rule asked
        lb_base=5000, lb_mult=(1,), learners=2, lb_seeds=(1,), lr_rule="ssgd=sqrt,adpsgd-fixed=linear",
        lb_reuse=False, lb_strategies=None))
    assert two["lr_rule"] == {"ssgd": "sqrt", "adpsgd-fixed": "linear"}
    with pytest.raises(SystemExit, match="unknown ''"):
        sizes(("",))
    with pytest.raises(SystemExit, match="unknown 'adpsgd-rnd'"):
        sizes(("ssgd", "adpsgd-rnd"))


def test_lr_rule_one_for_all_or_one_per_strategy():
    """--lr-rule gives every strategy one rule, or each its own (each at the rule that suits it, as the
    4B question asks); a rule missing, unknown or named twice gets one line with the fix."""
    import pytest

    bench_strategies = load_script("bench_strategies")

    lr_rules, rule_text = bench_strategies.lr_rules, bench_strategies.rule_text

    names = ("ssgd", "adpsgd-fixed", "adpsgd-random")
    assert lr_rules("sqrt", names) == dict.fromkeys(names, "sqrt")
    per = lr_rules("ssgd=sqrt, adpsgd-fixed=linear,adpsgd-random=linear", names)
    assert per == {"ssgd": "sqrt", "adpsgd-fixed": "linear", "adpsgd-random": "linear"}
    assert rule_text(per) == "ssgd sqrt, adpsgd-fixed linear, adpsgd-random linear"
    assert rule_text(lr_rules("none", names)) == "none"
    assert lr_rules("ssgd=linear", ("ssgd",)) == {"ssgd": "linear"}
    with pytest.raises(SystemExit, match="no rule for adpsgd-random"):
        lr_rules("ssgd=sqrt,adpsgd-fixed=linear", names)
    with pytest.raises(SystemExit, match="'ssgd=cube'"):
        lr_rules("ssgd=cube,adpsgd-fixed=linear,adpsgd-random=linear", names)
    with pytest.raises(SystemExit, match="'ssgd=sqrt' is not a strategy of this grid"):
        lr_rules("ssgd=sqrt,ssgd=sqrt", ("ssgd",))
    with pytest.raises(SystemExit, match="unknown rule"):
        lr_rules("sqr", names)


def test_lr_sets_scale_the_recipe_rate():
    RECIPE = bench_common.RECIPE
    import yaml

    lr_sets = load_script("bench_strategies").lr_sets
    base = yaml.safe_load((RECIPE / "train.yaml").read_text())["train"]["lr"]
    assert lr_sets("none", 4) == []
    assert lr_sets("sqrt", 4) == [f"train.lr={base * 2:.6g}"]
    assert lr_sets("linear", 4) == [f"train.lr={base * 4:.6g}"]
