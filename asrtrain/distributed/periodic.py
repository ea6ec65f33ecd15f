"""Periodic model averaging (local SGD), with a constant or an adaptive period.

Every learner runs plain local steps on its own data with its own optimizer state; every ``H`` steps all
learners replace their weights by the average over all of them: one all-reduce of the parameter vector
in the parameters' own dtype and device (what DDP would send), whose result has the same bits on every
learner. With ``H = 1`` and plain SGD this is SSGD with the learners' mean gradient; larger ``H`` trades communication for drift between learners.
The optimizer state (momentum, Adam moments) stays local, as in torch's post-local SGD.

Data and step counts: the partition is SSGD's (every learner a slice of every global batch), so all
learners take the same number of steps and reach every averaging point together; the global batch and
epoch are the same as SSGD's. Each learner is an independent SGD between averagings, so its loss is
normalised by its own count.

**Adaptive period** (``--period adaptive``), after Jiang & Agrawal, "Adaptive Periodic Averaging" (2020):
the variance of the parameters across learners is what hurts convergence, and it is large early and
small late, so average often while learners diverge fast and rarely once they agree. At each averaging
``k`` we measure, just before averaging,

    V_k   = mean_i ||x_i - mean_j x_j||^2        (the cross-learner variance; its root-mean is the
                                                   consensus distance ADPSGD logs)
    S_k   = sum of lr_t^2 over the H_k local steps since the last averaging
    rho_k = V_k / S_k                            (how far learners drift apart per unit of squared step)

and set the next period inversely to the disagreement rate relative to the first one measured:

    H_{k+1} = clamp(floor(tolerance * rho_0 / rho_k), 1, min(2 * H_k, period_max))

The run starts at ``H = 1``; the period at most doubles per averaging but falls at once when the
learners diverge again. Dividing by ``S_k`` makes the rate independent of the learning-rate schedule
(warm-up, annealing), so the period follows the learners' agreement, not the step size. Knobs
(DistConfig): ``period_max`` (default 64) and ``period_tolerance`` (default 1: drift as fast as at the
start means averaging every step; 2 allows twice the initial drift rate at any period). The rule is a
:class:`PeriodRule`; AdaComm (Wang & Joshi 2018), which *shrinks* the period as the loss falls, would be
another subclass.

Bytes sent per learner are counted as a ring all-reduce sends them: ``2 (N-1)/N`` times the vector's
bytes per averaging (plus 16 for the variance; float32 parameters: 4 bytes each); the final average in :meth:`finalize` is not counted.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Dict

import torch
import torch.distributed as dist

from asrtrain.distributed.base import Partition
from asrtrain.distributed.collective import Collective, flatten, set_flat_
from asrtrain.errors import AsrError

log = logging.getLogger("asrtrain.train")


class PeriodRule:
    """A constant period ``H``."""

    def __init__(self, period: int):
        self.period = period

    def next_period(self, variance: float, lr_sq_sum: float) -> int:
        """The period after an averaging that measured ``variance`` over ``lr_sq_sum``."""
        return self.period

    def state_dict(self) -> Dict[str, Any]:
        return {"period": self.period}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.period = int(state["period"])


class VarianceRule(PeriodRule):
    """Jiang & Agrawal's idea: the period from the cross-learner variance (see the module docstring)."""

    def __init__(self, period_max: int = 64, tolerance: float = 1.0):
        super().__init__(1)
        self.period_max, self.tolerance = period_max, tolerance
        self.rho0 = 0.0  # the first positive disagreement rate measured

    def next_period(self, variance: float, lr_sq_sum: float) -> int:
        rho = variance / lr_sq_sum if lr_sq_sum > 0 else 0.0
        if self.rho0 <= 0.0:
            self.rho0 = rho
        grow = min(2 * self.period, self.period_max)
        if rho <= 0.0:
            self.period = grow
        else:
            self.period = max(1, min(grow, math.floor(self.tolerance * self.rho0 / rho)))
        return self.period

    def state_dict(self) -> Dict[str, Any]:
        return {"period": self.period, "rho0": self.rho0}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.period = int(state["period"])
        self.rho0 = float(state["rho0"])


def make_rule(period: str, period_max: int = 64, tolerance: float = 1.0) -> PeriodRule:
    """``"4"`` -> a constant period of 4; ``"adaptive"`` -> :class:`VarianceRule`."""
    if period == "adaptive":
        return VarianceRule(period_max, tolerance)
    if not period.isdigit() or int(period) < 1:
        raise AsrError(f"dist.period = {period!r} is neither a number of steps >= 1 nor 'adaptive'",
                       fix="write e.g. --period 4 or --period adaptive")
    return PeriodRule(int(period))


class PeriodicAveraging(Collective):
    """Local SGD with an exact average over all learners every ``rule.period`` steps.

    Args:
        rank, world_size: this learner in the job.
        rule: the period schedule (:func:`make_rule`).
        sync_initial_weights: broadcast rank 0's weights in :meth:`setup`.
    """

    name = "periodic"

    def __init__(self, rank: int, world_size: int, rule: PeriodRule, sync_initial_weights: bool = True):
        super().__init__(rank, world_size)
        self.rule = rule
        self.sync_initial_weights = sync_initial_weights
        self._m: Dict[str, float] = {}
        self.since = 0  # local steps since the last averaging
        self.lr_sq = 0.0  # sum of lr^2 over those steps
        self.averagings = 0  # in the whole run
        self.bytes_sent = 0.0  # in the whole run
        self._epoch = {"averagings": 0.0, "bytes": 0.0, "steps": 0.0}

    def partition(self) -> Partition:
        return Partition(group=0, num_groups=1, member=self.rank, group_size=self.world_size)

    def setup(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self._setup_world(model, optimizer)

    # -- one step ----------------------------------------------------------------------------------
    def apply_step(self, optimizer) -> None:
        optimizer.step()
        self.lr_sq += float(self.optimizer.param_groups[0]["lr"]) ** 2
        self.since += 1
        self._add("steps", 1)
        self._epoch["steps"] += 1

    def after_step(self, step: int) -> None:
        if self.since >= self.rule.period:
            self.average()

    def average(self) -> None:
        """Replace every learner's weights by their exact mean; then let the rule set the next period."""
        t0 = time.perf_counter()
        mine = self._flat()
        total = mine.clone()
        dist.all_reduce(total)
        mean = total / self.world_size
        dev = torch.linalg.vector_norm((mine - mean).double())
        stats = torch.stack([dev * dev, dev])
        dist.all_reduce(stats)
        variance, consensus = (float(v) / self.world_size for v in stats)
        set_flat_(self.params, mean)
        sent = 2.0 * (self.world_size - 1) / self.world_size * (mine.numel() * mine.element_size() + 16)
        self.rule.next_period(variance, self.lr_sq)
        self.since, self.lr_sq = 0, 0.0
        self.averagings += 1
        self.bytes_sent += sent
        self._epoch["averagings"] += 1
        self._epoch["bytes"] += sent
        self._add("averagings", 1)
        self._add("bytes_sent", sent)
        self._add("comm_s", time.perf_counter() - t0)
        self._m["consensus_distance"] = consensus
        self._m["period"] = float(self.rule.period)

    def _flat(self) -> torch.Tensor:
        """The parameters as one vector in their own dtype and device (what goes over the wire)."""
        return flatten(self.params)

    # -- epochs, end ------------------------------------------------------------------------------
    def end_epoch(self, epoch: int) -> None:
        """Log the epoch's period, averaging count and bytes sent (the schedule runs on across epochs)."""
        e = self._epoch
        log.info("[learner %d] epoch %d periodic: period %d, %d averagings in %d steps, %.3g MB sent "
                 "(run: %d averagings, %.3g MB)", self.rank, epoch + 1, self.rule.period, e["averagings"],
                 e["steps"], e["bytes"] / 1e6, self.averagings, self.bytes_sent / 1e6)
        self._m["period"] = float(self.rule.period)
        self._m["epoch_averagings"] = e["averagings"]
        self._m["epoch_bytes_sent"] = e["bytes"]
        self._epoch = {"averagings": 0.0, "bytes": 0.0, "steps": 0.0}

    def finalize(self, model: torch.nn.Module) -> torch.nn.Module:
        """The exact average of all learners (the run's last local steps included)."""
        mine = self._flat()
        dist.all_reduce(mine)
        params = [p for p in model.parameters() if p.requires_grad]
        set_flat_(params, mine / self.world_size)
        return model

    # -- state -----------------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """Where the schedule stands: resuming continues the period and the counters exactly."""
        return {"rule": self.rule.state_dict(), "since": self.since, "lr_sq": self.lr_sq,
                "averagings": self.averagings, "bytes_sent": self.bytes_sent, "epoch": dict(self._epoch)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if not state:
            return
        self.rule.load_state_dict(state["rule"])
        self.since, self.lr_sq = int(state["since"]), float(state["lr_sq"])
        self.averagings, self.bytes_sent = int(state["averagings"]), float(state["bytes_sent"])
        self._epoch = dict(state.get("epoch", self._epoch))
