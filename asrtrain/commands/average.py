"""``asrtrain average EXP_DIR``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click


@click.command()
@click.argument("exp_dir", type=click.Path(path_type=Path))
@click.option("--last", "k", type=int, default=3, show_default=True, help="Number of epoch checkpoints.")
@click.option("--out", type=click.Path(path_type=Path), help="Output file (default EXP_DIR/final.pt).")
@click.option("--device", default="cpu", show_default=True,
              help="Where the checkpoints are loaded and summed (auto | cpu | cuda | cuda:N); the file "
                   "written holds host tensors either way.")
def average(exp_dir: Path, k: int, out: Optional[Path], device: str) -> None:
    """Average the (learner-averaged) models of the last K epoch checkpoints into a model file."""
    from asrtrain.device import resolve_device
    from asrtrain.errors import AsrError
    from asrtrain.train.checkpoint import average_last, save_checked

    path = out or exp_dir / "final.pt"
    if path.is_dir():
        raise AsrError("is a directory; --out must be a model file name", path,
                       fix=f"give a file name, e.g. --out {path / 'final.pt'}")
    save_checked({"model": average_last(exp_dir, k, resolve_device(device)), "averaged": k}, path)
    click.echo(str(path))
