"""The epoch simulator's inputs and cost formulas: the workload, the cluster, a plan, collective costs and
per-rank step-time draws. :mod:`asrtrain.simulate.epoch` runs an epoch from them (and documents the
overlap rules); :mod:`asrtrain.simulate.gossip` is its ADPSGD / H-ADPSGD event model.

**Inputs.**

- :class:`Workload`: one learner's step time (mean, a spread, and a slow-learner factor for the
  last ``slow_learners`` ranks), the batches of one epoch at one learner's batch, the model size.
  A step's time is ``step_s * factor * L`` with ``L`` log-normal of mean 1 and coefficient of variation
  ``spread``, drawn from a generator seeded by (seed, rank): runs are deterministic.
- :class:`Cluster`: an alpha-beta network, ``latency + bytes / bandwidth``, with one :class:`Link` inside
  a node and one between nodes (``learners_per_node`` consecutive ranks share a node); the per-exchange
  cost of the gossip's snapshot and averaging; the per-step cost of folding averaging into the weights;
  and ``cores_per_node``: 0 (the default) gives every learner its own device (a GPU each); ``k`` makes a
  node's learners share ``k`` cores by processor sharing (each learner one thread: m learners computing at
  once each run at ``min(1, k / m)`` of a core), as a CPU job with more learners than cores does. Then
  ``step_s`` is a step's work in core-seconds, and a slow learner's extra time is idle, not compute: it
  computes its step (sharing the cores), then waits ``slow_factor - 1`` times that step's wall time, as
  ``dist.slowdown`` (a sleep) does. With a device each, the two readings are the same.
- ``Workload.slowed_frac``: the part of a step that sleep is proportional to. ``Strategy._slow_down``
  sleeps after the backward pass for ``slow_factor - 1`` times the wall time since ``before_step``; the
  rest of the step (gradient norm, the optimizer step, ADPSGD's fold of landed averaging, the next
  ``before_step``) is not slept for. 1 (the default) slows the whole step (a slower device); a
  calibration reads the fraction from a run's logged ``compute_s`` (``scripts/bench_scale.py``).
  A slow step is then ``work * (1 + (slow_factor - 1) * slowed_frac)``; on shared cores the learner
  computes that part, sleeps, then computes the rest (SSGD, whose learners start each step together, takes
  the sleep as that share of the step's shared wall time).

**Communication costs** (``n`` learners, ``B`` bytes, ``link`` the slowest link the group spans):

- ring all-reduce: ``2 (n - 1) latency + 2 (n - 1) / n * B / bandwidth``;
- a scalar all-reduce (the loss count): ``2 ceil(log2 n) latency`` (a tree);
- broadcast (pipelined chain): ``(n - 1) latency + B / bandwidth``;
- one gossip exchange: the request (``B``) to the passive, then its reply (``B``); with
  ``Cluster.exchange_overhead_s`` (each side's snapshot and averaging) on each side: the active's half
  before the request and half after the reply, the passive's whole before its reply (until 2026-11-28 the
  active paid it twice).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List

import numpy as np

from asrtrain.simulate.engine import oversub_cost

STRATEGIES = ("single", "ssgd", "adpsgd", "h-adpsgd")


@dataclass(frozen=True)
class Link:
    """Alpha-beta link: a message of ``b`` bytes takes ``latency_s + b / bandwidth_Bps`` seconds."""

    latency_s: float
    bandwidth_Bps: float

    def seconds(self, nbytes: float) -> float:
        return self.latency_s + nbytes / self.bandwidth_Bps


@dataclass(frozen=True)
class Cluster:
    intra: Link  # between learners of one node (NVLink, shared memory)
    inter: Link  # between nodes (one NIC per node, full duplex)
    learners_per_node: int = 8
    exchange_overhead_s: float = 0.0  # per gossip exchange, each side: snapshot + averaging
    fold_s: float = 0.0  # per step, on a gossiping learner's critical path: fold the delta into the weights
    cores_per_node: int = 0  # 0: every learner computes on its own device; k: a node's learners share k cores
    exchange_cpu_s: float = 0.0  # shared cores only: core-seconds of one gossip exchange on each side
    oversub_overhead: float = 0.0  # shared cores only: m > k jobs each cost 1 + c (m / k - 1) x their work

    def node(self, rank: int) -> int:
        return rank // max(1, self.learners_per_node)

    def link(self, ranks: List[int]) -> Link:
        """The link a group of ranks communicates over: the inter-node one if it spans nodes."""
        return self.intra if len({self.node(r) for r in ranks}) <= 1 else self.inter


@dataclass(frozen=True)
class Workload:
    step_s: float  # mean seconds of one learner's step at its batch (forward, backward, update)
    batches: int  # batches in one epoch at one learner's batch (= steps of a single learner)
    params: int
    bytes_per_param: int = 4
    spread: float = 0.0  # coefficient of variation of a step's time
    slow_factor: float = 1.0  # the last `slow_learners` ranks step this many times slower
    slow_learners: int = 0  # (only when at least one normal learner remains)
    slowed_frac: float = 1.0  # the part of a step the slow learner's sleep is proportional to (see above)
    seed: int = 1
    side_s: float = 0.0  # shared cores only: core-seconds per step of the learner's other threads
    wait_s: float = 0.0  # shared cores only: seconds per step off the cores (waits inside the step)

    @property
    def model_bytes(self) -> int:
        return self.params * self.bytes_per_param


@dataclass(frozen=True)
class Plan:
    """A strategy and its options, e.g. ``Plan("adpsgd", "random", delay_by_one=True)``."""

    strategy: str
    schedule: str = "fixed"  # fixed | random (adpsgd, h-adpsgd)
    delay_by_one: bool = False
    group_size: int = 0  # h-adpsgd; 0 = learners per node (at most n / 2)
    balance: str = "static"  # static | dynamic

    @property
    def label(self) -> str:
        out = self.strategy
        if self.strategy in ("adpsgd", "h-adpsgd"):
            out += "-random" if self.schedule == "random" else ""
            out += "-dbo" if self.delay_by_one else ""
        return out


# -- collective costs ---------------------------------------------------------------------------------

def ring_allreduce_s(n: int, nbytes: float, link: Link) -> float:
    """``2 (n-1) latency + 2 (n-1)/n * nbytes / bandwidth``; 0 for one learner."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * link.latency_s + 2 * (n - 1) / n * nbytes / link.bandwidth_Bps


def scalar_allreduce_s(n: int, link: Link) -> float:
    return 0.0 if n <= 1 else 2 * math.ceil(math.log2(n)) * link.latency_s


def broadcast_s(n: int, nbytes: float, link: Link) -> float:
    return 0.0 if n <= 1 else (n - 1) * link.latency_s + nbytes / link.bandwidth_Bps


# -- step times ---------------------------------------------------------------------------------------

def _is_slow(w: Workload, rank: int, n: int) -> bool:
    return 0 < w.slow_learners < n and rank >= n - w.slow_learners


class StepTimes:
    """Deterministic per-rank step-time draws (``draw(rank)`` gives that rank's next step)."""

    def __init__(self, w: Workload, n: int):
        self.w, self.n = w, n
        self.sigma = math.sqrt(math.log1p(w.spread ** 2))
        self._rngs: Dict[int, np.random.Generator] = {}
        self._buf: Dict[int, List[float]] = {}

    def factor(self, rank: int) -> float:
        """A step's wall time over its work: ``1 + (slow_factor - 1) * slowed_frac`` for a slow learner."""
        if not _is_slow(self.w, rank, self.n):
            return 1.0
        return 1.0 + (self.w.slow_factor - 1.0) * self.w.slowed_frac

    def draw(self, rank: int) -> float:
        buf = self._buf.get(rank)
        if not buf:
            buf = self._buf[rank] = self.block(rank, 1024)[::-1].tolist()
        return buf.pop()

    def block(self, rank: int, k: int) -> np.ndarray:
        """The next ``k`` step times of ``rank`` (k,)."""
        base = self.w.step_s * self.factor(rank)
        if self.sigma == 0:
            return np.full(k, base)
        rng = self._rngs.setdefault(rank, np.random.default_rng([self.w.seed, rank]))
        return base * np.exp(self.sigma * rng.standard_normal(k) - self.sigma ** 2 / 2)


# -- groups and shared cores --------------------------------------------------------------------------

def group_size_for(plan: Plan, n: int, cluster: Cluster) -> int:
    """H-ADPSGD's M: the plan's, else the learners per node, at most n / 2 (two groups at least)."""
    m = plan.group_size or cluster.learners_per_node
    return max(1, min(m, n // 2))


def collective_share(ranks: List[int], cluster: Cluster) -> float:
    """A collective's wall time over its link time when ``ranks`` enter it together and nothing else runs:
    ``max(1, m / k)``, m the most of them on one node, k its cores (every process needs a core to
    progress), times the oversubscription cost ``1 + c (m / k - 1)``; 1 with a device each."""
    if cluster.cores_per_node <= 0:
        return 1.0
    busiest = max(Counter(cluster.node(r) for r in ranks).values())
    return max(1.0, busiest / cluster.cores_per_node) \
        * oversub_cost(busiest, cluster.cores_per_node, cluster.oversub_overhead)
