"""``asrtrain pack EXP OUT``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click


@click.command()
@click.argument("exp", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--lm", type=click.Path(path_type=Path),
              help="Word LM (ARPA) to ship with the model (replaces a pack's own, and its params.yaml).")
@click.option("--params", type=click.Path(path_type=Path),
              help="tune-lm's best.yaml to ship with the LM (replaces a pack's own).")
@click.option("--checkpoint", type=click.Path(path_type=Path), help="Model file instead of EXP/final.pt.")
def pack(exp: Path, out: Path, lm: Optional[Path], params: Optional[Path], checkpoint: Optional[Path]) -> None:
    """Pack EXP's model into OUT: a directory asrtrain transcribe reads with no exp or data dir. EXP is an
    exp dir, or a pack (checked against its manifest; its LM and params are carried across)."""
    from asrtrain.transcribe.pack import pack as run
    click.echo(str(run(exp, out, lm, params, checkpoint)))
