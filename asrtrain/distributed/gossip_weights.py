"""A learner's weights as the ADPSGD communication thread sees them: snapshots out, averaging deltas in.

The gossip thread (:class:`asrtrain.distributed.gossip.Gossip`) never touches the live parameters ``x``:
it reads *snapshots* and accumulates the averaging delta ``D`` on the host; the main thread folds ``D``
into ``x`` at step boundaries. The effective weights are ``e = x + D`` (plus, on a GPU, the rounding
remainder of earlier folds). Two implementations of that contract:

- :class:`HostWeights`: CPU parameters re-pointed at one flat vector (:func:`bind_flat_`); a snapshot
  is one vector add under the lock, a fold one exact TwoSum.
- :class:`DeviceWeights`: parameters on a GPU (cuDNN keeps its RNN weights in its own layout, so they
  cannot be views of our vector). At every step boundary the main thread *stages* a snapshot: on a side
  CUDA stream the parameters are gathered into one device vector and copied to a pinned host buffer,
  overlapping the step's compute (the compute stream waits only for the gather, a single pass over the
  weights, before it may change them). The gossip thread waits for the copy, averages on the host and adds
  to ``D`` in pinned host memory; the main thread folds ``D`` host -> device at the next boundary and adds
  it in float64 (the float32 rounding remainder is kept on the device, so folding loses no weight mass).
  Two staging buffers alternate, so the thread may still be reading the older one while the main thread
  stages the next. Snapshots are at most one step old (a passive answers with the last staged one).

Thread-safety: every method is called with the gossip lock held, except ``wait_claimed`` (the thread,
between two locked calls).
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import torch

from asrtrain.distributed.collective import flatten


def bind_flat_(params: Sequence[torch.Tensor]) -> Optional[torch.Tensor]:
    """Re-point CPU parameters at slices of one contiguous vector and return it; ``None`` elsewhere.

    Snapshots and folds then touch one vector instead of gathering every tensor (on a 1M-parameter
    BLSTM, ~1 ms instead of ~13). The ``Parameter`` objects stay the same, so the optimizer's state and
    references are unaffected. Not on GPU: cuDNN RNNs keep their weights in their own layout.
    """
    if not params or any(p.device.type != "cpu" or p.dtype != params[0].dtype for p in params):
        return None
    flat = flatten(params)
    offset = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            p.data = flat[offset:offset + n].view_as(p)
            offset += n
    return flat


def two_sum_(x: torch.Tensor, d: torch.Tensor) -> None:
    """``x, d <- fl(x + d), (x + d) - fl(x + d)`` exactly (Knuth's TwoSum), in place.

    Folding the averaging delta into the parameters this way leaves what their dtype rounded off in
    ``d``, so ``x + d`` is unchanged as a real number: folding never leaks weight mass.
    """
    s = x + d
    bb = s - x
    rem = (x - (s - bb)) + (d - bb)
    x.copy_(s)
    d.copy_(rem)


def make_weights(params: List[torch.Tensor]):
    """:class:`HostWeights` when the parameters can share one CPU vector, else :class:`DeviceWeights`."""
    flat = bind_flat_(params)
    return HostWeights(params, flat) if flat is not None else DeviceWeights(params)


class HostWeights:
    """CPU parameters that are views of one flat vector ``flat`` (P,); ``delta`` (P,) in their dtype."""

    def __init__(self, params: List[torch.Tensor], flat: torch.Tensor):
        self.params, self.flat = params, flat
        self.dtype = flat.dtype
        self.delta = torch.zeros_like(flat)

    def stage(self) -> None:
        """Nothing to stage: the thread reads the live vector under the lock."""

    def claim(self) -> None:
        pass

    def wait_claimed(self) -> None:
        pass

    def snapshot_into(self, out: torch.Tensor) -> None:
        """``out = x + D`` (lock held)."""
        torch.add(self.flat, self.delta, out=out)

    def fold(self) -> None:
        """``x, D <- x + D, rounding remainder`` (lock held, main thread)."""
        with torch.no_grad():
            two_sum_(self.flat, self.delta)

    def effective(self) -> torch.Tensor:
        """``x + D`` as a float64 CPU vector (lock held)."""
        return self.flat.double() + self.delta.double()

    def state(self) -> torch.Tensor:
        """What a checkpoint must keep besides the parameters: ``D`` (float64, CPU)."""
        return self.delta.double()

    def load_state(self, delta: torch.Tensor) -> None:
        self.delta.copy_(delta.to(self.delta.dtype))


class DeviceWeights:
    """Parameters anywhere (normally one GPU), staged through pinned host memory (module docstring)."""

    def __init__(self, params: List[torch.Tensor]):
        self.params = params
        self.device = params[0].device
        self.dtype = torch.float32 if params[0].dtype in (torch.float16, torch.bfloat16) else params[0].dtype
        self.cuda = self.device.type == "cuda"
        n = sum(p.numel() for p in params)
        pin = self.cuda
        self.delta = torch.zeros(n, dtype=self.dtype, pin_memory=pin)
        self.snaps = [torch.zeros(n, dtype=self.dtype, pin_memory=pin) for _ in range(2)]
        self.gathered = torch.empty(n, dtype=self.dtype, device=self.device)
        self.remainder = torch.zeros(n, dtype=torch.float64, device=self.device)
        self.incoming = torch.empty(n, dtype=self.dtype, device=self.device)
        self.side = torch.cuda.Stream(self.device) if self.cuda else None
        self.copier = torch.cuda.Stream(self.device) if self.cuda else None
        self._latest, self._reading = 0, None
        self._ready: List[Optional[torch.cuda.Event]] = [None, None]
        self._fold_done: Optional[torch.cuda.Event] = None
        self._stage_now()

    # -- snapshots ----------------------------------------------------------------------------------
    # The thread claims the newest staged buffer under the lock (``claim``), waits for its copy without
    # the lock (``wait_claimed``), and reads it under the lock (``snapshot_into``), which releases the
    # claim. ``stage`` (main thread, under the lock) never writes into a claimed buffer.

    def stage(self) -> None:
        """Main thread, at a step boundary (lock held): start copying the weights to the host."""
        self._stage_now()

    def _stage_now(self) -> None:
        i = 1 - self._latest if self._reading != 1 - self._latest else self._latest
        if not self.cuda:
            with torch.no_grad():
                flatten(self.params, out=self.snaps[i])
            self._latest = i
            return
        compute = torch.cuda.current_stream(self.device)
        self.side.wait_stream(compute)  # the weights as of this boundary (the last update is queued)
        with torch.cuda.stream(self.side), torch.no_grad():
            flatten(self.params, out=self.gathered)
            gathered = torch.cuda.Event()
            gathered.record(self.side)
            self.snaps[i].copy_(self.gathered, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record(self.side)
        compute.wait_event(gathered)  # the next update may not overwrite weights still being gathered
        self._ready[i] = ready
        self._latest = i

    def claim(self) -> None:
        """Thread, lock held: the newest staged snapshot is ours until :meth:`snapshot_into`."""
        self._reading = self._latest

    def wait_claimed(self) -> None:
        """Thread, lock not held: wait until the claimed snapshot has reached the host."""
        ev = self._ready[self._reading]
        if ev is not None:
            ev.synchronize()

    def snapshot_into(self, out: torch.Tensor) -> None:
        """``out = staged x + D`` (lock held); releases the claim."""
        i = self._latest if self._reading is None else self._reading
        torch.add(self.snaps[i], self.delta, out=out)
        self._reading = None

    # -- folds --------------------------------------------------------------------------------------
    def fold(self) -> None:
        """``x <- x + D`` on the device in float64, the float32 rounding kept in ``remainder``; ``D <- 0``
        (lock held, main thread)."""
        if not self.cuda:
            self.incoming.copy_(self.delta)
        else:
            if self._fold_done is not None:
                self.copier.wait_event(self._fold_done)  # the previous fold has read ``incoming``
            with torch.cuda.stream(self.copier):
                self.incoming.copy_(self.delta, non_blocking=True)
            self.copier.synchronize()  # only this copy: ``delta`` may be zeroed once it is on the device
            torch.cuda.current_stream(self.device).wait_stream(self.copier)
        self.delta.zero_()
        offset = 0
        with torch.no_grad():
            for p in self.params:
                n = p.numel()
                total = p.data.double().reshape(-1) + self.remainder[offset:offset + n] \
                    + self.incoming[offset:offset + n].double()
                p.data.copy_(total.view_as(p))
                self.remainder[offset:offset + n] = total - p.data.double().reshape(-1)
                offset += n
        if self.cuda:
            self._fold_done = torch.cuda.Event()
            self._fold_done.record(torch.cuda.current_stream(self.device))

    def effective(self) -> torch.Tensor:
        """``x + remainder + D`` as a float64 CPU vector (lock held; waits for the device)."""
        if self.cuda:
            torch.cuda.current_stream(self.device).synchronize()
        x = flatten(self.params, dtype=torch.float64) + self.remainder
        return x.cpu() + self.delta.double()

    def state(self) -> torch.Tensor:
        return (self.remainder.cpu() + self.delta.double())

    def load_state(self, delta: torch.Tensor) -> None:
        self.remainder.zero_()
        self.delta.copy_(delta.to(self.dtype))
