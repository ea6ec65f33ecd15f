"""The exported graph's inputs as numpy arrays (no torch: the onnx engine uses this too)."""

from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np


def padded_batch(feats: Sequence[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """Features [T, D] each -> (float32 [B, max T, D] zero-padded, int64 lengths [B]): the graph's inputs."""
    lengths = np.array([f.shape[0] for f in feats], dtype=np.int64)
    out = np.zeros((len(feats), int(lengths.max()), feats[0].shape[1]), dtype=np.float32)
    for i, f in enumerate(feats):
        out[i, : f.shape[0]] = f
    return out, lengths
