"""``asrtrain simulate``: predicted epoch time and speed-up of ssgd / adpsgd / h-adpsgd on 1..N learners.

Defaults are the published V100 cluster (:func:`asrtrain.distributed.simreport.published_v100`); every
option replaces one of its numbers. The figures are predictions of a model, not measurements.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import click


@click.command()
@click.option("--strategies", default="ssgd,adpsgd,adpsgd-random,adpsgd-dbo,h-adpsgd", show_default=True,
              help="Comma-separated: ssgd, adpsgd[-random][-dbo], h-adpsgd[-random][-dbo].")
@click.option("--learners", default="",
              help="Comma-separated learner counts (default: 1, 2, 4 ... --max-learners).")
@click.option("--max-learners", type=int, default=1024, show_default=True)
@click.option("--balance", type=click.Choice(["static", "dynamic"]), default="static", show_default=True,
              help="How adpsgd/h-adpsgd learners share an epoch's batches (train.balance).")
@click.option("--step-s", type=float, help="Mean seconds of one learner's step [published: 0.175].")
@click.option("--batches", type=int, help="Batches per epoch at one learner's batch [published: 267,857].")
@click.option("--params", type=int, help="Model parameters [published: 43.2 M].")
@click.option("--bytes-per-param", type=int, help="Bytes per parameter on the wire [4].")
@click.option("--spread", type=float, help="Coefficient of variation of a step's time [0].")
@click.option("--slow-factor", type=float, help="The slow learners' step-time factor [1].")
@click.option("--slow-learners", type=int, help="How many learners are slow (the last ranks) [0].")
@click.option("--learners-per-node", type=int, help="Learners per node; h-adpsgd group size [8].")
@click.option("--intra-gbps", type=float, help="Bandwidth inside a node, GB/s [100].")
@click.option("--intra-latency-us", type=float, help="Latency inside a node, us [5].")
@click.option("--inter-gbit", type=float, help="Bandwidth between nodes, Gbit/s [100].")
@click.option("--inter-latency-us", type=float, help="Latency between nodes, us [25].")
@click.option("--exchange-overhead-ms", type=float,
              help="Gossip snapshot + averaging per exchange side, ms [14.4].")
@click.option("--fold-ms", type=float, help="Folding averaging into the weights per step, ms [14.4].")
@click.option("--cores-per-node", type=click.IntRange(min=0),
              help="CPU learners: a node's learners share this many cores (processor sharing; --step-s is "
                   "then core-seconds and a slow learner idles, as dist.slowdown) [0: a device each].")
@click.option("--exchange-cpu-ms", type=click.FloatRange(min=0.0),
              help="With --cores-per-node: CPU of one gossip exchange on each side, ms, taken from the "
                   "shared cores (the comm_cpu_s / exchanges a learner logs) [0].")
@click.option("--oversub-overhead", type=click.FloatRange(min=0.0),
              help="With --cores-per-node: what oversubscription costs, c: m > k jobs on k cores each "
                   "need 1 + c (m / k - 1) times their work (scripts/bench_scale.py measures it) [0].")
@click.option("--epochs", type=int, default=16, show_default=True, help="For the hours column.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the speed-up PNG here.")
def simulate(strategies: str, learners: str, max_learners: int, balance: str, plot_path: Optional[Path],
             epochs: int, **over) -> None:
    """Print time per epoch, speed-up, MB sent per learner and staleness; optionally plot the speed-up."""
    from asrtrain.distributed import simreport as sr
    from asrtrain.distributed.simulate import Link, parse_plan, sweep

    w, c = sr.published_v100()
    wf = {k: over[k] for k in ("step_s", "batches", "params", "bytes_per_param", "spread", "slow_factor",
                               "slow_learners") if over[k] is not None}
    w = replace(w, **wf)
    intra = Link(c.intra.latency_s if over["intra_latency_us"] is None else over["intra_latency_us"] * 1e-6,
                 c.intra.bandwidth_Bps if over["intra_gbps"] is None else over["intra_gbps"] * 1e9)
    inter = Link(c.inter.latency_s if over["inter_latency_us"] is None else over["inter_latency_us"] * 1e-6,
                 c.inter.bandwidth_Bps if over["inter_gbit"] is None else over["inter_gbit"] * 1e9 / 8)
    c = replace(c, intra=intra, inter=inter,
                learners_per_node=over["learners_per_node"] or c.learners_per_node,
                exchange_overhead_s=c.exchange_overhead_s if over["exchange_overhead_ms"] is None
                else over["exchange_overhead_ms"] * 1e-3,
                fold_s=c.fold_s if over["fold_ms"] is None else over["fold_ms"] * 1e-3,
                cores_per_node=over["cores_per_node"] or 0,
                exchange_cpu_s=(over["exchange_cpu_ms"] or 0.0) * 1e-3,
                oversub_overhead=over["oversub_overhead"] or 0.0)
    ns = [int(x) for x in learners.split(",") if x.strip()] or sr.powers_of_two(max_learners)
    plans = [parse_plan(s, balance) for s in strategies.split(",") if s.strip()]
    results = sweep(plans, ns, w, c)
    click.echo(f"# predictions (a model, not measurements): step {w.step_s:.4g} s, "
               f"{w.batches} batches/epoch, "
               f"{w.model_bytes / 1e6:.1f} MB model, {c.learners_per_node} learners/node"
               + (f", {c.cores_per_node} shared cores/node" if c.cores_per_node else ""))
    click.echo(sr.table(results))
    one = results[0].epoch_s / results[0].speedup if results else 0.0
    click.echo(f"# one learner: {one:.1f} s per epoch, {epochs * one / 3600:.1f} h for {epochs} epochs")
    if plot_path:
        sr.plot_speedup(results, plot_path, f"predicted speed-up, step {w.step_s:.3g} s, "
                        f"{w.model_bytes / 1e6:.0f} MB, {c.learners_per_node}/node")
        click.echo(f"wrote {plot_path}")
