"""Feature-dir fixtures: the library's toy feature dir, and a train/dev/tokenizer task built from it."""

from pathlib import Path

from asrtrain.features.toy import WORDS, make_feat_dir  # noqa: F401 - re-exported for the tests


def make_task(root: Path, n_train: int, n_dev: int):
    """A train and a dev feature dir of this task under ``root``, and a word tokenizer of the training
    text: ``(train_dir, dev_dir, tokenizer.model)``."""
    from click.testing import CliRunner

    from asrtrain.cli import cli

    root = Path(root)
    train = make_feat_dir(root / "train", n_train)
    dev = make_feat_dir(root / "dev", n_dev, seed=1)
    r = CliRunner().invoke(cli, ["tokenizer", "train", "--text", str(train / "text"), "--out", str(root / "tok"),
                                 "--model-type", "word", "--vocab-size", "30"])
    assert r.exit_code == 0, r.output
    return train, dev, root / "tok" / "tokenizer.model"
