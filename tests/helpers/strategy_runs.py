"""Small CLI training runs shared by the strategy tests (spawned gloo learners): a module-scoped feature task,
``train`` with the ``BASE`` settings, and ``final``. Import the ``data`` fixture by name to use it."""

import pytest
import torch

from tests.helpers.featfix import make_task
from tests.helpers.train_runs import invoke_train

BASE = ["model.num_layers=1", "model.hidden=16", "model.subsample=2", "model.dropout=0.0",
        "train.warmup_steps=2", "train.lr=0.01", "train.log_every_steps=2", "train.epochs=2",
        "train.average_last=1"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """``(train_dir, dev_dir, tokenizer)`` of 40 train / 8 dev utterances."""
    return make_task(tmp_path_factory.mktemp("feats"), 40, 8)


def train(data, exp, sets, *extra):
    """``asrtrain train`` with ``BASE`` plus ``sets`` (``key=value``) and any extra CLI arguments."""
    return invoke_train(data, exp, BASE + list(sets), extra)


def final(exp):
    """The model state dict of ``exp/final.pt``."""
    return torch.load(exp / "final.pt", weights_only=True)["model"]
