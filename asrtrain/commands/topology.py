"""``asrtrain topology``: the spectral gap of an ADPSGD averaging schedule, and how it shrinks with N."""

from __future__ import annotations

import click


@click.command()
@click.option("--learners", type=int, required=True, help="Number of learners on the ring (even, >= 2).")
@click.option("--schedule", type=click.Choice(["fixed", "random", "random-ring"]), default="fixed",
              show_default=True,
              help="Partner schedule: fixed (alternate left/right), random (a random passive learner), "
                   "random-ring (a random ring neighbour; shown for comparison).")
@click.option("--max", "largest", type=int, default=64, show_default=True,
              help="Largest ring size in the table of gaps (4, 8, 16, ... up to this).")
def topology(learners: int, schedule: str, largest: int) -> None:
    """Print the spectral gap of the schedule's (expected) mixing matrix and a table over N."""
    from asrtrain.distributed.topology import report
    from asrtrain.errors import AsrError
    if learners < 2 or learners % 2:  # before report(): its refusal names train's --strategy
        raise AsrError(f"--learners {learners}: an ADPSGD ring needs an even number of learners (>= 2) to "
                       "split into active and passive halves",
                       fix=f"give an even --learners, e.g. --learners {max(2, learners + learners % 2)}")
    click.echo(report(learners, schedule, largest))
