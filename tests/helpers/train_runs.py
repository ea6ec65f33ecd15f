"""Small CLI training runs shared by the loop-contract tests: a module-scoped feature task and ``train``.

A test module that uses the ``data`` fixture imports it by name (pytest finds fixtures in the module's
namespace); each importing module gets its own module-scoped copy.
"""

import pytest
import torch
from click.testing import CliRunner

from asrtrain.cli import cli
from tests.helpers.featfix import make_task

SMALL = ["model.num_layers=1", "model.hidden=24", "model.subsample=2", "train.max_frames=1500",
         "train.warmup_steps=4", "train.lr=0.005", "train.log_every_steps=3", "train.epochs=3",
         "specaug.enabled=true", "model.dropout=0.2"]


def invoke_train(data, exp, sets, extra):
    """``asrtrain train`` on ``data`` = ``(train_dir, dev_dir, tokenizer)`` with ``--set`` for each of
    ``sets`` and the extra CLI arguments; the click result."""
    tr, dev, tok = data
    args = ["train", "--train-data", str(tr), "--dev-data", str(dev), "--tokenizer", str(tok), "--exp-dir", str(exp)]
    for s in sets:
        args += ["--set", s]
    return CliRunner().invoke(cli, args + list(extra), catch_exceptions=False)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """``(train_dir, dev_dir, tokenizer)`` of 48 train / 12 dev utterances."""
    return make_task(tmp_path_factory.mktemp("feats"), 48, 12)


def train(data, exp, *extra):
    """``asrtrain train`` with the ``SMALL`` settings and any extra CLI arguments."""
    return invoke_train(data, exp, SMALL, extra)


def params(path):
    """The model state dict of a checkpoint or final.pt."""
    return torch.load(path, map_location="cpu", weights_only=True)["model"]
