#!/usr/bin/env python
"""Calibrate the epoch simulator (``asrtrain simulate``) both ways (issue 13).

1. **published**: the published H-ADPSGD system from its stated hardware
   (:func:`asrtrain.simulate.report.published_v100`: the one-V100 step time derived from 40 x 5.2 h =
   208 h for 16 epochs of SWB-2000 in batches of 128 21-frame chunks, 8 GPUs per node on 100 GB/s links,
   100 Gb/s between nodes). Predicts the 64-GPU speed-up and time, and the 32-GPU time, beside the
   published 40x, 5.2 h and 11.5 h, then moves one assumption at a time to show which moves the figure.
2. **self**: real ``asrtrain train`` runs on this machine (the synthetic corpus, 0.3 h, a BLSTM 2x128, one
   torch thread per learner, --epochs 2 epochs of which the last is timed, so the first steps' warm-up
   is left out): ssgd and adpsgd on 2, 4 and 8 learners and h-adpsgd on 4 and 8 (two groups), each with
   and without the last learner slowed 3x (``dist.slowdown``), every configuration --repeats 3 times in
   rounds, the median compared. Two of them calibrate: ``ssgd2`` gives the time of an all-reducing step
   and ``adpsgd2`` that of a gossiping one (its own compute, its waits excluded), both with a core per
   learner (median over the repeats); gloo's latency and bandwidth come from a ping-pong of 2 processes.
   The simulator, with the machine's cores shared by processor sharing (``Cluster.cores_per_node``; the
   computes and, since 2026-11-26, the collectives) and the slow learner idle for twice the part of its
   step before the end of the backward pass (what ``dist.slowdown`` does; that part's share of a step
   read from the same runs' logged ``compute_s``; since 2026-11-27 a gossip exchange's CPU on each side, from
   ``adpsgd2``'s logged ``comm_cpu_s``, also a job on the cores), then predicts rank 0's last-epoch time of
   every run: the other runs are predictions from those two step times, not fits. Three models are printed
   side by side (``--model`` picks the one the last lines report): ``current``; ``threads``, whose step
   is the training thread's CPU and the other threads' CPU as two jobs on the cores (from the calibration
   runs' CPU clocks; SSGD's remaining wait off the cores), with what oversubscribing the cores costs
   (``Cluster.oversub_overhead``, measured by ``scale_probes.measure_oversub`` in the same run, apart from
   the timed runs); and ``threads-sync``, the same with that cost measured by processes that meet at a
   barrier every step. docs/scale.md gives the rules that choose between them.

    python scripts/bench_scale.py                     # both parts (self: about 20 minutes on 2 cores)
    python scripts/bench_scale.py --repeats 1         # one run of each (about 7 minutes; noisier)
    python scripts/bench_scale.py --parts published   # seconds

Last two lines: ``sim_over_measured_max_rel_err: E`` (worst |predicted - measured| / measured over the
self-calibration runs) and ``sim_published_hadpsgd64_speedup: S``.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_common import Run, markdown_table, synth_corpus, train  # noqa: E402
from scale_probes import measure_gloo, measure_oversub  # noqa: E402

from asrtrain.simulate import report as sr  # noqa: E402
from asrtrain.simulate.model import Cluster, Link, Plan, Workload  # noqa: E402
from asrtrain.simulate.epoch import simulate_epoch  # noqa: E402


# -- 1. the published system ------------------------------------------------------------------------

def part_published(out: dict) -> None:
    w, c = sr.published_v100()
    pub = sr.PUBLISHED
    print("== published system (predictions of the model; assumptions in asrtrain/simulate/report.py)")
    print(f"one V100: {w.step_s:.4f} s per batch of 128 x 21 frames, {w.batches} batches per epoch, "
          f"{w.step_s * w.batches * 16 / 3600:.0f} h for 16 epochs; model {w.params / 1e6:.1f} M params "
          f"({w.model_bytes / 1e6:.0f} MB)")
    h64 = simulate_epoch(Plan("h-adpsgd"), 64, w, c)
    h32 = simulate_epoch(Plan("h-adpsgd"), 32, w, c)
    s64 = simulate_epoch(Plan("ssgd"), 64, w, c)
    a64 = simulate_epoch(Plan("adpsgd"), 64, w, c)
    rows = [["H-ADPSGD 64 V100 (8x8): speed-up", f"{h64.speedup:.1f}x", f"{pub['hadpsgd64_speedup']:.0f}x"],
            ["H-ADPSGD 64 V100: 16 epochs", f"{16 * h64.epoch_s / 3600:.2f} h",
             f"{pub['hadpsgd64_hours']} h"],
            ["H-ADPSGD 32 V100 (4x8): 16 epochs", f"{16 * h32.epoch_s / 3600:.2f} h",
             f"{pub['hybrid32_hours']} h (earlier system)"],
            ["SSGD 64 V100: speed-up", f"{s64.speedup:.1f}x", "-"],
            ["ADPSGD (fixed ring) 64 V100: speed-up", f"{a64.speedup:.1f}x", "-"]]
    print(markdown_table(["", "predicted", "published"], rows))
    print("\nwhat moves the 64-GPU H-ADPSGD speed-up (one assumption changed at a time):")
    cases = [("as above", w, c),
             ("compute spread 0.3 (stragglers inside each group)", replace(w, spread=0.3), c),
             ("no host round trip (exchange and fold free)", w,
              replace(c, exchange_overhead_s=0.0, fold_s=0.0)),
             ("between nodes 25 Gb/s instead of 100", w, replace(c, inter=Link(25e-6, 25e9 / 8))),
             ("inside nodes 12 GB/s (PCIe) instead of 100", w, replace(c, intra=Link(10e-6, 12e9))),
             ("batches of 128 utterances of ~3 s, not 21-frame chunks",
              sr.published_v100(chunk_frames=300)[0], c)]
    for extra_ms in (25, 50, 75, 100):
        cases.append((f"{extra_ms} ms more per step on the multi-GPU run (not in the one-GPU time)",
                      w, replace(c, fold_s=c.fold_s + extra_ms / 1000)))
    rows = []
    for name, ww, cc in cases:
        r = simulate_epoch(Plan("h-adpsgd"), 64, ww, cc)
        rows.append([name, f"{ww.step_s * 1000:.0f} ms", f"{r.speedup:.1f}x",
                     f"{16 * r.epoch_s / 3600:.2f} h"])
    print(markdown_table(["assumption", "V100 step", "speed-up", "16 epochs"], rows))
    out["published64"] = h64.speedup


# -- 2. ourselves -------------------------------------------------------------------------------------

def reuse(work: Path, names) -> list:
    """The finished runs ``names`` already in ``work/runs`` (--reuse), or [] if any is missing."""
    exps = [work / "runs" / name for name in names]
    return [Run(e, float("nan")) for e in exps] if all((e / "final.pt").is_file() for e in exps) else []


WINDOW_RE = re.compile(r"\[(\d+)\] INFO \S+: \[learner \d+\] epoch (\d+) step \d+/\d+ (.*)$", re.M)


def _logged(run, epoch: int):
    """Every learner's log windows of ``epoch``, in log order, as (rank, key=value dict)."""
    for m in WINDOW_RE.finditer(run.log()):
        if int(m.group(2)) == epoch:
            yield int(m.group(1)), dict(item.split("=", 1) for item in m.group(3).split())


def _windows(run, rank: int, epoch: int) -> list:
    """``rank``'s log windows of ``epoch`` as (key=value dict, steps in the window), the first one dropped
    when there are more (see :func:`own_step_s`: it is not the epoch's)."""
    rows = [(kv, float(kv.get("steps", 0)) or 5.0) for r, kv in _logged(run, epoch) if r == rank]
    return rows[1:] if len(rows) > 1 else rows


def own_step_s(run, rank: int, epoch: int) -> float:
    """Mean seconds per step of ``rank`` in ``epoch`` *without* its logged waits for others (the averaging
    round, the lock, the all-reduce inside an H-ADPSGD group), over its log windows: the compute it really
    got, CPU sharing with the other learners included. The first window of each epoch is dropped: in
    epoch 1 it holds the warm-up; in a later epoch it straddles the previous epoch's end (that epoch's
    last step, the end-of-epoch collective, the checkpoint, the barrier), which the epoch clock the
    prediction is compared with does not hold (66-80 ms a step against about 28 in a 2-learner run).
    Gossip strategies only (SSGD's count all-reduce waits inside its compute time, so its waits are not
    all logged)."""
    per = []
    for kv, n in _windows(run, rank, epoch):
        waits = sum(float(kv.get(k, 0.0)) for k in ("round_wait_s", "lock_wait_s", "group_comm_s"))
        per.append((n / float(kv["steps_per_s"]) - waits) / n)
    return statistics.mean(per)


def slept_s(run, rank: int, epoch: int) -> float:
    """Mean seconds per step of ``rank`` in ``epoch`` that ``dist.slowdown``'s sleep is proportional to:
    the logged ``compute_s``, from ``before_step`` to the end of the backward pass (ADPSGD's also holds
    the gradient norm, up to ``apply_step``), over the same windows as :func:`own_step_s`."""
    return statistics.mean(float(kv["compute_s"]) / n for kv, n in _windows(run, rank, epoch))


def cpu_per_step(run, rank: int, epoch: int) -> tuple:
    """Core-seconds per step of ``rank`` in ``epoch``, over the same windows as :func:`own_step_s`, from the
    learner's CPU clocks: (its training thread's, ``main_cpu_s``; its other threads' but the gossip one,
    ``cpu_s - main_cpu_s - comm_cpu_s``: data prefetch, gloo's threads). Waits and the time runnable but
    not running are in neither."""
    rows = _windows(run, rank, epoch)
    main = statistics.mean(float(kv["main_cpu_s"]) / n for kv, n in rows)
    other = statistics.mean((float(kv["cpu_s"]) - float(kv["main_cpu_s"]) - float(kv.get("comm_cpu_s", 0.0)))
                            / n for kv, n in rows)
    return main, max(0.0, other)


def threads_step(runs: list, cores: int, oversub: float, wall: float, epochs: int) -> dict:
    """The ``threads`` model's step from 2-learner calibration ``runs`` (a core each): the training thread's
    CPU (``step_s``) and the other threads' (``side_s``), medians over the runs of the two ranks' means, and
    a wait off the cores (``wait_s``) that makes the model's step the calibrated ``wall`` (SSGD's holds waits
    of its collectives this reading has no other place for; 0 when the two jobs fill it)."""
    from asrtrain.simulate.engine import step_walls
    per = [[cpu_per_step(run, r, epochs) for r in range(2)] for run in runs]
    main = statistics.median(statistics.mean(m for m, _ in p) for p in per)
    side = statistics.median(statistics.mean(o for _, o in p) for p in per)
    busy = max(step_walls([main, main], side, cores, oversub))
    return {"step_s": main, "side_s": side, "wait_s": max(0.0, wall - busy)}


def exchange_cpu_s(run, epoch: int) -> float:
    """Core-seconds of one gossip exchange on one side: the communication threads' logged ``comm_cpu_s``
    over the ``exchanges`` both sides count, every rank's windows of ``epoch`` (0 for a run logged before
    ``comm_cpu_s`` existed)."""
    rows = [kv for _, kv in _logged(run, epoch)]
    exchanges = sum(float(kv.get("exchanges", 0.0)) for kv in rows)
    return sum(float(kv.get("comm_cpu_s", 0.0)) for kv in rows) / exchanges if exchanges else 0.0


def batches_per_epoch(run, n: int, m: int, epochs: int) -> int:
    """The run's data layout in the simulator's unit (batches of one learner's max_frames): its global
    batches of m learners' frames (summed over the n / m groups' steps) times m."""
    return m * sum(run.steps(r) for r in range(0, n, m)) // epochs


def model_params(run) -> int:
    import torch
    state = torch.load(run.exp / "final.pt", map_location="cpu", weights_only=True)["model"]
    return sum(t.numel() for t in state.values() if t.is_floating_point())


def sync_step_s(run, n: int, epochs: int, link: Link, params: int, cores: int) -> float:
    """Seconds of one step of a synchronous run (ssgd) without the model's communication: its epoch over
    its steps, less the count and gradient all-reduces the model charges (on ``cores`` shared cores)."""
    from asrtrain.simulate.model import collective_share, ring_allreduce_s, scalar_allreduce_s
    per_step = run.history()[-1]["seconds"] / (run.steps(0) / epochs)
    share = collective_share(list(range(n)), Cluster(link, link, n, cores_per_node=cores))
    return per_step - (scalar_allreduce_s(n, link) + ring_allreduce_s(n, 4 * params, link)) * share


# Calibration: the two runs the step times come from (one core per learner); the rest are predicted.
CALIBRATION = ("ssgd2", "adpsgd2")


def part_self(work: Path, args, out: dict) -> None:
    corpus = synth_corpus(work, args.hours, 16, 16, "char", 60)
    cores = os.cpu_count() or 1
    print(f"== self-calibration: {corpus.train_utts} training utterances ({args.hours} h synthetic), "
          f"BLSTM {args.layers}x{args.hidden}, max_frames {args.frames} per learner, {args.epochs} epoch(s) "
          f"(the last timed), 1 thread per learner, {cores} CPU cores", flush=True)
    base = [f"model.num_layers={args.layers}", f"model.hidden={args.hidden}", "train.threads=1",
            "train.warmup_steps=10", "train.log_every_steps=5", "train.average_last=1", "dist.timeout_s=300",
            f"train.max_frames={args.frames}", f"train.epochs={args.epochs}"]
    learners = [int(x) for x in args.learners.split(",")]
    configs = [(n, strategy, slow) for n in learners for slow in (False, True)
               for strategy in ("ssgd", "adpsgd", "h-adpsgd") if strategy != "h-adpsgd" or n >= 4]
    configs.sort(key=lambda c: f"{c[1]}{c[0]}{'_slow' if c[2] else ''}" not in CALIBRATION)  # those first
    runs = {}
    for rep in range(1, args.repeats + 1):  # rounds: every configuration once per round (slow drifts spread)
        for n, strategy, slow in configs:
            per_node = n // 2 if strategy == "h-adpsgd" else 0  # two groups
            sets = base + [f"dist.strategy={strategy}", f"dist.learners={n}"]
            sets += [f"dist.learners_per_node={per_node}"] if per_node else []
            sets += [f"dist.slowdown='{n - 1}:{args.slow}'"] if slow else []
            name = f"{strategy}{n}{'_slow' if slow else ''}"
            exp = f"cal_{name}" + (f"_r{rep}" if args.repeats > 1 else "")
            cached = reuse(work, [exp]) if args.reuse else []
            run = cached[0] if cached else train(work, exp, corpus, sets)
            load = float("nan") if cached else os.getloadavg()[0]
            runs.setdefault(name, (n, strategy, slow, per_node, []))[4].append((run, load))

    first = runs["ssgd2"][4][0][0]
    params = model_params(first)
    if args.link:
        lat_us, gbs = args.link
        link = Link(lat_us * 1e-6, gbs * 1e9)
        print(f"gloo given (--link): latency {lat_us:.0f} us, bandwidth {gbs:.2f} GB/s")
    else:
        link = measure_gloo(params * 4)
    # The two step times, each from its calibration runs (median over the repeats): an all-reducing step
    # (ssgd; H-ADPSGD's groups all-reduce every step the same way) and a gossiping step (adpsgd's own
    # compute, its waits excluded).
    sync = statistics.median(sync_step_s(run, 2, args.epochs, link, params, cores)
                             for run, _ in runs["ssgd2"][4])
    gossip = statistics.median(statistics.mean(own_step_s(run, r, args.epochs) for r in range(2))
                               for run, _ in runs["adpsgd2"][4])
    # The part of each step the slow learner's sleep scales with (Strategy._slow_down: the wall time from
    # before_step to the end of the backward pass), from the same calibration runs' logged compute_s.
    sync_frac = min(1.0, statistics.median(slept_s(run, 0, args.epochs)
                                           for run, _ in runs["ssgd2"][4]) / sync)
    gossip_frac = min(1.0, statistics.median(statistics.mean(slept_s(run, r, args.epochs) for r in range(2))
                                             for run, _ in runs["adpsgd2"][4]) / gossip)
    # The CPU of one gossip exchange side (the communication thread's, thread_time), from the same runs.
    xcpu = statistics.median(exchange_cpu_s(run, args.epochs) for run, _ in runs["adpsgd2"][4])
    # The candidate (printed beside; --model picks the one the last lines report): a step as the training
    # thread's CPU and the other threads' on the cores, plus what oversubscription costs (measured apart).
    # threads-sync (since 2026-11-27): the same, with c measured by processes that meet at a barrier every
    # step (every strategy's learners wait for each other each step: all-reduce, group, averaging round).
    given = args.oversub or []
    oversub = given[0] if given else measure_oversub(work, corpus, base, cores)
    oversub_sync = given[-1] if len(given) > 1 else measure_oversub(work, corpus, base, cores, sync=True)

    def threads(c: float) -> dict:
        return {"sync": threads_step([run for run, _ in runs["ssgd2"][4]], cores, c, sync, args.epochs),
                "gossip": threads_step([run for run, _ in runs["adpsgd2"][4]], cores, c, 0.0, args.epochs)}
    th = threads(oversub)
    variants = {"threads": (oversub, th), "threads-sync": (oversub_sync, threads(oversub_sync))}
    print(f"calibrated on {' and '.join(CALIBRATION)} (a core per learner): all-reducing step "
          f"{sync * 1000:.1f} ms, gossiping step {gossip * 1000:.1f} ms; gloo {link.latency_s * 1e6:.0f} us, "
          f"{link.bandwidth_Bps / 1e9:.2f} GB/s; {cores} cores shared by processor sharing; "
          f"slow learner: idle {args.slow - 1:g} x the wall time of the part of its step before the end of "
          f"the backward pass (dist.slowdown): {sync_frac:.3f} of an all-reducing step, {gossip_frac:.3f} of "
          f"a gossiping one; a gossip exchange takes {xcpu * 1000:.2f} ms of CPU on each side "
          f"(Cluster.exchange_cpu_s); the threads model: oversubscription c = {oversub:.3f} "
          f"(Cluster.oversub_overhead; threads-sync: {oversub_sync:.3f}), " + "; ".join(
              f"{kind} step {t['step_s'] * 1000:.1f} ms training thread + {t['side_s'] * 1000:.1f} ms other "
              f"threads' CPU, {t['wait_s'] * 1000:.1f} ms waiting" for kind, t in th.items()))

    def model(name: str, w: Workload, c: Cluster, strategy: str):
        """The (workload, cluster) of model ``name`` for one run."""
        if name in variants:
            cost, steps = variants[name]
            c = replace(c, oversub_overhead=cost)
            w = replace(w, **steps["gossip" if strategy == "adpsgd" else "sync"])
        return w, c

    models = ("current", "threads", "threads-sync")
    rows, every = [], {k: [] for k in models}
    for name, (n, strategy, slow, per_node, reps) in runs.items():
        times = [run.history()[-1]["seconds"] for run, _ in reps]
        measured = statistics.median(times)
        loads = [load for _, load in reps if not math.isnan(load)]  # NaN: a reused run, load unknown
        load = f"{statistics.mean(loads):.1f}" if loads else "n/a"
        spread = f" ({min(times):.2f}-{max(times):.2f})" if len(times) > 1 else ""
        m = n if strategy == "ssgd" else max(1, per_node)
        w = Workload(step_s=gossip if strategy == "adpsgd" else sync,
                     batches=batches_per_epoch(reps[0][0], n, m, args.epochs), params=params,
                     slow_factor=args.slow if slow else 1.0, slow_learners=1 if slow else 0,
                     slowed_frac=gossip_frac if strategy == "adpsgd" else sync_frac)
        c = Cluster(intra=link, inter=link, learners_per_node=n, cores_per_node=cores, exchange_cpu_s=xcpu)
        plan = Plan(strategy, group_size=per_node)
        role = "calibration" if name in CALIBRATION else "predicted"
        preds = {k: simulate_epoch(plan, n, *model(k, w, c, strategy)).epoch_s for k in models}
        for k, p in preds.items():
            every[k].append(((p - measured) / measured, role))
        print(f"  {name}: measured {measured:.2f} s ({role}); predicted "
              + ", ".join(f"{k} {p:.2f} s ({(p - measured) / measured:+.3f})" for k, p in preds.items()),
              flush=True)
        rows.append([name, n, role, f"{measured:.2f}{spread}"]
                    + [f"{p:.2f} ({(p - measured) / measured:+.3f})" for p in preds.values()] + [load])
    what = f"median (min-max) of {args.repeats}" if args.repeats > 1 else "one run"
    print(markdown_table(["run", "learners", "role", f"measured epoch {args.epochs} s, {what}"]
                         + [f"{k}: predicted s (error)" for k in models] + ["load avg (1 min)"], rows))
    for k in models:
        mine = [abs(e) for e, role in every[k] if role == "predicted"]
        print(f"model {k}: worst relative error {max(abs(e) for e, _ in every[k]):.3f} over all "
              f"{len(every[k])} runs, {max(mine):.3f} over the {len(mine)} predicted ones, mean absolute "
              f"{statistics.mean(mine):.3f} over those")
    errs = [abs(e) for e, _ in every[args.model]]
    held = [abs(e) for e, role in every[args.model] if role == "predicted"]
    out["self_err"] = max(errs)
    print(f"model {args.model} (--model): worst relative error {max(errs):.3f} over all {len(errs)} runs, "
          f"{max(held):.3f} over the {len(held)} predicted ones")


def _costs(value: str) -> list:
    """``--oversub C[,C_SYNC]``, parsed once: one or two costs >= 0."""
    try:
        costs = [float(x) for x in value.split(",")]
    except ValueError:
        costs = []
    if not 1 <= len(costs) <= 2 or not all(c >= 0 for c in costs):
        raise argparse.ArgumentTypeError(f"must be C or C,C_SYNC with values >= 0, not {value!r}")
    return costs


def _link(value: str) -> tuple:
    """``--link LATENCY_US,GB_PER_S``, parsed once."""
    try:
        lat_us, gbs = (float(x) for x in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be LATENCY_US,GB_PER_S (e.g. 50,2.4), not {value!r}") from None
    if not (lat_us >= 0 and gbs > 0):
        raise argparse.ArgumentTypeError(f"needs a latency >= 0 and a bandwidth > 0, not {value!r}")
    return lat_us, gbs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("bench_out"))
    ap.add_argument("--parts", default="published,self")
    ap.add_argument("--hours", type=float, default=0.3)
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=2,
                    help="epochs per run; the last one is timed (2: the first epoch's warm-up left out)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of every configuration, in rounds; the median is compared")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--learners", default="2,4,8", help="learner counts of the self-calibration runs")
    ap.add_argument("--slow", type=float, default=3.0, help="the slow learner's dist.slowdown factor")
    ap.add_argument("--model", choices=("current", "threads", "threads-sync"), default="threads",
                    help="the model the last lines report (all are printed): current; threads, a step as "
                         "the training thread's and the other threads' CPU on the cores, with what "
                         "oversubscribing them costs (docs/scale.md); threads-sync, the same with that cost "
                         "measured by processes that meet at a barrier every step")
    ap.add_argument("--oversub", metavar="C[,C_SYNC]", type=_costs,
                    help="use these oversubscription costs (free-running, and with a barrier every step; one "
                         "value: the first only) instead of measuring them (re-analysis with --reuse on a "
                         "machine that is not quiet)")
    ap.add_argument("--link", type=_link, help="LATENCY_US,GB_PER_S: use this gloo link instead of measuring "
                                               "it (as --oversub)")
    ap.add_argument("--reuse", action="store_true", help="reuse finished runs in --work/runs (re-analysis)")
    args = ap.parse_args()
    if args.repeats < 1 or args.epochs < 1:
        ap.error("--repeats and --epochs must be at least 1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    out: dict = {}
    t0 = time.time()
    if "self" in parts:
        part_self(work, args, out)
    if "published" in parts:
        part_published(out)
    print(f"total {time.time() - t0:.0f} s")
    if "self_err" in out:
        print(f"sim_over_measured_max_rel_err: {out['self_err']:.3f}")
    if "published64" in out:
        print(f"sim_published_hadpsgd64_speedup: {out['published64']:.1f}")


if __name__ == "__main__":
    main()
