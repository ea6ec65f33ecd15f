"""Synchronous SGD: every learner takes a slice of every global batch; gradients are summed each step.

Why the loss is normalised by the *global* count: learner m computes ``sum_{u in slice m} loss_u / C``
where ``C`` is the count (frames or tokens) of the whole global batch, all-reduced by
:meth:`SSGD.global_count`. The all-reduced SUM of the learners' gradients is then exactly the gradient
of ``sum_u loss_u / C`` over the global batch: what one learner computes on the whole batch. Averaging
per-learner means instead would weight a short slice like a long one.
"""

from __future__ import annotations

import time
from typing import Dict, List

import torch
import torch.distributed as dist

from asrtrain.distributed.base import Partition, Strategy, new_group


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

    def barrier(self) -> None:
        dist.barrier(group=self.host_group)

    def metrics(self) -> Dict[str, float]:
        out, self._m = self._m, {}
        return out

    def _add(self, key: str, value: float) -> None:
        self._m[key] = self._m.get(key, 0.0) + value


class SSGD(Collective):
    """Gradient all-reduce (SUM) in ``group`` (default: the whole job) every step.

    The forward pass runs through :meth:`wrap`'s DistributedDataParallel: bucketed all-reduces start
    during the backward pass, as soon as a bucket's gradients are ready, and a comm hook SUMs instead of
    DDP's mean (the loss is already normalised by the global count).

    Args:
        rank, world_size: this learner in the job.
        sync_initial_weights: broadcast rank 0's weights in :meth:`setup` so all learners start equal
            (each learner has its own seed).
    """

    name = "ssgd"

    def __init__(self, rank: int, world_size: int, sync_initial_weights: bool = True):
        super().__init__(rank, world_size)
        self.sync_initial_weights = sync_initial_weights
        self.group = None  # the default group
        self.count_group = None  # the host group of the same learners
        self._m: Dict[str, float] = {}

    def shares_gradients(self) -> bool:
        return self.world_size > 1

    def partition(self) -> Partition:
        return Partition(group=0, num_groups=1, member=self.rank, group_size=self.world_size)

    def setup(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self._setup_world(model, optimizer)
        self.count_group = self.host_group

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        return ddp_sum(model, self.group)

    def global_count(self, local_count: float) -> float:
        count = torch.tensor([float(local_count)], dtype=torch.float64)
        dist.all_reduce(count, group=self.count_group)
        return float(count.item())

    def reduce_gradients(self) -> None:
        """DDP has all-reduced the gradients during the backward pass; only time it here."""
        self._slow_down()
        if self._t_step is not None:
            self._add("compute_s", time.perf_counter() - self._t_step)

    def apply_step(self, optimizer) -> None:
        optimizer.step()
        self._add("steps", 1)


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
    from asrtrain.distributed.comm import set_flat_

    flat = torch.cat([p.detach().reshape(-1) for p in params])
    flat = flat.to(comm_device(group, flat))
    dist.broadcast(flat, src=src, group=group)
    if dist.get_rank() != src:
        set_flat_(params, flat.to(params[0].device))
