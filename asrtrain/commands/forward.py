"""``asrtrain forward EXP_DIR DATA_DIR OUT_ARK``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from asrtrain.decode.options import DEFAULT_THREADS


@click.command()
@click.argument("exp_dir", type=click.Path(path_type=Path))
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.argument("out_ark", type=click.Path(path_type=Path))
@click.option("--checkpoint", type=click.Path(path_type=Path), help="Model file instead of EXP_DIR/final.pt.")
@click.option("--device", default="auto", show_default=True,
              help="auto (the GPU when CUDA is available) | cpu | cuda | cuda:N.")
@click.option("--threads", type=int, default=DEFAULT_THREADS, show_default=True,
              help="Torch CPU threads (one per job, as Kaldi's nnet3-compute and features --nj; "
                   "0: every core).")
def forward(exp_dir: Path, data_dir: Path, out_ark: Path, checkpoint: Optional[Path], device: str,
            threads: int) -> None:
    """Write log-likelihoods (CE models: log-posterior minus log-prior) to OUT_ARK and its .scp, for
    Kaldi's latgen-faster-mapped."""
    from asrtrain.decode.options import torch_threads
    from asrtrain.decode.run import forward as run
    from asrtrain.device import check_device_spec

    check_device_spec(device, "--device")
    with torch_threads(threads):
        n = run(exp_dir, data_dir, out_ark, checkpoint, device)
    click.echo(f"{n} utterances -> {out_ark}")
