"""Asynchronous decentralized parallel SGD (Lian et al. 2018; Zhang et al. 2019).

Every learner trains on its own stream of batches (N groups of 1) and keeps its own weights. A
communication thread (:class:`asrtrain.distributed.gossip.Gossip`) averages them pairwise with ring
neighbours (active even ranks ask, passive odd ranks answer), so the learners drift together without
ever waiting for the slowest one. The main thread's calls, per step ``k``:

- ``before_step(k)``: fold any averaging that has landed into the parameters; active learners then
  start round ``k`` of their schedule, whose snapshot is the weights ``x_k`` the gradient of step ``k``
  is computed on. The round runs on the communication thread while the main thread computes.
- ``apply_step``: ``optimizer.step()`` under the averaging lock, then:

  - default: wait for round ``k`` and fold it, so ``x_{k+1} = avg(x_k) - lr * g(x_k)`` (Lian et al.'s
    update; the delta is additive, so folding after the step is the same as before it). Communication
    overlaps the gradient computation of its own step.
  - ``delay_by_one``: fold round ``k`` only if it has landed; otherwise step ``k + 1`` waits for it
    before starting round ``k + 1``. Communication may overlap one full further step.

Loss normalisation: each learner is an independent SGD on its own batch, so the count is its own.
"""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Optional

import torch

from asrtrain.distributed.base import Partition, new_group
from asrtrain.distributed.collective import Collective, broadcast_params, set_flat_
from asrtrain.distributed.gossip import Gossip, average_over_learners, check_gossip_size, consensus_distance

# The gossip group's recv waits for the next request for as long as actives take to send it
# (validation, checkpoints); a dead peer is detected by the heartbeat in peerwatch.PeerWatch instead.
GOSSIP_TIMEOUT = datetime.timedelta(days=7)


class GossipState(Collective):
    """State, metrics and device handling shared by ADPSGD and H-ADPSGD (both own a ``gossip``)."""

    gossip: Optional[Gossip]
    _loaded_round: int

    def _init_gossip_state(self, schedule: str, delay_by_one: bool, seed: int, sync_initial_weights: bool) -> None:
        self.schedule, self.delay_by_one, self.seed = schedule, delay_by_one, seed
        self.sync_initial_weights = sync_initial_weights
        self.gossip = None
        self._loaded_round = 0
        self._loaded_pending: Optional[torch.Tensor] = None
        self._m = {}

    def metrics(self) -> Dict[str, float]:
        out, self._m = self._m, {}
        if self.gossip is not None:
            out.update(self.gossip.metrics())
        return summarize(out)

    def state_dict(self) -> Dict[str, Any]:
        """The schedule's position and the averaging that landed but is not folded yet: a checkpoint
        taken mid-epoch keeps the effective weights ``x + D`` exactly, so a resumed job conserves mass."""
        out = {"round": self.gossip.round if self.gossip is not None else self._loaded_round,
               "schedule": self.schedule, "seed": self.seed}
        if self.gossip is not None:
            out["pending"] = self.gossip.pending_state()
        elif self._loaded_pending is not None:
            out["pending"] = self._loaded_pending
        return out

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self._loaded_round = int(state.get("round", 0))
        self._loaded_pending = state.get("pending")
        if self.gossip is not None:
            self.gossip.round = self._loaded_round
            if self._loaded_pending is not None:
                self.gossip.load_pending_state(self._loaded_pending)

    def _start_gossip(self, peers: List[int], group) -> None:
        """Create and start this learner's gossip thread (all process groups exist by now)."""
        self.gossip = Gossip(self.params, peers, self.rank, group, self.schedule, self.delay_by_one, self.seed)
        self.gossip.round = self._loaded_round
        if self._loaded_pending is not None:
            self.gossip.load_pending_state(self._loaded_pending)
        self.gossip.start()

    def settle(self) -> None:
        """Before a checkpoint: actives finish their round in flight, then everybody meets (host barrier),
        so no exchange is half-landed while the learners write their files (passives write back before
        they reply). What landed and is not folded is saved with the strategy state."""
        if self.gossip is not None:
            self.gossip.wait_round()
        self.barrier()

    def close(self) -> None:
        """End averaging cleanly (a no-op after finalize): passives keep serving until every active
        has said STOP, so a learner that stops early (``--stop-after-steps``) never leaves a partner
        waiting for an answer."""
        if self.gossip is not None:
            self.gossip.stop()


class ADPSGD(GossipState):
    """ADPSGD over all learners of the job.

    Args:
        rank, world_size: this learner in the job; world_size must be even (a bipartite ring).
        schedule: ``fixed`` (alternate right/left neighbour) or ``random`` (a random passive learner).
        delay_by_one: overlap round k with the compute of step k (see the module docstring).
        seed: seeds the random schedule (with the rank and the round number).
        sync_initial_weights: broadcast rank 0's weights in :meth:`setup`.
    """

    name = "adpsgd"

    def __init__(self, rank: int, world_size: int, schedule: str = "fixed", delay_by_one: bool = False,
                 seed: int = 1, sync_initial_weights: bool = True):
        super().__init__(rank, world_size)
        check_gossip_size(world_size)
        self._init_gossip_state(schedule, delay_by_one, seed, sync_initial_weights)

    def partition(self) -> Partition:
        return Partition(group=self.rank, num_groups=self.world_size, member=0, group_size=1)

    def setup(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        super().setup(model, optimizer)
        self.params: List[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
        # Every process group is created here, in the main thread, before any thread starts.
        self._make_host_group()
        group = new_group(range(self.world_size), backend="gloo", timeout=GOSSIP_TIMEOUT)
        if self.sync_initial_weights:
            broadcast_params(self.params, src=0)
        self._start_gossip(list(range(self.world_size)), group)

    # -- one step ----------------------------------------------------------------------------------
    def before_step(self, step: int) -> None:
        g = self.gossip
        g.check()
        if self.delay_by_one:
            g.wait_round()
        g.fold()
        g.stage()
        g.trigger()
        super().before_step(step)

    def apply_step(self, optimizer) -> None:
        g = self.gossip
        with g.locked():
            optimizer.step()
            g.steps += 1
        if not self.delay_by_one:
            g.wait_round()  # round k lands before step k ends: x_{k+1} = avg(x_k) - lr * g(x_k)
        g.fold()
        self._add("steps", 1)

    def after_step(self, step: int) -> None:
        self.gossip.check()

    # -- epochs, end ------------------------------------------------------------------------------
    def end_epoch(self, epoch: int) -> None:
        """Settle the epoch's averaging, then sample the consensus distance (a world collective).

        Actives wait for their last round; passives write back before they reply, so once every learner
        has reached the collective, every exchange has landed on both sides and folding it makes the
        epoch checkpoint's weights (and their average over learners) what the learners really hold.
        """
        g = self.gossip
        g.wait_round()
        self._m["consensus_distance"] = consensus_distance(g.effective(), self.world_size, self.host_group)
        g.fold()

    def finalize(self, model: torch.nn.Module) -> torch.nn.Module:
        """Stop averaging (passives serve until every active is done), then average all learners."""
        g = self.gossip
        g.stop()
        g.fold()
        mine = g.effective()
        self._m["consensus_distance"] = consensus_distance(mine, self.world_size, self.host_group)
        params = [p for p in model.parameters() if p.requires_grad]
        set_flat_(params, average_over_learners(mine, self.world_size, self.host_group).to(params[0].device))
        return model


def summarize(m: Dict[str, float]) -> Dict[str, float]:
    """Add the ratios: exchanges per step and mean staleness (steps between snapshot and write-back)."""
    if m.get("steps"):
        m["exchanges_per_step"] = m.get("exchanges", 0.0) / m["steps"]
    if m.get("exchanges"):
        m["staleness"] = m.pop("staleness_sum", 0.0) / m["exchanges"]
    m.pop("staleness_sum", None)
    return m
