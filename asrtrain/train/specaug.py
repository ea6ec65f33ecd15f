"""SpecAugment (frequency and time masks) driven by an explicit generator, so resume stays exact."""

from __future__ import annotations

import torch

from asrtrain.config import SpecAugConfig


def spec_augment(x: torch.Tensor, lengths: torch.Tensor, cfg: SpecAugConfig, gen: torch.Generator
                 ) -> torch.Tensor:
    """Mask ``x`` (N, T, D) in place-free fashion: ``freq_masks`` bands of up to ``freq_width`` bins
    and ``time_masks`` spans of up to ``time_width`` of each utterance's length, filled with zero
    (the CMVN mean)."""
    if not cfg.enabled:
        return x
    x = x.clone()
    n, _, d = x.shape
    for i in range(n):
        t = int(lengths[i])
        for _ in range(cfg.freq_masks):
            w = int(torch.randint(0, cfg.freq_width + 1, (1,), generator=gen))
            f0 = int(torch.randint(0, max(1, d - w), (1,), generator=gen))
            x[i, :, f0:f0 + w] = 0.0
        max_t = max(1, int(cfg.time_width * t))
        for _ in range(cfg.time_masks):
            w = int(torch.randint(0, max_t + 1, (1,), generator=gen))
            t0 = int(torch.randint(0, max(1, t - w), (1,), generator=gen))
            x[i, t0:t0 + w, :] = 0.0
    return x
