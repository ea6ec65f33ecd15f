"""Training must learn: a fixed tiny task whose dev WER a trained model reaches and a broken one cannot.

The task (featfix): 17 words, each a fixed random 13-dim frame pattern plus noise; 96 training and 30
dev utterances of 2-5 words. A 1-layer BLSTM-CTC of 32 cells, trained 5 epochs (120 Adam steps, about
2 s on one idle core) through the real CLI -- tokenizer, train loop, checkpoint averaging, greedy decode,
scoring -- reaches 0-8% dev WER over seeds 1, 2 and 5 (measured when this test was written). An
untrained model cannot get below 100%: all-blank output deletes every word, and random weights insert
(lr=0 scores 311%). The bar of 30% is far from both, so the test does not depend on the seed's luck,
and the second run shows that the bar does fail a model whose optimizer does nothing.
"""

from pathlib import Path

import pytest
from click.testing import CliRunner

from asrtrain.cli import cli
from tests.helpers.featfix import make_task

TASK = ["model.num_layers=1", "model.hidden=32", "model.subsample=2", "model.dropout=0.0",
        "train.max_frames=1500", "train.max_utts=4", "train.warmup_steps=4", "train.lr=0.02",
        "train.epochs=5", "train.average_last=1", "train.log_every_steps=100", "train.seed=1",
        "specaug.enabled=false"]
MAX_WER = 30.0


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return make_task(tmp_path_factory.mktemp("learn"), 96, 30)


def train_and_score(task, exp: Path, *overrides: str):
    """Train on the task, decode dev greedily, return (dev WER %, last epoch's dev loss)."""
    from asrtrain.score.report import score_text
    train, dev, tok = task
    args = ["train", "--train-data", str(train), "--dev-data", str(dev), "--tokenizer", str(tok),
            "--exp-dir", str(exp)]
    for s in TASK + list(overrides):
        args += ["--set", s]
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(exp / "dec"), "--method", "greedy"])
    assert r.exit_code == 0, r.output
    losses = [float(line.split("dev_loss ")[1].split()[0])
              for line in (exp / "train.log").read_text().splitlines() if "dev_loss" in line]
    return score_text(dev / "text", exp / "dec" / "text").wer, losses


def test_training_learns_the_fixed_task(task, tmp_path):
    wer, losses = train_and_score(task, tmp_path / "ok")
    assert wer <= MAX_WER, f"dev WER {wer:.1f}% > {MAX_WER}%: training stopped learning"
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.slow
def test_the_bar_fails_a_model_that_does_not_learn(task, tmp_path):
    wer, losses = train_and_score(task, tmp_path / "lr0", "train.lr=0", "train.min_lr=0")
    assert wer > MAX_WER and wer >= 90, wer
    assert losses[-1] == pytest.approx(losses[0], rel=1e-3), losses  # nothing moved
