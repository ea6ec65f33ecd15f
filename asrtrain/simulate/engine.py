"""The simulator's machinery (:mod:`asrtrain.simulate.epoch`): a tiny discrete-event engine and
processor sharing of a node's cores.

- :class:`Engine` runs processes: generators that yield a delay in seconds or a :class:`Signal` to
  wait for.
- :class:`Cpu` is ``cores`` cores shared by processor sharing: m running jobs each progress at
  :func:`ps_rate` core-seconds per second, ``min(1, cores / m)`` when oversubscription is free.
- :func:`shared_walls` is the closed form of the same sharing for jobs that start together (SSGD's step);
  :func:`step_walls` adds each step's other threads beside it, and :func:`shared_step` is one learner's
  step as a process on a :class:`Cpu` (the gossip strategies).

``overhead`` (``c``, 0 by default) is what oversubscription costs: with m > k jobs on k cores, every job's
work grows by ``1 + c (m / k - 1)`` (context switches, caches refilled after each one), so 4 jobs on 2
cores each progress at ``(1/2) / (1 + c)``. ``scripts/bench_scale.py`` measures c on the machine with
N processes of a fixed training step (:func:`fit_overhead`), as it measures the network.
"""
from __future__ import annotations

import heapq
from typing import Callable, Dict, Iterator, List, Optional, Tuple


class Signal:
    """A one-shot event processes can wait on (``yield signal``)."""

    def __init__(self, eng: "Engine"):
        self.eng, self.done, self._waiters = eng, False, []

    def fire(self) -> None:
        self.done = True
        for cb in self._waiters:
            self.eng.call_at(self.eng.now, cb)
        self._waiters = []

    def then(self, cb: Callable[[], None]) -> None:
        if self.done:
            self.eng.call_at(self.eng.now, cb)
        else:
            self._waiters.append(cb)


class Engine:
    """Processes are generators yielding a delay in seconds or a :class:`Signal` to wait for."""

    def __init__(self):
        self.now, self._q, self._seq = 0.0, [], 0

    def call_at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._q, (t, self._seq, fn))
        self._seq += 1

    def spawn(self, proc: Iterator) -> Signal:
        """Start ``proc`` now (it runs to its first yield at once); the signal fires when it ends."""
        done = Signal(self)
        self._advance(proc, done)
        return done

    def _advance(self, proc: Iterator, done: Signal) -> None:
        try:
            cmd = next(proc)
        except StopIteration:
            done.fire()
            return
        if isinstance(cmd, Signal):
            cmd.then(lambda: self._advance(proc, done))
        else:
            self.call_at(self.now + max(0.0, float(cmd)), lambda: self._advance(proc, done))

    def run(self) -> None:
        while self._q:
            self.now, _, fn = heapq.heappop(self._q)
            fn()


def oversub_cost(m: float, cores: int, overhead: float) -> float:
    """How many times its work each of ``m`` jobs on ``cores`` cores needs:
    ``1 + overhead * max(0, m / k - 1)`` (1.0 exactly without overhead)."""
    return 1.0 + overhead * max(0.0, m / cores - 1.0)


def ps_rate(m: int, cores: int, overhead: float = 0.0) -> float:
    """Core-seconds of work per second for each of ``m`` jobs on ``cores`` cores:
    ``min(1, k / m) / (1 + overhead * max(0, m / k - 1))`` (0 for no jobs)."""
    if m <= 0:
        return 0.0
    return min(1.0, cores / m) / oversub_cost(m, cores, overhead)


def fit_overhead(points: List[Tuple[float, float]]) -> float:
    """The ``overhead`` c that best fits measured slow-downs: ``points`` are (m / k, s) with s the time
    per unit of work with m jobs on k cores over ``m / k`` times its time with k jobs; the model says
    ``s = 1 + c (m / k - 1)``. Least squares through (1, 1), clipped at 0."""
    xs = [(x - 1.0, s - 1.0) for x, s in points if x > 1.0]
    den = sum(x * x for x, _ in xs)
    return max(0.0, sum(x * s for x, s in xs) / den) if den else 0.0


class Cpu:
    """``cores`` cores shared by processor sharing: m running jobs each progress at
    :func:`ps_rate` core-seconds per second. ``run(work)`` gives a signal that fires when ``work``
    core-seconds are done."""

    def __init__(self, eng: Engine, cores: int, overhead: float = 0.0):
        self.eng, self.cores, self.overhead = eng, max(1, cores), overhead
        self.jobs: Dict[int, List] = {}  # id -> [remaining work, signal]
        self.last, self.version, self._ids = 0.0, 0, 0

    def _rate(self) -> float:
        return ps_rate(len(self.jobs), self.cores, self.overhead)

    def _advance(self) -> None:
        gone = (self.eng.now - self.last) * self._rate()
        for job in self.jobs.values():
            job[0] -= gone
        self.last = self.eng.now

    def _schedule(self) -> None:
        self.version += 1
        if self.jobs:
            version = self.version
            left = min(job[0] for job in self.jobs.values())
            self.eng.call_at(self.eng.now + max(0.0, left) / self._rate(), lambda: self._finish(version))

    def _finish(self, version: int) -> None:
        if version != self.version:
            return  # the set of jobs changed since this finish was planned
        self._advance()
        for i in [i for i, job in self.jobs.items() if job[0] <= 1e-9]:
            self.jobs.pop(i)[1].fire()
        self._schedule()

    def run(self, work: float) -> Signal:
        self._advance()
        done = Signal(self.eng)
        self._ids += 1
        self.jobs[self._ids] = [float(work), done]
        self._schedule()
        return done


def shared_walls(works: List[float], cores: int, overhead: float = 0.0) -> List[float]:
    """Wall times of jobs that start together on ``cores`` shared cores (processor sharing, each job at
    most one core, :func:`ps_rate`); ``cores`` 0 means a device each (wall = work)."""
    if cores <= 0 or len(works) <= cores:
        return list(works)
    order = sorted(range(len(works)), key=lambda i: works[i])
    walls, t, done = [0.0] * len(works), 0.0, 0.0
    for k, i in enumerate(order):
        running = len(works) - k
        t += (works[i] - done) * running / min(cores, running) * oversub_cost(running, cores, overhead)
        done = works[i]
        walls[i] = t
    return walls


def step_walls(works: List[float], side_s: float, cores: int, overhead: float = 0.0) -> List[float]:
    """Wall times of steps that start together on ``cores`` shared cores, each with ``side_s``
    core-seconds of its learner's other threads beside it (a job of its own; the step waits for both)."""
    if not side_s:
        return shared_walls(works, cores, overhead)
    ws = shared_walls(list(works) + [side_s] * len(works), cores, overhead)
    return [max(a, b) for a, b in zip(ws[:len(works)], ws[len(works):])]


def shared_step(eng: Engine, cpu: Cpu, work: float, side_s: float = 0.0, wait_s: float = 0.0,
                slow_factor: float = 1.0, slowed_frac: float = 1.0) -> Iterator:
    """One learner's step as an :class:`Engine` process on shared cores: ``work`` core-seconds of compute
    and ``side_s`` of its other threads beside it (the step waits for both), then ``wait_s`` seconds off
    the cores. A slow learner (``slow_factor`` > 1, as ``Strategy._slow_down``): the ``slowed_frac`` part
    of the work and wait, a sleep of ``slow_factor - 1`` times its wall time, then the rest."""
    side: Optional[Signal] = cpu.run(side_s) if side_s else None
    wait = wait_s > 0.0  # (no zero-length events without it: the model without waits exactly)
    if slow_factor == 1.0:
        yield cpu.run(work)
        if wait:
            yield wait_s
    else:
        t0 = eng.now
        yield cpu.run(work * slowed_frac)
        if wait:
            yield wait_s * slowed_frac
        yield (slow_factor - 1.0) * (eng.now - t0)
        if slowed_frac < 1.0:
            yield cpu.run(work * (1.0 - slowed_frac))
            if wait:
                yield wait_s * (1.0 - slowed_frac)
    if side is not None:
        yield side
