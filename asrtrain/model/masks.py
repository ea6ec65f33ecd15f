"""The one definition of which frames of a padded batch are real, shared by the front-end and the decoder."""
from __future__ import annotations

import torch


def valid_frames(lengths: torch.Tensor, t: int, device: torch.device | None = None) -> torch.Tensor:
    """(N, T) bool: True at frame ``i`` of utterance ``n`` when ``i < lengths[n]``, on ``device`` (default: that
    of ``lengths``). ``lengths`` may live on another device (the CPU copy a batch carries)."""
    device = lengths.device if device is None else device
    return torch.arange(t, device=device)[None, :] < lengths.to(device)[:, None]
