"""ADPSGD (groups of one) and H-ADPSGD (groups of M) as an event-driven model of one epoch.

The rules it keeps (what waits for what, passive contention, NIC queueing, exchanges and collectives on
shared cores) are listed in :mod:`asrtrain.simulate.epoch`'s docstring, beside SSGD's; the inputs and
cost formulas are in :mod:`asrtrain.simulate.model`, and the engine (processes, signals,
processor-shared cores) is :mod:`asrtrain.simulate.engine`.
"""

from __future__ import annotations

import math
import random
from typing import List

from asrtrain.simulate.engine import Cpu, Engine, Signal, shared_step
from asrtrain.simulate.model import (Cluster, Plan, StepTimes, Workload, broadcast_s,
                                           collective_share, ring_allreduce_s, scalar_allreduce_s)


class _Nic:
    __slots__ = ("free",)

    def __init__(self):
        self.free = 0.0


def gossip_epoch(plan: Plan, n: int, m: int, w: Workload, cluster: Cluster):
    """ADPSGD (m = 1) or H-ADPSGD (groups of m) on n learners, event-driven. Returns the epoch's seconds, the
    bytes each learner sends, the actives' mean staleness (optimizer steps between snapshot and write-back)
    and the mean optimizer steps per group."""
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
