"""``asrtrain simulate``: predicted epoch time and speed-up of ssgd / adpsgd / h-adpsgd on 1..N learners.

Defaults are the published V100 cluster (:func:`asrtrain.simulate.report.published_v100`); every
option replaces one of its numbers. The figures are predictions of a model, not measurements.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, replace
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
#: Upper bounds: each far above any real cluster or model, and low enough that no product of them
#: (an epoch's seconds, bytes on the wire) overflows to inf or nan.
_MAX = {"step_s": 1e4, "batches": 1e10, "params": 1e13, "bytes_per_param": 64, "spread": 10.0,
        "slow_factor": 1e4, "slow_learners": MAX_LEARNERS, "learners_per_node": MAX_LEARNERS,
        "intra_gbps": 1e6, "inter_gbit": 1e7, "intra_latency_us": 1e8, "inter_latency_us": 1e8,
        "exchange_overhead_ms": 1e7, "fold_ms": 1e7, "cores_per_node": 1e6, "exchange_cpu_ms": 1e7,
        "oversub_overhead": 1e3}
MAX_EPOCHS = 100_000


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
    for name, hi in _MAX.items():
        value = over.get(name)
        if value is not None and value > hi:
            raise AsrError(f"{_option(name)} {value!r} is more than {hi:g}, beyond any cluster or model the "
                           "simulation describes (its times would overflow)",
                           fix=f"give {_option(name)} at most {hi:g}, or leave it out for the default")
    if not 1 <= max_learners <= MAX_LEARNERS:
        raise AsrError(f"--max-learners {max_learners} must be 1 .. {MAX_LEARNERS} (the simulation's time "
                       "and memory grow with the learner count)", fix="e.g. --max-learners 1024")
    if not 1 <= epochs <= MAX_EPOCHS:
        raise AsrError(f"--epochs {epochs} must be >= 1 and <= {MAX_EPOCHS}", fix="give the epochs of the run, e.g. --epochs 16")


def _learner_counts(text: str) -> List[int]:
    """``--learners 1,2,4`` as sorted distinct integers, each 1 .. MAX_LEARNERS ([] when not given)."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if not (item.isdigit() and 1 <= int(item) <= MAX_LEARNERS):
            raise AsrError(f"--learners: {item!r} is not a learner count 1 .. {MAX_LEARNERS} (the "
                           "simulation's time and memory grow with the count)",
                           fix="give comma-separated counts, e.g. 1,2,4,8")
        out.append(int(item))
    if text.strip() and not out:
        raise AsrError(f"--learners {text!r} names no learner count",
                       fix="give comma-separated counts, e.g. 1,2,4,8")
    return sorted(set(out))


def _check_usage(over: dict, plot_path: Optional[Path]) -> None:
    """Options the model would ignore or misread, refused before minutes of simulation."""
    if over.get("slow_factor") is not None and over["slow_factor"] < 1.0:
        raise AsrError(f"--slow-factor {over['slow_factor']!r} must be >= 1 (a slow learner's step time "
                       "over a normal one's)",
                       fix="give --slow-factor >= 1, e.g. 3 for learners three times slower")
    if not over.get("cores_per_node"):
        for name in ("exchange_cpu_ms", "oversub_overhead"):
            if over.get(name):
                raise AsrError(f"{_option(name)} applies only to CPU learners sharing a node's cores, and "
                               "--cores-per-node is not given", fix=f"add --cores-per-node K, or leave "
                               f"{_option(name)} out (GPU learners: --exchange-overhead-ms)")
    if plot_path is not None:
        where = Path(plot_path).absolute().parent
        while not where.exists() and where != where.parent:
            where = where.parent
        if not where.is_dir() or not os.access(where, os.W_OK | os.X_OK):
            raise AsrError(f"--plot {plot_path}: cannot write in {where}",
                           fix="give a path in a directory you can write")


def _plans(strategies: str, balance: str) -> list:
    from asrtrain.simulate.epoch import parse_plan

    plans = list({p.label: p for p in (parse_plan(s, balance) for s in strategies.split(",") if s.strip())}
                 .values())
    if not plans:
        raise AsrError(f"--strategies {strategies!r} names no strategy",
                       fix="give e.g. --strategies ssgd,adpsgd,h-adpsgd")
    return plans


@click.command()
@click.option("--strategies", default="ssgd,adpsgd,adpsgd-random,adpsgd-dbo,h-adpsgd", show_default=True,
              help="Comma-separated: ssgd, adpsgd[-random][-dbo], h-adpsgd[-random][-dbo] (-random: random "
                   "partners instead of the fixed ring; -dbo: delay-by-one).")
@click.option("--learners", default="",
              help="Comma-separated learner counts (default: 1, 2, 4 ... --max-learners).")
@click.option("--max-learners", type=int, default=1024, show_default=True,
              help="Largest learner count of the default --learners (1, 2, 4, ... up to this).")
@click.option("--balance", type=click.Choice(["static", "dynamic"]), default="static", show_default=True,
              help="How adpsgd/h-adpsgd learners share an epoch's batches (train.balance).")
@click.option("--step-s", type=float,
              help="Mean seconds of one learner's step at its batch (forward, backward, update) "
                   "[published: 0.175].")
@click.option("--batches", type=int,
              help="Batches per epoch at one learner's batch: one learner's steps per epoch (every learner "
                   "keeps this batch, so the global batch grows with the learners) [published: 267,857].")
@click.option("--params", type=int, help="Model parameters (trainable) [published: 43.2 M].")
@click.option("--bytes-per-param", type=int, help="Bytes per parameter on the wire [4].")
@click.option("--spread", type=float,
              help="Coefficient of variation (std / mean) of a step's time, log-normal [0].")
@click.option("--slow-factor", type=float, help="The slow learners' step-time factor, >= 1 [1].")
@click.option("--slow-learners", type=int,
              help="How many learners are slow: the last ranks, and only where a normal one remains "
                   "(none on this many learners or fewer) [0].")
@click.option("--learners-per-node", type=int,
              help="Learners per node (consecutive ranks); h-adpsgd group size, at most learners / 2 [8].")
@click.option("--intra-gbps", type=float, help="Bandwidth inside a node, GB/s (bytes) [100].")
@click.option("--intra-latency-us", type=float, help="Latency inside a node, us [5].")
@click.option("--inter-gbit", type=float, help="Bandwidth between nodes, Gbit/s (bits) [100].")
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
@click.option("--epochs", type=int, default=16, show_default=True, help="Epochs of the hours column.")
@click.option("--format", "fmt", type=click.Choice(["table", "tsv", "json"]), default="table",
              show_default=True,
              help="table: aligned, for reading; tsv: a header and one line per result (full precision, "
                   "bytes; notes on stderr); json: one object with the inputs and the results.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the speed-up PNG here.")
def simulate(strategies: str, learners: str, max_learners: int, balance: str, plot_path: Optional[Path],
             epochs: int, fmt: str, **over) -> None:
    """Print time per epoch, speed-up, MB sent per learner per epoch, staleness and the hours of --epochs
    epochs for each strategy and learner count; optionally plot the speed-up.

    The defaults describe the published cluster (64 V100s, 8 a node, 100 Gb/s between nodes, a 172 MB
    BLSTM); every option replaces one of its numbers. Every figure is a prediction of a model, not a
    measurement. Rows print as they are simulated, seconds each (the default sweep takes minutes).
    """
    from asrtrain.simulate import report as sr
    from asrtrain.simulate.model import Link
    from asrtrain.simulate.epoch import check_plan, simulate_epoch, single_epoch_s

    _check_options(over, max_learners, epochs)
    _check_usage(over, plot_path)
    ns = _learner_counts(learners) or sr.powers_of_two(max_learners)
    plans = _plans(strategies, balance)
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

    # What each strategy can run on, before any simulation: a strategy with no count is refused.
    runs, skipped = [], []  # (plan, n); (label, counts, reason)
    for plan in plans:
        reasons: dict = {}
        for n in ns:
            try:
                check_plan(plan, n, w, c)
                runs.append((plan, n))
            except AsrError as err:
                reasons.setdefault(err.message, []).append(n)
        if sum(len(v) for v in reasons.values()) == len(ns):
            message, counts = next(iter(reasons.items()))
            raise AsrError(f"--strategies {plan.label} --learners {','.join(map(str, counts))}: {message}",
                           fix="give learner counts it can run on, e.g. --learners 2,4,8")
        skipped += [(plan.label, counts, message) for message, counts in reasons.items()]

    one = single_epoch_s(w)
    notes = [f"predictions (a model, not measurements): step {w.step_s:.4g} s, {w.batches} batches/epoch, "
             f"{w.model_bytes / 1e6:.1f} MB model, {c.learners_per_node} learners/node"
             + (f", {c.cores_per_node} shared cores/node" if c.cores_per_node else "")
             + f"; MB/learner: sent by one learner in one epoch; hours: {epochs} epochs"]
    if w.slow_learners and w.slow_factor != 1.0:
        notes.append(f"slow learners: the last {w.slow_learners} step {w.slow_factor:g}x slower where a "
                     f"normal learner remains (none on {w.slow_learners} learners or fewer)")
    tail = [f"not simulated: {label} on {', '.join(map(str, counts))} learners: {message}"
            for label, counts, message in skipped]
    tail.append(f"one learner: {one:.1f} s per epoch, {epochs * one / 3600:.1f} h for {epochs} epochs")

    results = []
    if fmt == "table":
        for line in notes:
            click.echo(f"# {line}")
        click.echo(sr.table_header())
    elif fmt == "tsv":
        for line in notes:
            click.echo(f"# {line}", err=True)
        click.echo("\t".join(sr.FIELDS))
    for plan, n in runs:
        r = simulate_epoch(plan, n, w, c)
        results.append(r)
        if fmt == "table":
            click.echo(sr.table_row(r, epochs))
        elif fmt == "tsv":
            click.echo(sr.tsv_row(list(sr.record(r, epochs).values())))
    if fmt == "json":
        click.echo(json.dumps({
            "note": "predictions of a model, not measurements",
            "epochs": epochs, "one_learner_epoch_s": one,
            "workload": asdict(w), "cluster": asdict(c),
            "results": [sr.record(r, epochs) for r in results],
            "not_simulated": [{"strategy": label, "learners": counts, "reason": message}
                              for label, counts, message in skipped]}, indent=1))
    else:
        for line in tail:
            click.echo(f"# {line}", err=fmt == "tsv")
    if plot_path:
        sr.plot_speedup(results, plot_path, f"predicted speed-up, step {w.step_s:.3g} s, "
                        f"{w.model_bytes / 1e6:.0f} MB, {c.learners_per_node}/node")
        click.echo(f"wrote {plot_path}", err=fmt != "table")
