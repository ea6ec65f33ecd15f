"""The learning-rate schedule as a pure function of the step: linear warmup, then annealing."""

from __future__ import annotations

import math
from typing import Optional

from asrtrain.config import TrainConfig


def lr_at(step: int, cfg: TrainConfig, total_steps: int) -> float:
    """Learning rate for optimizer step ``step`` (0-based) of ``total_steps``.

    - warmup: linear from ``lr / warmup_steps`` to ``lr`` over ``warmup_steps`` steps;
    - ``exp``: ``lr * anneal_factor ** ((step - warmup) / anneal_every_steps)``;
    - ``cosine``: half a cosine from ``lr`` down to ``min_lr`` at ``total_steps``;
    - ``none``: constant ``lr``.
    Never below ``min_lr`` after warmup.
    """
    if cfg.warmup_steps > 0 and step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    after = step - cfg.warmup_steps
    if cfg.anneal == "exp":
        lr = cfg.lr * cfg.anneal_factor ** (after / max(1, cfg.anneal_every_steps))
    elif cfg.anneal == "cosine":
        span = max(1, total_steps - cfg.warmup_steps)
        frac = min(1.0, after / span)
        lr = cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * frac))
    else:
        lr = cfg.lr
    return max(cfg.min_lr, lr)


def schedule_change(cfg: TrainConfig, step: int, old_total: int, new_total: int) -> Optional[str]:
    """What extending a run from ``old_total`` to ``new_total`` steps does to the rate at ``step``, the
    step it resumes at (None when nothing: only ``cosine`` depends on the total)."""
    before, after = lr_at(step, cfg, old_total), lr_at(step, cfg, new_total)
    if before == after:
        return None
    return (f"train.epochs grew: the cosine lr schedule is recomputed over {new_total} steps instead of "
            f"{old_total}, so at step {step} the lr goes from {before:.3g} to {after:.3g} (the steps before "
            "followed the old schedule: not the run a start with the new train.epochs would give)")
