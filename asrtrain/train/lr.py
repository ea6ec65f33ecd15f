"""The learning-rate schedule as a pure function of the step: linear warmup, then annealing."""

from __future__ import annotations

import math

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
