"""An event-driven model of one training epoch under ``ssgd``, ``adpsgd`` and ``h-adpsgd``.

What it answers: how long an epoch takes on N learners, the speed-up over one learner, the bytes each
learner sends and the mean staleness of the averaging, before anybody buys cluster time. It is a
*model*: every figure it prints is a prediction from its inputs, nothing more.

The inputs and cost formulas are :mod:`asrtrain.simulate.model`'s (its docstring gives them); this
module runs an epoch (SSGD here, ADPSGD and H-ADPSGD in :mod:`asrtrain.simulate.gossip`) and holds
the rules both keep.

**Overlap rules: what waits for what** (as :mod:`asrtrain.distributed.adpsgd`, ``hadpsgd`` and ``comm``
implement them):

- ``ssgd``: every learner takes a slice of every global batch (``ceil(batches / n)`` steps); each step
  ends when the slowest learner has computed, then the count and gradient all-reduces run. Nothing
  overlaps. (The real SSGD runs the gradient all-reduce in DDP's buckets during the backward pass, as
  H-ADPSGD's in-group one: the model charges all of it after the compute, an upper bound.)
- ``adpsgd``: each learner trains its own stream of batches (static: every n-th batch; dynamic: the
  next unclaimed one). An *active* (even) learner starts round k when step k starts (the snapshot is
  the weights step k computes on); the round overlaps step k's compute, and step k waits for it at its
  end, unless ``delay_by_one``: then step k + 1 waits for round k before starting round k + 1.
  Actives only talk to passives; a passive's thread serves requests one at a time **in arrival order**,
  so two actives choosing one passive queue (passive contention). Transfers between nodes hold the
  sending node's outgoing and the receiving node's incoming NIC (first come, first served, by the time a
  transfer is ready to go: a queued reply takes its NICs when the passive gets to it, since 2026-11-28);
  transfers inside a node do not contend. Partners: ``fixed`` alternates right and left ring neighbours,
  ``random`` draws a passive uniformly (seeded by seed, rank, round, as ``Gossip.partner``).
- ``h-adpsgd``: groups of M consecutive ranks step as one: the group's step is its slowest member's
  compute plus the count and gradient all-reduces inside the group (over the inter-node link for a group
  whose ranks straddle two nodes, e.g. 12 learners, 8 a node, groups of 6); the leaders gossip as ADPSGD
  learners (round k starts with step k and is waited for at its end unless delay-by-one); every step
  ends with the fold and the broadcast of the leader's weights inside the group.
- ``adpsgd`` and ``h-adpsgd`` end the epoch when every learner has finished and its last round has
  landed, then a world all-reduce of the float64 weights (the consensus distance) runs.
- With shared cores, an SSGD step starts on every learner at once (the count all-reduce before the
  forward pass is a barrier), so its learners share the cores for the whole step; ADPSGD and H-ADPSGD
  groups step out of phase and share them only while their computes overlap.
- With shared cores, a *collective* takes cores too (since 2026-11-26): its link time was calibrated with
  each process on a core of its own, and every process needs a core to progress (gloo's copies,
  reductions and socket work). So each member's part is a job of that many core-seconds on its node's
  cores, shared with whatever else runs there. SSGD's all-reduces and the epoch-end world all-reduce are
  entered by every learner at once with nothing else running, so they take ``max(1, m / k)`` times the
  link time (m of the collective's learners on the busiest node, k cores); H-ADPSGD's in-group all-reduce
  and broadcast run beside the other groups' computes, so they take that or longer.
- With shared cores, a gossip exchange's own CPU (``Cluster.exchange_cpu_s``, core-seconds per exchange
  and side: the communication thread's snapshot, its sends and receives, the write-back; since
  2026-11-27) is a job on the cores too: the active's half before its request and half after the reply,
  the passive's whole share while it serves (still in arrival order). On 2 learners with a core each
  that CPU mostly runs while the training thread waits for the averaging lock, a wait the calibrated
  gossiping step leaves out; with more learners than cores there is no such slack and every exchange
  takes its CPU from somebody's compute. 0 (the default) leaves exchanges off the cores, as before.
- With shared cores, a step may have two more parts (``Workload.side_s``, ``wait_s``; since 2026-11-27, 0 by
  default): the learner's other threads' CPU (data prefetch, gloo's threads), a job on the cores beside the
  step's compute that the step waits for at its end, and a wait off the cores (what a calibrated step holds
  that is neither). ``step_s`` is then the training thread's CPU alone. A slow learner's sleep scales with
  the slowed part of the compute and of the wait.
- With shared cores, oversubscription may cost work (``Cluster.oversub_overhead``, c; since 2026-11-27):
  while m > k jobs share a node's k cores, each job's work grows by ``1 + c (m / k - 1)``
  (:mod:`asrtrain.simulate.engine`). 0 (the default) is free processor sharing, as before.

**Outputs** (:class:`EpochResult`): epoch seconds, speed-up (one normal-speed learner's epoch over
this one, the same data), bytes sent per learner in the epoch, and staleness: the mean, over active
rounds, of the optimizer steps the active took between its snapshot and the write-back (the passive
side's snapshot is written back at once, so it is 0 there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import List

import numpy as np

from asrtrain.simulate.engine import step_walls
from asrtrain.simulate.gossip import gossip_epoch
from asrtrain.simulate.model import (STRATEGIES, Cluster, Plan, StepTimes, Workload, collective_share,
                                           group_size_for, ring_allreduce_s, scalar_allreduce_s)
from asrtrain.errors import AsrError


def parse_plan(label: str, balance: str = "static") -> Plan:
    """``ssgd``, ``adpsgd[-random][-dbo]``, ``h-adpsgd[-random][-dbo]`` -> a :class:`Plan`."""
    rest, dbo, schedule = label.strip(), False, "fixed"
    if rest.endswith("-dbo"):
        rest, dbo = rest[:-4], True
    if rest.endswith("-random"):
        rest, schedule = rest[:-7], "random"
    if rest not in STRATEGIES or (rest in ("single", "ssgd") and (dbo or schedule != "fixed")):
        raise AsrError(f"unknown strategy {label!r}",
                       fix="use ssgd, adpsgd[-random][-dbo] or h-adpsgd[-random][-dbo]")
    return Plan(rest, schedule, dbo, 0, balance)


@dataclass(frozen=True)
class EpochResult:
    label: str
    learners: int
    epoch_s: float
    speedup: float
    bytes_per_learner: float
    staleness: float
    steps: float  # mean optimizer steps per learner (per group for h-adpsgd)


# -- one epoch ----------------------------------------------------------------------------------------

def check_plan(plan: Plan, n: int, w: Workload, cluster: Cluster) -> None:
    """Raise :class:`AsrError` if :func:`simulate_epoch` cannot simulate ``plan`` on ``n`` learners (a bad
    number, an odd number of gossip groups, ...), without simulating anything."""
    if plan.strategy not in STRATEGIES:
        raise AsrError(f"unknown strategy {plan.strategy!r}", fix=f"use one of {', '.join(STRATEGIES)}")
    if n < 1 or w.batches < 1 or w.step_s <= 0:
        raise AsrError("the simulator needs learners >= 1, batches >= 1 and step_s > 0")
    if not w.slow_factor >= 1.0:
        raise AsrError(f"slow_factor must be >= 1 (a slow learner's step over a normal one's), not "
                       f"{w.slow_factor}")
    if not 0.0 < w.slowed_frac <= 1.0:
        raise AsrError(f"slowed_frac must be in (0, 1], not {w.slowed_frac}")
    if not cluster.exchange_cpu_s >= 0.0:
        raise AsrError(f"exchange_cpu_s must be >= 0, not {cluster.exchange_cpu_s}")
    if not (w.side_s >= 0.0 and w.wait_s >= 0.0):
        raise AsrError(f"side_s and wait_s must be >= 0, not {w.side_s} and {w.wait_s}")
    if not cluster.oversub_overhead >= 0.0:
        raise AsrError(f"oversub_overhead must be >= 0, not {cluster.oversub_overhead}")
    if n == 1:
        return
    if plan.strategy == "single":
        raise AsrError("strategy single runs on one learner only", fix="use ssgd, adpsgd or h-adpsgd")
    if plan.strategy in ("adpsgd", "h-adpsgd"):
        m = group_size_for(plan, n, cluster) if plan.strategy == "h-adpsgd" else 1
        if n % m or (n // m) % 2:
            fix = "use an even number of learners" if m == 1 else \
                f"use a multiple of {2 * m} learners (an even number of groups of {m}, the learners per node)"
            raise AsrError(f"{plan.strategy} needs an even number of groups: {n} learners in groups of {m}",
                           fix=fix)


def simulate_epoch(plan: Plan, n: int, w: Workload, cluster: Cluster) -> EpochResult:
    """One epoch of ``plan`` on ``n`` learners (see the module docstring for the rules)."""
    check_plan(plan, n, w, cluster)
    one = single_epoch_s(w)
    if n == 1:
        return EpochResult(plan.label, 1, one, 1.0, 0.0, 0.0, float(w.batches))
    if plan.strategy == "ssgd":
        epoch_s, nbytes, stale, steps = _ssgd(n, w, cluster)
    else:
        m = group_size_for(plan, n, cluster) if plan.strategy == "h-adpsgd" else 1
        epoch_s, nbytes, stale, steps = gossip_epoch(plan, n, m, w, cluster)
    return EpochResult(plan.label, n, epoch_s, one / epoch_s, nbytes, stale, steps)


def single_epoch_s(w: Workload) -> float:
    """One normal-speed learner over all batches (rank 0's draws)."""
    return float(StepTimes(replace(w, slow_learners=0), 1).block(0, w.batches).sum())


def _ssgd(n: int, w: Workload, cluster: Cluster):
    """SSGD on n learners; returns what :func:`simgossip.gossip_epoch` returns (staleness 0)."""
    steps = math.ceil(w.batches / n)
    times = StepTimes(w, n)
    walls = np.stack([times.block(r, steps) for r in range(n)])  # (n, steps): work x factor
    if cluster.cores_per_node > 0:  # every step starts together (the count all-reduce): share the cores
        factor = np.array([times.factor(r) for r in range(n)])[:, None]
        work = walls / factor
        per_node = max(1, cluster.learners_per_node)
        for lo in range(0, n, per_node):
            for k in range(steps):
                walls[lo:lo + per_node, k] = step_walls(list(work[lo:lo + per_node, k]), w.side_s,
                                                        cluster.cores_per_node, cluster.oversub_overhead)
        walls = (walls + w.wait_s) * factor  # then the slow ones sleep (slow_factor - 1) x slowed_frac of it
    slowest = np.max(walls, axis=0)
    link = cluster.link(list(range(n)))
    comm = (scalar_allreduce_s(n, link) + ring_allreduce_s(n, w.model_bytes, link)) \
        * collective_share(list(range(n)), cluster)  # all in it at once, after every learner's compute
    nbytes = steps * 2 * (n - 1) / n * w.model_bytes
    return float(slowest.sum()) + steps * comm, nbytes, 0.0, float(steps)


def sweep(plans: List[Plan], learners: List[int], w: Workload, cluster: Cluster) -> List[EpochResult]:
    """Every plan at every learner count it can run at (gossip needs an even number of groups)."""
    out = []
    for plan in plans:
        for n in learners:
            if n == 1:  # every strategy is the single learner here
                out.append(replace(simulate_epoch(Plan("single"), 1, w, cluster), label=plan.label))
                continue
            try:
                out.append(simulate_epoch(plan, n, w, cluster))
            except AsrError:
                continue
    return out
