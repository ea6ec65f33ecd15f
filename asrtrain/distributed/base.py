"""The Strategy interface: the one object through which the training loop talks to other learners.

The loop (``asrtrain.train.loop``) never branches on the strategy's name. One learner's step is::

    strategy.before_step(step)          # ADPSGD: fold landed averaging into the weights, start this
                                        #   step's averaging round (and wait for it unless delay_by_one)
    strategy.compute_gradients(net, batch, loss_fn, count, scale)  # net = strategy.wrap(model), made
                                        #   once; zero_grad, (loss / global_count(count)).backward()
                                        #   (fp16: scaled); DP: clipped per-example gradients + noise
    strategy.reduce_gradients()         # SSGD / H-ADPSGD: allreduce inside the sync group
    (clip gradients here)
    strategy.apply_step(optimizer)      # optimizer.step(); ADPSGD does it under the averaging lock
    strategy.after_step(step)           # H-ADPSGD + delay_by_one: leader's averaging broadcast in group

and at the end ``strategy.finalize(model)`` returns the model of the whole job (the average over all
learners). Rules the loop must keep (the strategies use collectives at these points):

- ``setup`` on every learner, after the model and optimizer are on the learner's device and any
  checkpoint was loaded (it creates process groups and broadcasts rank 0's weights);
  ``load_state_dict`` may come before or after it. Forward passes go through ``wrap(model)`` (SSGD and
  H-ADPSGD groups: DistributedDataParallel, whose all-reduce overlaps the backward pass). ``plan``
  once after ``setup``, before the first step.
- Devices: parameters live on the learner's device; per-step collectives use the default group with
  tensors where its backend wants them (NCCL: the GPU), host-side values go through a gloo group.
- Inside a sync group (SSGD: everybody; H-ADPSGD: a group) every member takes the same number of steps:
  a member whose slice of a global batch is empty still runs the step with ``local_count`` 0.
  ADPSGD learners may take different numbers of steps.
- ``end_epoch`` once per epoch on every learner, ``all_reduce_sum`` / ``barrier`` the same number of
  times on every learner, ``finalize`` once on every learner, then ``close``.
- Model parameters change only on the main thread inside these calls: a checkpoint may be written at
  any point between two steps, and ``state_dict`` may be called on rank 0 only.

``partition()`` tells the batch sampler which batches this learner reads: global batches are made of
``group_size`` learners' worth of frames, group ``g`` of ``num_groups`` takes every ``num_groups``-th
batch and member ``m`` of the group takes the ``m``-th of ``group_size`` slices.

- single:    1 group of 1
- ssgd:      1 group of N           (every learner a slice of every batch)
- adpsgd:    N groups of 1          (every learner its own stream of batches)
- h-adpsgd:  N/M groups of M
"""

from __future__ import annotations

import contextlib
import datetime
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple

import torch

# The default group's timeout (``dist.timeout_s``), set by the launcher before any group is made.
_group_timeout: Optional[datetime.timedelta] = None


def set_group_timeout(timeout: Optional[datetime.timedelta]) -> None:
    global _group_timeout
    _group_timeout = timeout


def new_group(ranks: Sequence[int], backend: Optional[str] = None,
              timeout: Optional[datetime.timedelta] = None):
    """``dist.new_group`` with the default group's timeout unless ``timeout`` is given. torch gives a group
    made without one its backend's default (gloo 30 min, NCCL 10 min), not the world's: an NCCL job's host
    group and every H-ADPSGD group would wait 30 min where ``dist.timeout_s`` says 60 s."""
    import torch.distributed as dist

    with native_stdout_to_stderr():
        return dist.new_group(list(ranks), backend=backend, timeout=timeout or _group_timeout)


@contextlib.contextmanager
def native_stdout_to_stderr() -> Iterator[None]:
    """Send what native code prints on stdout to stderr for the block. Gloo prints "[Gloo] Rank 0 is
    connected to N peer ranks..." on stdout whenever it makes a group, and stdout is where commands give
    their result (``model=$(asrtrain train ...)`` must read one path). Python's own stdout is flushed
    first and C's stdio (which C++'s std::cout writes through) before fd 1 is put back."""
    import ctypes
    import os
    import sys

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        try:
            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):
            pass
        os.dup2(saved, 1)
        os.close(saved)


@dataclass(frozen=True)
class Partition:
    group: int = 0
    num_groups: int = 1
    member: int = 0
    group_size: int = 1


class Strategy:
    """Single-process training; the base class every strategy extends."""

    name = "single"
    #: testing and benchmarks (DistConfig.slowdown): this learner's compute is made this many times
    #: slower by a sleep after the backward pass, proportional to the measured forward+backward time.
    slowdown: float = 1.0

    def __init__(self, rank: int = 0, world_size: int = 1):
        self.rank = rank
        self.world_size = world_size
        self._t_step: Optional[float] = None

    # -- set-up ------------------------------------------------------------------------------------
    @property
    def is_main(self) -> bool:
        """True on the learner that writes logs, checkpoints and the final model."""
        return self.rank == 0

    def shares_gradients(self) -> bool:
        """True when this learner's gradients are all-reduced with others' before the step (an SSGD or
        H-ADPSGD sync group of more than one): its group then steps, or skips, together."""
        return False

    def partition(self) -> Partition:
        return Partition()

    def setup(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Called once, after the model and optimizer exist and any checkpoint was loaded."""
        self.model = model
        self.optimizer = optimizer

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module the loop runs forward passes through (after :meth:`setup`)."""
        return model

    def plan(self, steps_per_epoch: int, epochs: int, examples: int,
             privacy: Optional[Callable[[], Tuple[int, int]]] = None) -> None:
        """This learner's steps per epoch, the epochs and the utterances in the whole training set, and
        ``privacy`` (a function giving the batches in one pass over the learner's data and the most steps
        it may take in an epoch; from the batch source, called only by a strategy that needs it). DP derives its sampling rate, noise and accounting from them; the loop
        passes them to every strategy without asking which one it runs."""

    # -- one step ----------------------------------------------------------------------------------
    def global_count(self, local_count: float) -> float:
        """The count (frames or tokens) the loss of this step is normalised by."""
        return float(local_count)

    def before_step(self, step: int) -> None:
        self._t_step = time.perf_counter()

    def compute_gradients(self, net: torch.nn.Module, batch: Any,
                          loss_fn: Callable[[torch.nn.Module, Any], Tuple[torch.Tensor, int]], count: int,
                          scale: Optional[Callable[[torch.Tensor], torch.Tensor]] = None
                          ) -> Tuple[torch.Tensor, int]:
        """Set every ``.grad`` to d(summed loss / global count)/d(params); return (summed loss, count).

        ``net`` is :meth:`wrap`'s module; ``loss_fn(net, batch)`` gives the batch's summed loss and its
        count (tokens or frames); ``count`` is that count known before the forward pass (the global
        count's all-reduce then overlaps nothing it could wait for); ``scale`` is the fp16 gradient
        scaler's ``scale`` (None otherwise).
        """
        denom = max(1.0, self.global_count(count))
        loss, count = loss_fn(net, batch)
        # Alone, gradients are dropped and backward writes fresh ones (1.0 ms of a 91 ms step less than
        # zeroing and accumulating, synthetic recipe model, 2 threads); learners that exchange gradients
        # keep every .grad allocated, so each step's buffers match across the group.
        self.optimizer.zero_grad(set_to_none=self.world_size == 1)
        scaled = loss / denom
        (scale(scaled) if scale is not None else scaled).backward()
        return loss, count

    def reduce_gradients(self) -> None:
        self._slow_down()

    def _slow_down(self) -> None:
        """Sleep (slowdown - 1) x the time since before_step: an injected heterogeneous learner."""
        if self.slowdown > 1.0 and self._t_step is not None:
            time.sleep((self.slowdown - 1.0) * (time.perf_counter() - self._t_step))

    def apply_step(self, optimizer) -> None:
        """``optimizer.step()`` (an optimizer, or :class:`asrtrain.device.ScaledStep` under fp16)."""
        optimizer.step()

    def after_step(self, step: int) -> None:
        pass

    # -- epochs, validation, end -------------------------------------------------------------------
    def all_reduce_sum(self, values: torch.Tensor) -> torch.Tensor:
        """Sum a small tensor over all learners (validation loss, counts). Identity here."""
        return values

    def barrier(self) -> None:
        pass

    def settle(self) -> None:
        """Called on every learner before a checkpoint: finish communication in flight (ADPSGD)."""

    def end_epoch(self, epoch: int) -> None:
        """Called by every learner when its data for ``epoch`` is exhausted."""

    def finalize(self, model: torch.nn.Module) -> torch.nn.Module:
        """Return the job's model: the average of all learners' weights."""
        return model

    def close(self) -> None:
        pass

    # -- state and metrics -------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        return {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        pass

    def metrics(self) -> Dict[str, float]:
        """Counters since the last call (exchanges, staleness, lock wait, comm time ...)."""
        return {}
