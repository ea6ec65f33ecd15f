"""``asrtrain export MODEL OUT --format onnx|torchscript``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["onnx", "torchscript"]), default="onnx", show_default=True)
@click.option("--checkpoint", type=click.Path(path_type=Path), help="Model file instead of MODEL/final.pt.")
@click.option("--cmvn-stats", type=click.Path(path_type=Path),
              help="Training set's cmvn_global.ark, for a global-CMVN model (default: MODEL/cmvn_global.ark).")
def export(model: Path, out: Path, fmt: str, checkpoint: Optional[Path], cmvn_stats: Optional[Path]) -> None:
    """Export MODEL (an exp dir or a pack) into the new directory OUT: the acoustic model as ONNX or
    TorchScript (features and lengths in, log-probs and lengths out, dynamic batch and time), checked
    against torch on a batch of unequal lengths, with the fbank options, CMVN, tokens and a manifest.
    Run an ONNX export with: asrtrain transcribe --engine onnx OUT AUDIO..."""
    from asrtrain.export.bundle import export as run
    click.echo(str(run(model, out, fmt, checkpoint, cmvn_stats)))
