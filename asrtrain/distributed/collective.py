"""What the multi-learner strategies share: the :class:`Collective` base (host-side collectives, step
timing, metric counters), DDP with summed gradients, broadcasts, and the one flatten/unflatten of a
parameter list into a vector.

Flat vectors: :func:`flatten` concatenates tensors (parameters or their gradients) into one vector of
shape (P,), in the order given; :func:`set_flat_` writes such a vector back. Every collective that moves
weights or gradients goes through these two, so their order is the same everywhere.
"""

from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence

import torch
import torch.distributed as dist

from asrtrain.distributed.base import Strategy, new_group


def flatten(tensors: Sequence[torch.Tensor], dtype: Optional[torch.dtype] = None,
            device: Optional[torch.device] = None, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The tensors as one detached vector, shape (sum of numel,), in ``dtype`` on ``device`` (default: the
    tensors' own); written into ``out`` when given (its dtype and device then rule)."""
    parts = [t.detach().reshape(-1) for t in tensors]
    if out is not None:
        return torch.cat([p.to(out.dtype) for p in parts], out=out)
    if dtype is not None or device is not None:
        parts = [p.to(device=device, dtype=dtype) for p in parts]
    return torch.cat(parts)


def flat_copy(params: Sequence[torch.Tensor]) -> torch.Tensor:
    """All parameters as one float64 CPU vector, shape (P,)."""
    return flatten(params, dtype=torch.float64, device=torch.device("cpu"))


def set_flat_(tensors: Sequence[torch.Tensor], flat: torch.Tensor) -> None:
    """Copy consecutive slices of ``flat`` (shape (P,)) into ``tensors``, in :func:`flatten`'s order."""
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view_as(t))
            offset += n


def all_reduce_grads(params: List[torch.Tensor], group=None) -> None:
    """SUM every parameter's gradient over ``group`` in one flat all-reduce (where the backend wants it)."""
    flat = flatten([p.grad for p in params])
    flat = flat.to(comm_device(group, flat))
    dist.all_reduce(flat, group=group)
    set_flat_([p.grad for p in params], flat)


class Collective(Strategy):
    """What every multi-learner strategy shares: host-side collectives and metric counters.

    Two kinds of process group, each with tensors of its own kind: the default group (NCCL with device
    tensors on GPUs, gloo on CPUs) carries the per-step traffic (gradients, in-group broadcasts), and
    ``host_group`` (gloo, CPU tensors; the default group itself when that is gloo) carries the small
    host-side values: global counts, validation totals, consensus distances, the final average. A count
    that is known on the host never makes a round trip through the GPU (and never syncs its stream).
    """

    _m: Dict[str, float]
    host_group = None

    def _make_host_group(self) -> None:
        """Create the gloo world group (every learner, in the main thread, in the same order)."""
        if dist.get_backend() != "gloo":
            self.host_group = new_group(range(self.world_size), backend="gloo")

    def _setup_world(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Set-up shared by the strategies in which every learner reads a slice of every global batch:
        the trainable parameters, the host group, and (fresh runs) rank 0's weights everywhere."""
        super().setup(model, optimizer)
        self.params: List[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
        self._make_host_group()
        if self.sync_initial_weights:
            broadcast_params(self.params, src=0)

    def all_reduce_sum(self, values: torch.Tensor) -> torch.Tensor:
        out = values.detach().to("cpu", copy=True)
        dist.all_reduce(out, group=self.host_group)
        return out

    def reduce_gradients(self) -> None:
        """The gradients were summed in the backward pass (DDP) or are not shared: only time the step's
        compute here (an injected slowdown included)."""
        self._slow_down()
        if self._t_step is not None:
            self._add("compute_s", time.perf_counter() - self._t_step)

    def barrier(self) -> None:
        dist.barrier(group=self.host_group)

    def metrics(self) -> Dict[str, float]:
        out, self._m = self._m, {}
        return out

    def _add(self, key: str, value: float) -> None:
        self._m[key] = self._m.get(key, 0.0) + value


def _sum_hook(group, bucket):
    """DDP comm hook: SUM a bucket over ``group`` (DDP's own hook divides by the group size)."""
    fut = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def ddp_sum(model: torch.nn.Module, group=None) -> torch.nn.Module:
    """``model`` inside DistributedDataParallel over ``group``, gradients summed, not averaged.

    The learners' weights must already agree (``init_sync=False``: our own broadcast did that, and a
    resumed learner keeps its own). Every parameter must get a gradient every step (no unused-parameter
    search): the loop runs a zero-weighted forward for a learner whose slice of a batch is empty.
    """
    from torch.nn.parallel import DistributedDataParallel

    device = next(model.parameters()).device
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                  process_group=group, broadcast_buffers=False, init_sync=False)
    ddp.register_comm_hook(group, _sum_hook)
    return ddp


def comm_device(group, tensor: torch.Tensor) -> torch.device:
    """Where a tensor must be for a collective in ``group``: on its GPU for NCCL, on the host for gloo."""
    return tensor.device if dist.get_backend(group) == "nccl" else torch.device("cpu")


def broadcast_params(params: List[torch.Tensor], src: int, group=None) -> None:
    """Overwrite every learner's parameters in ``group`` with global rank ``src``'s. The source keeps its
    own (writing back the bits it sent would cost a weight copy per step and touch weights that another
    thread may be reading)."""
    flat = flatten(params)
    flat = flat.to(comm_device(group, flat))
    dist.broadcast(flat, src=src, group=group)
    if dist.get_rank() != src:
        set_flat_(params, flat.to(params[0].device))
