"""``asrtrain average EXP_DIR``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click


@click.command()
@click.argument("exp_dir", type=click.Path(path_type=Path))
@click.option("--last", "k", type=int, default=3, show_default=True, help="Number of epoch checkpoints.")
@click.option("--out", type=click.Path(path_type=Path), help="Output file (default EXP_DIR/final.pt).")
def average(exp_dir: Path, k: int, out: Optional[Path]) -> None:
    """Average the (learner-averaged) models of the last K epoch checkpoints into a model file."""
    from asrtrain.io import atomic_torch_save
    from asrtrain.train.checkpoint import average_last

    path = out or exp_dir / "final.pt"
    atomic_torch_save({"model": average_last(exp_dir, k), "averaged": k}, path)
    click.echo(str(path))
