"""Build the strategy a DistConfig asks for; the loop never branches on the strategy's name."""

from __future__ import annotations

from typing import Optional

from asrtrain.config import DistConfig, DPConfig
from asrtrain.distributed.base import Strategy
from asrtrain.device import env_int
from asrtrain.distributed.gossip import check_gossip_size
from asrtrain.errors import AsrError


def group_size(dist_cfg: DistConfig, world_size: int) -> int:
    """H-ADPSGD group size M: ``learners_per_node``, or (0) torchrun's LOCAL_WORLD_SIZE."""
    m = dist_cfg.learners_per_node
    if m == 0:
        local = env_int("LOCAL_WORLD_SIZE", 0)
        if 0 < local < world_size:
            return local
        raise AsrError("h-adpsgd needs the group size: all learners are on one node",
                       fix="give --learners-per-node M (e.g. 2 for 4 learners)")
    return m


def describe_layout(dist_cfg: DistConfig, world_size: int) -> str:
    """One line for train.log: the strategy and how the learners are arranged."""
    if dist_cfg.strategy == "h-adpsgd":
        m = group_size(dist_cfg, world_size)
        spans = ", ".join(f"{k * m}-{(k + 1) * m - 1}" for k in range(world_size // m))
        return (f"h-adpsgd: {world_size} learners in {world_size // m} groups of {m} (ranks {spans}): "
                f"all-reduce inside a group, {dist_cfg.averaging} gossip between groups")
    if dist_cfg.strategy == "adpsgd":
        return f"adpsgd: {world_size} learners, {dist_cfg.averaging} partners"
    if dist_cfg.strategy == "periodic":
        return f"periodic: {world_size} learners, period {dist_cfg.period}"
    return f"{dist_cfg.strategy}: {world_size} learner(s)"


def check_dist_config(dist_cfg: DistConfig, world_size: int) -> None:
    """Refuse impossible layouts before any process starts (odd rings, uneven groups)."""
    if world_size < 1:
        raise AsrError(f"--learners must be >= 1, got {world_size}")
    if dist_cfg.strategy == "adpsgd":
        check_gossip_size(world_size)
    elif dist_cfg.strategy == "h-adpsgd":
        m = group_size(dist_cfg, world_size)
        if world_size % m:
            raise AsrError(f"h-adpsgd: {world_size} learners do not split into groups of {m}",
                           fix="make --learners a multiple of --learners-per-node")
        check_gossip_size(world_size // m, "groups (learners / learners-per-node)")
    elif dist_cfg.strategy == "single" and world_size != 1:
        raise AsrError(f"strategy single runs one learner, got --learners {world_size}",
                       fix="use --strategy ssgd, adpsgd, h-adpsgd or periodic for several learners")
    elif dist_cfg.strategy == "periodic":
        from asrtrain.distributed.periodic import make_rule
        make_rule(dist_cfg.period, dist_cfg.period_max, dist_cfg.period_tolerance)
    parse_slowdown(dist_cfg.slowdown, 0)


def parse_slowdown(text: str, rank: int) -> float:
    """``"1:4,3:2"`` -> 4.0 for rank 1, 2.0 for rank 3, 1.0 otherwise."""
    factor = 1.0
    for item in filter(None, (t.strip() for t in text.split(","))):
        try:
            r, f = item.split(":")
            r_i, f_f = int(r), float(f)
        except ValueError:
            raise AsrError(f"dist.slowdown item {item!r} is not rank:factor",
                           fix="write e.g. 1:3,2:2") from None
        if f_f < 1.0:
            raise AsrError(f"dist.slowdown factor {f_f} for rank {r_i} must be >= 1")
        if r_i == rank:
            factor = f_f
    return factor


def make_strategy(dist_cfg: DistConfig, rank: int = 0, world_size: int = 1, seed: int = 1,
                  sync_initial_weights: bool = True, dp: Optional[DPConfig] = None) -> Strategy:
    """The Strategy for ``dist_cfg.strategy`` on learner ``rank`` of ``world_size``.

    Args:
        dist_cfg: strategy, averaging schedule, delay_by_one, learners_per_node, slowdown.
        seed: the job's seed (train.seed); the random averaging schedule derives from it.
        sync_initial_weights: broadcast rank 0's weights at setup (tests turn it off).
        dp: when enabled, wrap the strategy in :class:`asrtrain.distributed.dp.DPStrategy`.
    """
    check_dist_config(dist_cfg, world_size)
    kind = dist_cfg.strategy
    if kind == "single":
        strategy: Strategy = Strategy(rank, world_size)
    elif kind == "ssgd":
        from asrtrain.distributed.ssgd import SSGD
        strategy = SSGD(rank, world_size, sync_initial_weights=sync_initial_weights)
    elif kind == "adpsgd":
        from asrtrain.distributed.adpsgd import ADPSGD
        strategy = ADPSGD(rank, world_size, dist_cfg.averaging, dist_cfg.delay_by_one, seed,
                          sync_initial_weights)
    elif kind == "h-adpsgd":
        from asrtrain.distributed.hadpsgd import HADPSGD
        strategy = HADPSGD(rank, world_size, group_size(dist_cfg, world_size), dist_cfg.averaging,
                           dist_cfg.delay_by_one, seed, sync_initial_weights)
    elif kind == "periodic":
        from asrtrain.distributed.periodic import PeriodicAveraging, make_rule
        strategy = PeriodicAveraging(rank, world_size, make_rule(dist_cfg.period, dist_cfg.period_max,
                                                                 dist_cfg.period_tolerance),
                                     sync_initial_weights)
    else:
        raise AsrError(f"dist.strategy = {kind!r} is not one of single, ssgd, adpsgd, h-adpsgd, periodic")
    strategy.slowdown = parse_slowdown(dist_cfg.slowdown, rank)
    if dp is not None and dp.enabled:
        from asrtrain.distributed.dp import DPStrategy
        strategy = DPStrategy(strategy, dp, seed)
    return strategy
