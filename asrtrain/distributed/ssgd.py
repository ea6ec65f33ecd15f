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

from asrtrain.distributed.base import Partition, Strategy


class Collective(Strategy):
    """What every multi-learner strategy shares: world collectives and metric counters."""

    _m: Dict[str, float]

    def all_reduce_sum(self, values: torch.Tensor) -> torch.Tensor:
        out = values.clone()
        dist.all_reduce(out)
        return out

    def barrier(self) -> None:
        dist.barrier()

    def metrics(self) -> Dict[str, float]:
        out, self._m = self._m, {}
        return out

    def _add(self, key: str, value: float) -> None:
        self._m[key] = self._m.get(key, 0.0) + value


class SSGD(Collective):
    """Gradient all-reduce (SUM) in ``group`` (default: the whole job) every step.

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
        self._m: Dict[str, float] = {}

    def partition(self) -> Partition:
        return Partition(group=0, num_groups=1, member=self.rank, group_size=self.world_size)

    def setup(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        super().setup(model, optimizer)
        self.params: List[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
        if self.sync_initial_weights:
            broadcast_params(self.params, src=0, group=None)

    def global_count(self, local_count: float) -> float:
        count = torch.tensor([float(local_count)], dtype=torch.float64, device=self._device())
        dist.all_reduce(count, group=self.group)
        return float(count.item())

    def reduce_gradients(self) -> None:
        self._slow_down()
        t0 = time.perf_counter()
        if self._t_step is not None:
            self._add("compute_s", t0 - self._t_step)
        all_reduce_grads(self.params, self.group)
        self._add("comm_s", time.perf_counter() - t0)

    def apply_step(self, optimizer: torch.optim.Optimizer) -> None:
        optimizer.step()
        self._add("steps", 1)

    def _device(self) -> torch.device:
        params = getattr(self, "params", None)
        return params[0].device if params else torch.device("cpu")


def all_reduce_grads(params: List[torch.Tensor], group=None) -> None:
    """Sum every parameter's gradient over ``group`` in one flat all-reduce.

    A parameter without a gradient counts as zeros (and gets one), so all learners reduce vectors of the
    same length even when a batch did not touch some parameter.
    """
    grads = []
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        grads.append(p.grad)
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=group)
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset:offset + n].view_as(g))
        offset += n


def broadcast_params(params: List[torch.Tensor], src: int, group=None) -> None:
    """Overwrite every learner's parameters in ``group`` with global rank ``src``'s."""
    from asrtrain.distributed.comm import set_flat_

    flat = torch.cat([p.detach().reshape(-1) for p in params])
    dist.broadcast(flat, src=src, group=group)
    set_flat_(params, flat)

