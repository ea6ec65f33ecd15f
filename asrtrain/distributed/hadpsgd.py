"""Hierarchical ADPSGD: synchronous groups ("super-learners") that gossip asynchronously.

Learners are split into ``G = N / M`` groups of ``M`` consecutive ranks (one node each, normally).
Inside a group, gradients are all-reduced every step (the group steps as one SSGD learner, loss
normalised by the group's count; DDP overlaps the all-reduce with the backward pass, over NCCL on GPUs). The group leaders (member 0) run ADPSGD among themselves
(:class:`asrtrain.distributed.gossip.Gossip`). A leader's averaging lands in its pending delta, and the
leader folds it into its weights and broadcasts them inside the group in ``after_step``. The leader's
round k starts in ``before_step`` and overlaps the group's compute of step k; by default ``after_step``
waits for it (step k ends with averaged weights), with ``delay_by_one`` it folds it only if it has
landed, and step k + 1 waits for it before starting round k + 1.

**Invariant:** all members of a group hold identical weights after every step: they start identical
(broadcast in ``setup``), apply the same all-reduced gradient with the same optimizer state, and the
only other change (the leader's averaging) reaches everybody by the broadcast at the boundary.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import List

import torch
import torch.distributed as dist

from asrtrain.distributed.adpsgd import GOSSIP_TIMEOUT, GossipState
from asrtrain.distributed.base import Partition, new_group
from asrtrain.distributed.collective import broadcast_params, ddp_sum, flat_copy, set_flat_
from asrtrain.distributed.gossip import average_over_learners, check_gossip_size, consensus_distance
from asrtrain.errors import AsrError

log = logging.getLogger(__name__)


class HADPSGD(GossipState):
    """H-ADPSGD with groups of ``group_size`` learners.

    Args:
        rank, world_size: this learner in the job.
        group_size: M learners per group (``learners_per_node``); N / M must be even.
        schedule, delay_by_one, seed: as for :class:`asrtrain.distributed.adpsgd.ADPSGD` (leaders).
        sync_initial_weights: broadcast rank 0's weights to all learners in :meth:`setup` (otherwise
            only the group leader's inside each group).
    """

    name = "h-adpsgd"

    def __init__(self, rank: int, world_size: int, group_size: int, schedule: str = "fixed",
                 delay_by_one: bool = False, seed: int = 1, sync_initial_weights: bool = True):
        super().__init__(rank, world_size)
        if group_size < 1 or world_size % group_size:
            raise AsrError(f"h-adpsgd: {world_size} learners do not split into groups of {group_size}",
                           fix="make --learners a multiple of --learners-per-node")
        self.M, self.G = group_size, world_size // group_size
        check_gossip_size(self.G, "groups (learners / learners-per-node)")
        self.g, self.member = divmod(rank, self.M)
        self.leader = self.g * self.M
        self.is_leader = self.member == 0
        self._init_gossip_state(schedule, delay_by_one, seed, sync_initial_weights)

    def shares_gradients(self) -> bool:
        return self.M > 1

    def partition(self) -> Partition:
        return Partition(group=self.g, num_groups=self.G, member=self.member, group_size=self.M)

    def setup(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        super().setup(model, optimizer)
        self.params: List[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
        # All process groups are created here, in the main thread, by every rank, before any thread:
        # the groups' own (NCCL on GPUs) for gradients and broadcasts, their host twins (gloo) for the
        # counts, the host world group, and the leaders' gloo gossip ring.
        self._make_host_group()  # first: it does not depend on M, so the layout check can use it
        self._check_layout()
        groups = [new_group(range(k * self.M, (k + 1) * self.M)) for k in range(self.G)]
        self.group = groups[self.g]
        self.count_group = self.group
        if self.host_group is not None:
            host_groups = [new_group(range(k * self.M, (k + 1) * self.M), backend="gloo")
                           for k in range(self.G)]
            self.count_group = host_groups[self.g]
        leaders = [k * self.M for k in range(self.G)]
        gossip_group = new_group(leaders, backend="gloo", timeout=GOSSIP_TIMEOUT)
        if self.sync_initial_weights:
            broadcast_params(self.params, src=0)
        else:
            self._broadcast_in_group()
        if self.is_leader:
            self._start_gossip(leaders, gossip_group)

    def _check_layout(self) -> None:
        """Every learner derives M on its own (``--learners-per-node``, else its LOCAL_WORLD_SIZE): compare
        them over the host group before any group of M is made, where a disagreement (nodes running different
        numbers of learners) would make ranks call ``new_group`` differently and hang. A group whose learners
        run on several hosts (Slurm's cyclic task placement, a wrong ``--learners-per-node``) is legal but
        its every-step all-reduce crosses the network: rank 0 warns."""
        seen: List = [None] * self.world_size
        dist.all_gather_object(seen, (self.M, socket.gethostname()), group=self.host_group)
        sizes = sorted({m for m, _ in seen})
        if len(sizes) > 1:
            counts = ", ".join(f"M={m} on {sum(1 for x, _ in seen if x == m)} learners" for m in sizes)
            raise AsrError(f"h-adpsgd: the learners disagree on the group size ({counts}): each takes it "
                           "from --learners-per-node or else its node's LOCAL_WORLD_SIZE",
                           fix="give --learners-per-node M, or run as many learners on every node")
        if self.rank == 0:
            for k in range(self.G):
                hosts = sorted({h for _, h in seen[k * self.M:(k + 1) * self.M]})
                if len(hosts) > 1:
                    log.warning("h-adpsgd: group %d (ranks %d-%d) spans hosts %s: its every-step all-reduce "
                                "crosses the network (use srun --distribution=block, or set "
                                "--learners-per-node to the learners per node)", k, k * self.M,
                                (k + 1) * self.M - 1, ", ".join(hosts))

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The group's gradient all-reduce as DDP (overlapped with the backward pass)."""
        return ddp_sum(model, self.group) if self.M > 1 else model

    # -- one step ----------------------------------------------------------------------------------
    def global_count(self, local_count: float) -> float:
        count = torch.tensor([float(local_count)], dtype=torch.float64)
        dist.all_reduce(count, group=self.count_group)
        return float(count.item())

    def before_step(self, step: int) -> None:
        g = self.gossip
        if g is not None:
            g.check()
            if self.delay_by_one:
                g.wait_round()
            g.stage()
            g.trigger()  # the round overlaps the group's gradient computation
        super().before_step(step)

    def apply_step(self, optimizer) -> None:
        if self.gossip is not None:
            with self.gossip.locked():
                optimizer.step()
                self.gossip.steps += 1
        else:
            optimizer.step()
        self._add("steps", 1)

    def after_step(self, step: int) -> None:
        if self.gossip is not None and not self.delay_by_one:
            self.gossip.wait_round()  # round k lands before step k ends (see ADPSGD)
        self._fold_and_broadcast()

    def _fold_and_broadcast(self) -> None:
        if self.gossip is not None:
            self.gossip.fold()
        self._broadcast_in_group()

    def _broadcast_in_group(self) -> None:
        if self.M > 1:
            t0 = time.perf_counter()
            broadcast_params(self.params, src=self.leader, group=self.group)
            self._add("group_comm_s", time.perf_counter() - t0)

    # -- epochs, end ------------------------------------------------------------------------------
    def end_epoch(self, epoch: int) -> None:
        """Settle the epoch's averaging (see ADPSGD.end_epoch), sample the consensus distance over all
        learners (a world collective), then fold and broadcast inside the group."""
        if self.gossip is not None:
            self.gossip.wait_round()
        self._m["consensus_distance"] = consensus_distance(self._effective(), self.world_size, self.host_group)
        self._fold_and_broadcast()

    def finalize(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.gossip is not None:
            self.gossip.stop()
        self._fold_and_broadcast()
        mine = flat_copy(self.params)
        self._m["consensus_distance"] = consensus_distance(mine, self.world_size, self.host_group)
        params = [p for p in model.parameters() if p.requires_grad]
        set_flat_(params, average_over_learners(mine, self.world_size, self.host_group).to(params[0].device))
        return model

    def _effective(self) -> torch.Tensor:
        return self.gossip.effective() if self.gossip is not None else flat_copy(self.params)

