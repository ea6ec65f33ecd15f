"""Asynchronous pairwise averaging (the ADPSGD communication thread) and its helpers.

The gossip ring holds ``n`` learners (all learners for ADPSGD, the group leaders for H-ADPSGD), ``n``
even. Ring position ``i`` is *active* when ``i`` is even and *passive* when odd: this bipartite split is
what makes waiting acyclic. Active learners initiate exchanges only with passive ones; a passive
learner's thread does nothing but answer requests from any active learner (``recv`` from any source),
in arrival order. Actives wait only for passives, and passives never wait for a particular active, so
no cycle of waits can form, whatever the speeds.

One exchange (a *round* of an active learner)::

    active a                                   passive p (thread always waiting for a request)
    s_a = x_a + D_a   (snapshot, under lock)
    send [s_a, REQUEST] ───────────────────▶   s_p = x_p + D_p   (snapshot, under lock)
                                               D_p += (s_a - s_p)/2        (under lock)
    recv s_p        ◀───────────────────────   send s_p
    D_a += (s_p - s_a)/2        (under lock)

``x`` are the live parameters, touched only by the main thread at step boundaries (parameters may not
change under autograd during a step), and ``D`` is the averaging delta not yet folded into them. The
*effective* weights are ``e = x + D``. **Invariant:** an exchange adds ``(s_p - s_a)/2`` to ``e_a`` and
the opposite to ``e_p``, so the sum of all learners' effective weights changes only by gradient
steps; a gradient step taken between the snapshot and the write-back is kept (it is in ``x``, not in
the delta), and with no step in between both partners end holding exactly their mean (to rounding).

Schedules (which passive an active asks in its round ``r``):

- ``fixed``: the right ring neighbour on even rounds, the left one on odd rounds.
- ``random``: a uniformly random passive learner (any of them, the complete bipartite graph), drawn from
  an RNG seeded by (seed, rank, round), so the choice is reproducible and resumable from the round
  counter alone. See :mod:`asrtrain.distributed.topology` for why a random *ring* neighbour would not help.

Termination: an active learner that is done sends ``STOP`` to every passive it may ever contact; a
passive thread ends when all of them have said ``STOP``. Until then it keeps answering, so learners that
run out of data first keep serving their neighbours.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence

import torch
import torch.distributed as dist

from asrtrain.device import bind_thread
from asrtrain.distributed.gossip_weights import make_weights
from asrtrain.errors import AsrError


TAG_REQUEST, TAG_REPLY = 11, 12
REQUEST, STOP = 0.0, 1.0


def check_gossip_size(n: int, what: str = "learners") -> None:
    """A ring of active/passive learners must be bipartite: an even number, at least 2."""
    if n < 2 or n % 2:
        raise AsrError(f"ADPSGD needs an even number of {what} (>= 2) to split the ring into active and "
                       f"passive halves, got {n}",
                       fix=f"use an even number of {what}, or --strategy ssgd")


class Gossip:
    """One learner's side of asynchronous pairwise averaging over ``peers`` (global ranks, ring order).

    Thread-safety: every read of the parameters for a snapshot and every write of ``D`` or of the
    parameters happens under ``lock``; the main thread must take the same lock around
    ``optimizer.step()`` (see :meth:`locked`).
    """

    def __init__(self, params: List[torch.Tensor], peers: Sequence[int], me: int, group,
                 schedule: str = "fixed", delay_by_one: bool = False, seed: int = 1):
        check_gossip_size(len(peers))
        if schedule not in ("fixed", "random"):
            raise AsrError(f"averaging schedule {schedule!r} is not one of fixed, random")
        self.params, self.peers, self.me, self.group = params, list(peers), me, group
        self.n, self.index = len(peers), list(peers).index(me)
        self.active = self.index % 2 == 0
        self.schedule, self.delay_by_one, self.seed = schedule, delay_by_one, seed
        self.lock = threading.Lock()
        self.round = 0  # rounds this learner initiated (active) or served (passive)
        self.steps = 0  # optimizer steps, for staleness
        # Messages and the delta are host vectors in the parameters' dtype (weights.py stages GPU weights
        # through pinned memory). The two partners' increments are exact negatives of each other
        # (fl(a - b) = -fl(b - a)), and folds keep their rounding, so averaging conserves the learners'
        # sum to the rounding of ``delta + increment``.
        self.weights = make_weights(params)
        self.device = params[0].device
        self.msg_dtype = self.weights.dtype
        self.size = sum(p.numel() for p in params)
        self._pending = False
        self._folds = 0
        self._staged_at = (-1, -1)  # (steps, folds) when the weights were last staged
        self.error: Optional[BaseException] = None
        self._mlock = threading.Lock()
        self._go = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._stopping = False
        self._m: Dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, name=f"gossip{me}", daemon=True)

    # -- schedule ---------------------------------------------------------------------------------
    def partner(self, rnd: int) -> int:
        """Global rank an active learner asks in round ``rnd``."""
        if self.schedule == "fixed":
            step = 1 if rnd % 2 == 0 else -1
            return self.peers[(self.index + step) % self.n]
        rng = random.Random(f"{self.seed}/{self.me}/{rnd}")
        return self.peers[2 * rng.randrange(self.n // 2) + 1]

    def may_contact_me(self) -> List[int]:
        """Active global ranks that may send to this passive learner (each will send one STOP)."""
        if self.schedule == "fixed":
            return sorted({self.peers[(self.index - 1) % self.n], self.peers[(self.index + 1) % self.n]})
        return self.peers[0::2]

    def may_contact(self) -> List[int]:
        if self.schedule == "fixed":
            return sorted({self.peers[(self.index + 1) % self.n], self.peers[(self.index - 1) % self.n]})
        return self.peers[1::2]

    # -- main-thread API --------------------------------------------------------------------------
    def start(self) -> None:
        # The thread needs the GIL for a few Python lines per exchange; at the default 5 ms switch
        # interval each hand-over can wait behind the training loop, so rounds take tens of ms.
        sys.setswitchinterval(min(sys.getswitchinterval(), 0.0005))
        self._thread.start()

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def locked(self):
        """The averaging lock, timed: ``with gossip.locked(): optimizer.step()``."""
        return _TimedLock(self.lock, self._add, "lock_wait_s")

    def stage(self) -> None:
        """Main thread, at a step boundary: make the current weights what the next snapshot reads (a GPU
        learner starts copying them to the host here, overlapping the step's compute)."""
        with self.lock:
            self._stage()

    def _stage(self) -> None:
        """Stage unless nothing moved the weights since the last time (lock held)."""
        if self._staged_at != (self.steps, self._folds):
            self.weights.stage()
            self._staged_at = (self.steps, self._folds)

    def trigger(self) -> None:
        """Active: start one round now (the snapshot is taken by the thread)."""
        self.check()
        if self.active and not self._stopping:
            self._idle.clear()
            self._go.set()

    def wait_round(self) -> None:
        """Active: wait until the round in flight (if any) has written its delta."""
        t0 = time.perf_counter()
        while not self._idle.wait(0.5):
            self.check()
        self.check()
        self._add("round_wait_s", time.perf_counter() - t0)

    def fold(self) -> bool:
        """Move the pending averaging delta into the parameters (main thread, step boundary)."""
        self.check()
        with self.locked():
            if not self._pending:
                return False
            self.weights.fold()
            self._pending = False
            # A staged snapshot taken before this fold would miss what was folded (D is now zero): the
            # next snapshot must see it, whenever the thread takes it.
            self._folds += 1
            self._stage()
        return True

    def effective(self) -> torch.Tensor:
        """``x + D`` as a float64 CPU vector (P,): what this learner holds, averaging included."""
        with self.locked():
            return self.weights.effective()

    def pending_state(self) -> torch.Tensor:
        """The averaging that landed but is not in the parameters yet (float64, CPU), for checkpoints."""
        with self.locked():
            return self.weights.state()

    def load_pending_state(self, delta: torch.Tensor) -> None:
        with self.locked():
            self.weights.load_state(delta)
            self._pending = bool(delta.abs().max() > 0) if delta.numel() else False

    def stop(self) -> None:
        """End the thread: actives send STOP to every passive they may contact; passives wait for all."""
        if self.active:
            self.wait_round()
            self._stopping = True
            self._go.set()
        while self._thread.is_alive():
            self._thread.join(0.5)
            self.check()
        self.check()

    def metrics(self) -> Dict[str, float]:
        with self._mlock:
            out, self._m = self._m, {}
        return out

    # -- the thread -------------------------------------------------------------------------------
    def _add(self, key: str, value: float) -> None:
        with self._mlock:
            self._m[key] = self._m.get(key, 0.0) + value

    def _message(self) -> torch.Tensor:
        return torch.zeros(self.size + 1, dtype=self.msg_dtype)

    def _snapshot(self):
        """``([x + D, REQUEST] (P+1,) in the message dtype, step)``, taken under the lock."""
        msg = self._message()
        while True:
            with self.locked():
                self.weights.claim()
                step, folds = self.steps, self._folds
            self.weights.wait_claimed()  # a GPU snapshot's copy to the host, without holding the lock
            with self.locked():
                # A fold in between moved D into the parameters after the claimed copy was taken, and
                # zeroed D: that copy + D would leave the folded averaging out. Claim the newer one.
                if self._folds == folds:
                    self.weights.snapshot_into(msg[:-1])
                    return msg, step

    def _write_back(self, mine: torch.Tensor, theirs: torch.Tensor, snap_step: int) -> None:
        # (theirs - mine) / 2 here is the exact negative of the partner's increment: the pair's sum is kept.
        inc = (theirs - mine).mul_(0.5)
        with self.locked():
            self.weights.delta += inc
            self._pending = True
            self._add("staleness_sum", self.steps - snap_step)
        self.round += 1
        self._add("exchanges", 1)

    def _run(self) -> None:
        try:
            bind_thread(self.device)  # its CUDA events and copies belong to this learner's GPU, not GPU 0
            if self.active:
                self._run_active()
            else:
                self._run_passive()
        except BaseException as err:  # noqa: B902 - surfaced in the main thread by check()
            self.error = err
            self._idle.set()

    def _run_active(self) -> None:
        reply = self._message()
        while True:
            self._go.wait()
            self._go.clear()
            if self._stopping:
                stop = self._message()
                stop[-1] = STOP
                for dst in self.may_contact():
                    dist.send(stop, dst=dst, group=self.group, tag=TAG_REQUEST)
                self._idle.set()
                return
            dst = self.partner(self.round)
            cpu0 = time.thread_time()
            request, snap_step = self._snapshot()
            t0 = time.perf_counter()
            work = dist.isend(request, dst=dst, group=self.group, tag=TAG_REQUEST)
            dist.recv(reply, src=dst, group=self.group, tag=TAG_REPLY)
            work.wait()
            self._add("comm_s", time.perf_counter() - t0)
            self._write_back(request[:-1], reply[:-1], snap_step)
            self._add("comm_cpu_s", time.thread_time() - cpu0)  # this thread's CPU for the exchange
            self._idle.set()

    def _run_passive(self) -> None:
        waiting = set(self.may_contact_me())
        request = self._message()
        while waiting:
            src = dist.recv(request, src=None, group=self.group, tag=TAG_REQUEST)
            if request[-1].item() == STOP:
                waiting.discard(src)
                continue
            t0, cpu0 = time.perf_counter(), time.thread_time()
            reply, snap_step = self._snapshot()
            # Write back before replying: once the active has the reply, the exchange has landed on both
            # sides (end_epoch relies on it to settle all averaging with one collective).
            self._write_back(reply[:-1], request[:-1], snap_step)
            dist.send(reply, dst=src, group=self.group, tag=TAG_REPLY)
            self._add("comm_s", time.perf_counter() - t0)
            self._add("comm_cpu_s", time.thread_time() - cpu0)


class _TimedLock:
    def __init__(self, lock: threading.Lock, add, key: str):
        self.lock, self.add, self.key = lock, add, key

    def __enter__(self):
        t0 = time.perf_counter()
        self.lock.acquire()
        self.add(self.key, time.perf_counter() - t0)

    def __exit__(self, *exc):
        self.lock.release()


def consensus_distance(vec: torch.Tensor, world_size: int, group=None) -> float:
    """Mean L2 distance of the learners' weight vectors (P,) from their average (a world collective)."""
    total = vec.clone()
    dist.all_reduce(total, group=group)
    dev = torch.tensor([float(torch.linalg.vector_norm(vec - total / world_size))], dtype=torch.float64)
    dist.all_reduce(dev, group=group)
    return float(dev.item()) / world_size


def average_over_learners(vec: torch.Tensor, world_size: int, group=None) -> torch.Tensor:
    """The average over all learners of a vector (P,): identical bits on every learner."""
    total = vec.clone()
    dist.all_reduce(total, group=group)
    return total / world_size
