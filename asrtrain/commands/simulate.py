"""``asrtrain simulate``: predicted epoch time and speed-up of ssgd / adpsgd / h-adpsgd on 1..N learners.

Defaults are the published V100 cluster (:func:`asrtrain.distributed.simreport.published_v100`); every
option replaces one of its numbers. The figures are predictions of a model, not measurements.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import click

from asrtrain.errors import AsrError

#: The most learners simulated: the event simulation's time and memory grow with the count
#: (16384: ~30 s, 0.7 GB; the published cluster had 64).
MAX_LEARNERS = 16384
#: Options that must be positive finite numbers, and those that may also be 0.
_POSITIVE = ("step_s", "batches", "params", "bytes_per_param", "slow_factor", "learners_per_node",
             "intra_gbps", "inter_gbit")
_NON_NEGATIVE = ("spread", "slow_learners", "intra_latency_us", "inter_latency_us", "exchange_overhead_ms",
                 "fold_ms", "cores_per_node", "exchange_cpu_ms", "oversub_overhead")


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check_options(over: dict, max_learners: int, epochs: int) -> None:
    """Refuse numbers the model cannot use (zero bandwidth, NaN step time, ...) before simulating."""
    for names, positive in ((_POSITIVE, True), (_NON_NEGATIVE, False)):
        for name in names:
            value = over.get(name)
            if value is None or (math.isfinite(value) and (value > 0 if positive else value >= 0)):
                continue
            kind = "positive" if positive else "non-negative"
            raise AsrError(f"{_option(name)} {value!r} must be a {kind} finite number",
                           fix=f"give {_option(name)} a {kind} value, or leave it out for the default")
    if not 1 <= max_learners <= MAX_LEARNERS:
        raise AsrError(f"--max-learners {max_learners} must be 1 .. {MAX_LEARNERS} (the simulation's time "
                       "and memory grow with the learner count)", fix="e.g. --max-learners 1024")
    if epochs < 1:
        raise AsrError(f"--epochs {epochs} must be >= 1", fix="give the epochs of the run, e.g. --epochs 16")


def _learner_counts(text: str) -> List[int]:
    """``--learners 1,2,4`` as integers, each 1 .. MAX_LEARNERS."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if not (item.isdigit() and 1 <= int(item) <= MAX_LEARNERS):
            raise AsrError(f"--learners: {item!r} is not a learner count 1 .. {MAX_LEARNERS} (the "
                           "simulation's time and memory grow with the count)",
                           fix="give comma-separated counts, e.g. 1,2,4,8")
        out.append(int(item))
    return out


@click.command()
@click.option("--strategies", default="ssgd,adpsgd,adpsgd-random,adpsgd-dbo,h-adpsgd", show_default=True,
              help="Comma-separated: ssgd, adpsgd[-random][-dbo], h-adpsgd[-random][-dbo].")
@click.option("--learners", default="",
              help="Comma-separated learner counts (default: 1, 2, 4 ... --max-learners).")
@click.option("--max-learners", type=int, default=1024, show_default=True,
              help="Largest learner count of the default --learners (1, 2, 4, ... up to this).")
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
    from asrtrain.distributed.simulate import Link, parse_plan, simulate_epoch, single_epoch_s, sweep

    _check_options(over, max_learners, epochs)
    ns = _learner_counts(learners) or sr.powers_of_two(max_learners)
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
    plans = [parse_plan(s, balance) for s in strategies.split(",") if s.strip()]
    results = sweep(plans, ns, w, c)
    skipped = sr.not_simulated([p.label for p in plans], ns, results)
    for label, counts in skipped:
        if len(counts) == len(ns):  # nothing to show for this strategy: say why, as topology does
            plan = next(p for p in plans if p.label == label)
            try:
                simulate_epoch(plan, counts[0], w, c)
            except AsrError as err:
                raise AsrError(f"--strategies {label} --learners {','.join(map(str, counts))}: {err.message}",
                               fix="give learner counts it can run on, e.g. --learners 2,4,8") from None
    click.echo(f"# predictions (a model, not measurements): step {w.step_s:.4g} s, "
               f"{w.batches} batches/epoch, "
               f"{w.model_bytes / 1e6:.1f} MB model, {c.learners_per_node} learners/node"
               + (f", {c.cores_per_node} shared cores/node" if c.cores_per_node else ""))
    click.echo(sr.table(results))
    for label, counts in skipped:
        click.echo(f"# not simulated: {label} on {', '.join(map(str, counts))} learners (gossip needs an "
                   "even number of groups)")
    one = single_epoch_s(w)
    click.echo(f"# one learner: {one:.1f} s per epoch, {epochs * one / 3600:.1f} h for {epochs} epochs")
    if plot_path:
        sr.plot_speedup(results, plot_path, f"predicted speed-up, step {w.step_s:.3g} s, "
                        f"{w.model_bytes / 1e6:.0f} MB, {c.learners_per_node}/node")
        click.echo(f"wrote {plot_path}")
