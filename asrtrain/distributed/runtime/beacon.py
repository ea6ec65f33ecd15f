"""Progress, not only liveness: naming the learner whose main thread is stuck while its heartbeat runs.

A heartbeat (:class:`asrtrain.distributed.runtime.peerwatch.PeerWatch`) catches a learner that died or was stopped
whole. A learner whose main thread deadlocks (a hung reader, a stuck device call) keeps beating, and every
learner that depends on it soon waits in a collective: all of them stop making progress, and the one to
name is the one that is *not* waiting for the others. So each learner publishes, with its heartbeat:

- its progress counter and the wall time it last moved (the training loop calls :func:`note_progress`
  after every step, validation batch and checkpoint);
- whether its main thread is waiting in communication right now (its innermost Python frame is inside
  ``torch.distributed``, DDP or autograd's backward, which is where DDP all-reduces, or our gossip waits).

When a learner has made no progress for ``hang_after`` seconds, :func:`find_hung` names the stalled
learner that is not waiting (the earliest to stall among those, else the earliest of all). Learners that
never reported progress (tools that run other loops) are not judged.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Dict, Optional

_state = {"count": 0, "wall": 0.0}  # this process's main-thread progress beacon

# Where a main thread waits for the other learners (paths as they appear in code objects).
WAITING_IN = ("torch/distributed/", "torch/nn/parallel/distributed.py", "torch/autograd/",
              "asrtrain/distributed/")


def note_progress() -> None:
    """The main thread moved on (a step, a validation batch, a checkpoint)."""
    _state["count"] += 1
    _state["wall"] = time.time()


@dataclass(frozen=True)
class Beacon:
    count: int  # progress notes so far (0: this learner never reports)
    wall: float  # time.time() of the last one
    waiting: bool  # the main thread is in communication right now

    def encode(self, beat: int) -> str:
        return f"{beat} {self.count} {self.wall:.3f} {int(self.waiting)}"

    @staticmethod
    def decode(value: bytes) -> Optional["Beacon"]:
        parts = value.decode(errors="replace").split()
        if len(parts) != 4:
            return None
        try:
            return Beacon(int(parts[1]), float(parts[2]), parts[3] == "1")
        except ValueError:
            return None


def waiting(frame) -> bool:
    """Walk out from the innermost frame: the first frame in communication code means waiting, the first
    in other asrtrain code (a data reader, the loop) means stuck; library frames (threading, queue) are
    looked through."""
    while frame is not None:
        where = frame.f_code.co_filename.replace("\\", "/")
        if where.endswith("asrtrain/distributed/runtime/launch.py"):  # the learner's entry: nothing waited
            return False
        if any(w in where for w in WAITING_IN):
            return True
        if "asrtrain/" in where:
            return False
        frame = frame.f_back
    return False


def mine(main_ident: Optional[int]) -> Beacon:
    """This learner's progress and whether its main thread waits in communication."""
    frame = sys._current_frames().get(main_ident) if main_ident is not None else None
    return Beacon(_state["count"], _state["wall"], waiting(frame))


def find_hung(progress: Dict[int, Beacon], now: float, hang_after: float) -> Optional[int]:
    """The rank to blame when some learner made no progress for ``hang_after`` seconds, else None."""
    stalled = {r: p for r, p in progress.items() if p.count > 0 and now - p.wall > hang_after}
    if not stalled:
        return None
    stuck = {r: p for r, p in stalled.items() if not p.waiting}
    pool = stuck or stalled
    return min(pool, key=lambda r: (pool[r].wall, r))
