"""``asrtrain prepare an4 AN4_DIR OUT_DIR``: thin click wrapper over :mod:`asrtrain.corpora.an4`."""

from __future__ import annotations

import click


@click.command("an4")
@click.argument("an4_dir", type=click.Path(file_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--dev-utts", type=int, default=100, show_default=True,
              help="The first N training utterances (sorted ids) form dev, as ESPnet's train_dev.")
@click.option("--force", is_flag=True, help="Redo the work even if it is marked done with the same inputs.")
def an4(an4_dir: str, out_dir: str, dev_utts: int, force: bool) -> None:
    """CMU AN4 (an4_sphere: AN4_DIR holds etc/ and wav/) -> OUT_DIR/{train,dev,test}."""
    from asrtrain.corpora.an4 import prepare_an4, summary
    dirs = prepare_an4(an4_dir, out_dir, dev_utts=dev_utts, force=force)
    for line in summary(dirs):
        click.echo(line)
