"""``asrtrain decode EXP_DIR DATA_DIR OUT_DIR``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click


@click.command()
@click.argument("exp_dir", type=click.Path(path_type=Path))
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--method", type=click.Choice(["greedy", "beam"]), help="Search (default: the exp config's).")
@click.option("--beam-size", type=int, help="Prefix beam width for --method beam.")
@click.option("--checkpoint", type=click.Path(path_type=Path), help="Model file instead of EXP_DIR/final.pt.")
def decode(exp_dir: Path, data_dir: Path, out_dir: Path, method: Optional[str], beam_size: Optional[int],
           checkpoint: Optional[Path]) -> None:
    """Decode the feature dir DATA_DIR into OUT_DIR/text (and OUT_DIR/ctm when DATA_DIR has segments)."""
    from asrtrain.decode.run import decode as run

    run(exp_dir, data_dir, out_dir, method, beam_size, checkpoint)
