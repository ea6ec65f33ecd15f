"""Synchronous SGD: every learner takes a slice of every global batch; gradients are summed each step.

Why the loss is normalised by the *global* count: learner m computes ``sum_{u in slice m} loss_u / C``
where ``C`` is the count (frames or tokens) of the whole global batch, all-reduced by
:meth:`SSGD.global_count`. The all-reduced SUM of the learners' gradients is then exactly the gradient
of ``sum_u loss_u / C`` over the global batch: what one learner computes on the whole batch. Averaging
per-learner means instead would weight a short slice like a long one.
"""

from __future__ import annotations

from typing import Dict

import torch
import torch.distributed as dist

from asrtrain.distributed.base import Partition
from asrtrain.distributed.collective import Collective, ddp_sum


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

    def apply_step(self, optimizer) -> None:
        optimizer.step()
        self._add("steps", 1)
