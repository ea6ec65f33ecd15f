"""``asrtrain average EXP_DIR``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click


@click.command()
@click.argument("exp_dir", type=click.Path(path_type=Path))
@click.option("--last", "k", type=int,
              help="Number of epoch checkpoints [default: the run's train.average_last, from its "
                   "config.yaml].")
@click.option("--out", type=click.Path(path_type=Path),
              help="Output file [default: EXP_DIR/avgN.pt, N the number averaged; final.pt is left alone].")
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@click.option("--device", default="cpu", show_default=True,
              help="Where the checkpoints are loaded and summed (auto | cpu | cuda | cuda:N); the file "
                   "written holds host tensors either way.")
def average(exp_dir: Path, k: Optional[int], out: Optional[Path], force: bool, device: str) -> None:
    """Average the (learner-averaged) models of the last K epoch checkpoints into a model file
    (decode it with asrtrain decode --checkpoint FILE)."""
    from asrtrain.device import check_device_spec, resolve_device
    from asrtrain.train.checkpoint import average_exp

    check_device_spec(device, "--device")
    click.echo(str(average_exp(exp_dir, k, out, force, resolve_device(device))))
