"""An event-driven model of one training epoch under ``ssgd``, ``adpsgd`` and ``h-adpsgd``.

What it answers: how long an epoch takes on N learners, the speed-up over one learner, the bytes each
learner sends and the mean staleness of the averaging, before anybody buys cluster time. It is a
*model*: every figure it prints is a prediction from the inputs below, nothing more.

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
  (:mod:`asrtrain.distributed.simengine`). 0 (the default) is free processor sharing, as before.

**Outputs** (:class:`EpochResult`): epoch seconds, speed-up (one normal-speed learner's epoch over
this one, the same data), bytes sent per learner in the epoch, and staleness: the mean, over active
rounds, of the optimizer steps the active took between its snapshot and the write-back (the passive
side's snapshot is written back at once, so it is 0 there).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, replace
from typing import Dict, List

import numpy as np

from asrtrain.distributed.simengine import Cpu, Engine, Signal, oversub_cost, shared_step, step_walls
from asrtrain.errors import AsrError

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


# -- the strategies -----------------------------------------------------------------------------------

def group_size_for(plan: Plan, n: int, cluster: Cluster) -> int:
    """H-ADPSGD's M: the plan's, else the learners per node, at most n / 2 (two groups at least)."""
    m = plan.group_size or cluster.learners_per_node
    return max(1, min(m, n // 2))


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
        epoch_s, nbytes, stale, steps = _gossip(plan, n, m, w, cluster)
    return EpochResult(plan.label, n, epoch_s, one / epoch_s, nbytes, stale, steps)


def single_epoch_s(w: Workload) -> float:
    """One normal-speed learner over all batches (rank 0's draws)."""
    return float(StepTimes(replace(w, slow_learners=0), 1).block(0, w.batches).sum())


def collective_share(ranks: List[int], cluster: Cluster) -> float:
    """A collective's wall time over its link time when ``ranks`` enter it together and nothing else runs:
    ``max(1, m / k)``, m the most of them on one node, k its cores (every process needs a core to
    progress), times the oversubscription cost ``1 + c (m / k - 1)``; 1 with a device each."""
    if cluster.cores_per_node <= 0:
        return 1.0
    busiest = max(Counter(cluster.node(r) for r in ranks).values())
    return max(1.0, busiest / cluster.cores_per_node) \
        * oversub_cost(busiest, cluster.cores_per_node, cluster.oversub_overhead)


def _ssgd(n: int, w: Workload, cluster: Cluster):
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


class _Nic:
    __slots__ = ("free",)

    def __init__(self):
        self.free = 0.0


def _gossip(plan: Plan, n: int, m: int, w: Workload, cluster: Cluster):
    """ADPSGD (m = 1) or H-ADPSGD (groups of m): event-driven."""
    eng, times = Engine(), StepTimes(w, n)
    groups = n // m
    leader = [g * m for g in range(groups)]
    # each group's own link: a group whose ranks straddle two nodes (12 learners, 8 a node, groups of 6)
    # pays the inter-node link for its every-step all-reduce and broadcast
    glinks = [cluster.link(list(range(g * m, (g + 1) * m))) for g in range(groups)]
    group_comm = [scalar_allreduce_s(m, k) + ring_allreduce_s(m, w.model_bytes, k) for k in glinks]
    bcast = [broadcast_s(m, w.model_bytes, k) for k in glinks]
    msg = (w.params + 1) * w.bytes_per_param  # the weights and the request/stop flag
    nodes = cluster.node(n - 1) + 1
    nic_out, nic_in = [_Nic() for _ in range(nodes)], [_Nic() for _ in range(nodes)]
    steps, stale, finish = [0] * groups, [], [0.0] * groups
    global_batches = math.ceil(w.batches / m)
    todo = [global_batches]  # dynamic balance: batches not yet claimed

    def share(g: int) -> int:
        return len(range(g, global_batches, groups))

    def partner(a: int, rnd: int) -> int:
        if plan.schedule == "fixed":
            return (a + (1 if rnd % 2 == 0 else -1)) % groups
        return 2 * random.Random(f"{w.seed}/{leader[a]}/{rnd}").randrange(groups // 2) + 1

    def transfer(src: int, dst: int, earliest: float) -> float:
        """End time of one message src -> dst (leader ranks) that may start at ``earliest``."""
        a, b = cluster.node(src), cluster.node(dst)
        if a == b:
            return earliest + cluster.intra.seconds(msg)
        start = max(earliest, nic_out[a].free, nic_in[b].free)
        end = start + cluster.inter.seconds(msg)
        nic_out[a].free = nic_in[b].free = end
        return end

    passive_last: List = [None] * groups  # the passive's last request, in arrival order

    def exchange(a: int, rnd: int):
        """One round: snapshot, request, the passive's turn (arrival order), reply, write-back. A transfer
        takes its NICs when it is ready to go, not earlier: booking the reply when the request arrives
        held the active's incoming NIC idle while the passive served earlier requests."""
        p, snap, over = partner(a, rnd), steps[a], cluster.exchange_overhead_s
        if over:  # each side's snapshot and averaging cost ``over`` in all: the active's half before
            yield over / 2  # its request (the snapshot), half after the reply (as exchange_on_cores)
        yield transfer(leader[a], leader[p], eng.now) - eng.now
        before, mine = passive_last[p], Signal(eng)
        passive_last[p] = mine
        if before is not None:
            yield before  # the passive serves one request at a time, in arrival order
        if over:
            yield over  # the passive's snapshot and write-back
        yield transfer(leader[p], leader[a], eng.now) - eng.now
        mine.fire()
        if over:
            yield over / 2  # the active's write-back
        stale.append(steps[a] - snap)

    def exchange_on_cores(a: int, rnd: int):
        """As ``exchange``, with each side's CPU a job on its node's cores (``Cluster.exchange_cpu_s``)."""
        p, snap, cpu = partner(a, rnd), steps[a], cluster.exchange_cpu_s
        over = cluster.exchange_overhead_s  # as in ``exchange``: half the active's before, half after
        yield cpus[cluster.node(leader[a])].run(cpu / 2)  # snapshot and send
        if over:
            yield over / 2
        yield transfer(leader[a], leader[p], eng.now) - eng.now
        before, mine = passive_last[p], Signal(eng)
        passive_last[p] = mine
        if before is not None:
            yield before  # the passive serves one request at a time, in arrival order
        yield cpus[cluster.node(leader[p])].run(cpu)  # snapshot, write-back, reply
        if over:
            yield over
        yield transfer(leader[p], leader[a], eng.now) - eng.now
        mine.fire()
        yield cpus[cluster.node(leader[a])].run(cpu / 2)  # receive and write back
        yield over / 2
        stale.append(steps[a] - snap)

    cpus = [Cpu(eng, cluster.cores_per_node, cluster.oversub_overhead) for _ in range(nodes)]
    on_cores = cluster.cores_per_node > 0 and cluster.exchange_cpu_s > 0

    def learner_step(r: int):
        """Rank r's step on its node's shared cores (:func:`simengine.shared_step`)."""
        factor = times.factor(r)
        return shared_step(eng, cpus[cluster.node(r)], times.draw(r) / factor, w.side_s, w.wait_s,
                           w.slow_factor if factor != 1.0 else 1.0, w.slowed_frac)

    def collective(g: int, seconds: float):
        """Group g's members in a collective of ``seconds`` link time, on shared cores: each member's part
        is a job of that many core-seconds on its node's cores."""
        if seconds <= 0.0:
            return
        for done in [cpus[cluster.node(r)].run(seconds) for r in range(g * m, (g + 1) * m)]:
            yield done

    def group(g: int):
        active, rnd, pending = g % 2 == 0, 0, None
        mine = share(g)
        while True:
            if plan.balance == "dynamic":
                if todo[0] == 0:
                    break
                todo[0] -= 1
            elif steps[g] >= mine:
                break
            if active:
                if plan.delay_by_one and pending is not None:
                    yield pending
                pending = eng.spawn(exchange_on_cores(g, rnd) if on_cores else exchange(g, rnd))
                rnd += 1
            if cluster.cores_per_node > 0:
                members = [eng.spawn(learner_step(r)) for r in range(g * m, (g + 1) * m)]
                for done in members:
                    yield done
                yield from collective(g, group_comm[g])
            else:
                yield max(times.draw(r) for r in range(g * m, (g + 1) * m)) + group_comm[g]
            steps[g] += 1
            if active and not plan.delay_by_one:
                yield pending
            if cluster.cores_per_node > 0:
                yield cluster.fold_s
                yield from collective(g, bcast[g])
            else:
                yield cluster.fold_s + bcast[g]
        if pending is not None:
            yield pending
        finish[g] = eng.now

    for g in range(groups):
        eng.spawn(group(g))
    eng.run()
    world = cluster.link(list(range(n)))
    end = (ring_allreduce_s(n, 8 * w.params, world) + scalar_allreduce_s(n, world)) \
        * collective_share(list(range(n)), cluster)  # every learner done: nothing else on the cores
    total_steps = sum(steps)
    rounds = len(stale)
    nbytes = (2 * rounds * msg + total_steps * (2 * (m - 1) + (m - 1)) * w.model_bytes) / n \
        + 2 * (n - 1) / n * 8 * w.params
    return max(finish) + end, nbytes, (sum(stale) / rounds if rounds else 0.0), total_steps / groups


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
