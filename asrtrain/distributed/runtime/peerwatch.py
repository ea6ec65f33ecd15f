"""The learners' heartbeat: every learner's :class:`PeerWatch` thread names a peer that died or hung.

Each learner keeps a heartbeat counter in the rendezvous store (torch's TCPStore) and watches everybody
else's. A learner whose counter stops for ``dead_after`` seconds (killed, even with ``kill -9``) is named in
a :class:`PeerFailure` raised in every other learner's main thread (by SIGUSR1, so a blocking call is
interrupted); a learner whose heartbeat goes on while its training makes no progress for ``hang_after``
seconds is named as hung. A job suspended whole (Ctrl-Z, SIGSTOP, Slurm's ``scontrol suspend``) restarts
both clocks when it resumes. The first explanation of a failure is kept in the store (the *verdict*), so
the parent that spawned the learners names the real culprit rather than the first messenger to exit.
:mod:`asrtrain.distributed.runtime.launch` starts one watch per learner.
"""

from __future__ import annotations

import datetime
import logging
import os
import signal
import sys
import threading
import time
from typing import Optional

import torch.distributed as dist

from asrtrain.distributed.runtime.attempt import attempt_store
from asrtrain.errors import AsrError

log = logging.getLogger(__name__)


VERDICT_KEY = "asrtrain/hb/verdict"


def set_verdict(store, message: str) -> None:
    """Record the first explanation of a failure (later ones do not overwrite it)."""
    try:
        store.compare_set(VERDICT_KEY, "", message)
    except Exception:  # noqa: BLE001 - the store itself may be gone
        pass


def get_verdict(store) -> Optional[str]:
    try:
        if store.check([VERDICT_KEY]):
            return store.get(VERDICT_KEY).decode(errors="replace") or None
    except Exception:  # noqa: BLE001
        pass
    return None


class PeerFailure(AsrError):
    """Raised in a learner's main thread when another learner stopped responding."""


def suspended_for(prev: float, now: float, period: float) -> float:
    """Seconds this process was suspended between two heartbeat ticks ``prev`` and ``now`` (monotonic)
    that ``period`` apart were due; 0 unless the gap exceeds anything a busy scheduler causes (30 s, or
    10 periods)."""
    gap = now - prev - period
    return gap if gap > max(30.0, 10 * period) else 0.0


class PeerWatch:
    """Heartbeats in the rendezvous store; names a learner whose heartbeat stops.

    Every ``period`` seconds learner r increments its counter ``asrtrain/hb/<r>`` and reads all others.
    A counter unchanged for ``dead_after`` seconds means that learner died or hung. The main thread
    then gets a :class:`PeerFailure` (via SIGUSR1, so even a blocking sleep is interrupted); if it is
    stuck in a collective that does not return, the process exits after ``grace`` more seconds.
    """

    def __init__(self, host: str, port: int, rank: int, world_size: int, dead_after: float,
                 store_owner: str = "the parent process", period: float = 0.5, hang_after: float = 0.0,
                 parent_reports: bool = False):
        self.rank, self.world_size = rank, world_size
        self.parent_reports = parent_reports  # a parent of ours prints the job's one line from the verdict
        self.hang_after = hang_after
        self.dead_after = max(2.0, dead_after)
        self.grace = min(10.0, self.dead_after)
        self.period = period
        self.failure: Optional[str] = None
        self.muted = False
        self._stop = threading.Event()
        self._where = f"{host}:{port}"
        self._owner = store_owner
        # Our own client connection: the process group's store is used by other threads meanwhile.
        self._raw_store = attempt_store(dist.TCPStore(host, port, None, False,
                                                      timeout=datetime.timedelta(seconds=self.dead_after)))
        self._store = dist.PrefixStore("asrtrain/hb", self._raw_store)
        self._thread = threading.Thread(target=self._run, name=f"peerwatch{rank}", daemon=True)

    def start_watching(self) -> None:
        self._old_handler = None
        if threading.current_thread() is threading.main_thread():
            self._old_handler = signal.signal(signal.SIGUSR1, self._raise_in_main)
        self._main_ident = threading.main_thread().ident
        self._store.set(str(self.rank), "0")
        # Every learner is past init_process_group, so all keys appear within moments.
        self._store.wait([str(r) for r in range(self.world_size)], datetime.timedelta(seconds=60))
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():  # not when Ctrl-C cut start_watching short: join would raise
            self._thread.join(timeout=5)
        if self._old_handler is not None:
            signal.signal(signal.SIGUSR1, self._old_handler)

    def explain(self, err: BaseException) -> str:
        """The one-line cause of ``err``: a dead peer if one is (or soon is) known, else ``err`` itself."""
        if isinstance(err, PeerFailure):
            return err.message
        if not isinstance(err, (AsrError, KeyboardInterrupt)):
            # A collective that failed because a peer vanished: wait for the heartbeat verdict.
            deadline = time.monotonic() + self.dead_after + 2 * self.period
            while self.failure is None and time.monotonic() < deadline and self._thread.is_alive():
                time.sleep(self.period / 2)
        if self.failure is not None:
            return self.failure
        if isinstance(err, AsrError):
            return err.render()
        if isinstance(err, KeyboardInterrupt):
            return "interrupted (SIGINT / Ctrl-C, or the parent process was stopped)"
        return " ".join(f"{type(err).__name__}: {err}".split())

    def _raise_in_main(self, signum, frame):
        if self.failure is not None and not self._stop.is_set() and not self.muted:
            raise PeerFailure(self.failure)

    def _declare(self, message: str) -> None:
        self.failure = message
        log.error("%s", message)
        set_verdict(self._raw_store, message)
        if self._main_ident is not None:
            signal.pthread_kill(self._main_ident, signal.SIGUSR1)
        if self._stop.wait(self.grace):
            return
        if self.parent_reports:  # the verdict is in its store: it says it once for the job
            log.error("learner rank %d: main thread stuck for %.0f s after %s; exiting", self.rank,
                      self.grace, message)
        else:
            sys.stderr.write(f"asrtrain: error: learner rank {self.rank}: {message} "
                             f"(main thread stuck for {self.grace:.0f} s; exiting)\n")
            sys.stderr.flush()
        os._exit(1)

    def _run(self) -> None:
        from asrtrain.distributed.runtime.beacon import Beacon, find_hung, mine, note_progress

        count = 0
        others = [r for r in range(self.world_size) if r != self.rank]
        seen = {r: (None, time.monotonic()) for r in others}
        last = resumed = time.monotonic()
        while not self._stop.wait(self.period):
            count += 1
            now = time.monotonic()
            away = suspended_for(last, now, self.period)
            last = now
            if away:
                # The whole process was stopped (Ctrl-Z, SIGSTOP, Slurm's scontrol suspend): its own clocks ran
                # on while nothing could move. Restart them instead of blaming itself or its peers.
                log.warning("learner %d resumed after %.0f s suspended: the heartbeat and hang clocks restart",
                            self.rank, away)
                note_progress()
                seen = {r: (value, now) for r, (value, _) in seen.items()}
                resumed = now
            me = mine(self._main_ident)
            try:
                self._store.set(str(self.rank), me.encode(count))
                values = self._store.multi_get([str(r) for r in others]) if others else []
            except Exception as err:  # noqa: BLE001 - the store itself is gone
                if self._stop.is_set():
                    return
                self._declare(f"{self._owner}, which hosts the rendezvous store at {self._where}, "
                              "died or hung "
                              f"({' '.join(str(err).split())[:100]})")
                return
            verdict = get_verdict(self._raw_store)
            if verdict:  # the parent (or another learner) already knows who failed
                self._declare(verdict)
                return
            for r, value in zip(others, values):
                if value != seen[r][0]:
                    seen[r] = (value, now)
                elif value != b"done" and now - seen[r][1] > self.dead_after:
                    self._declare(f"learner rank {r} stopped responding for {now - seen[r][1]:.0f} s "
                                  "(killed or hung)")
                    return
            if self.hang_after > 0 and now - resumed > 4 * self.period:  # peers resume and report too
                progress = {r: p for r, v in zip(others, values) if (p := Beacon.decode(v)) is not None}
                progress[self.rank] = me
                hung = find_hung(progress, time.time(), self.hang_after)
                if hung is not None:
                    self._declare(f"learner rank {hung} made no progress for "
                                  f"{time.time() - progress[hung].wall:.0f} s while its heartbeat went on "
                                  "(its main thread is stuck)")
                    return
        try:  # a learner that finished normally must not be mistaken for a dead one
            self._store.set(str(self.rank), "done")
        except Exception:  # noqa: BLE001
            pass
