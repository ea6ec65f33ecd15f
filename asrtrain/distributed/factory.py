"""Placeholder until the strategies land: single only."""
from asrtrain.distributed.base import Strategy
from asrtrain.errors import AsrError


def make_strategy(cfg, rank, world_size):
    if cfg.strategy != "single":
        raise AsrError(f"strategy {cfg.strategy} not available yet")
    return Strategy(rank, world_size)
