"""Class priors of a hybrid (CE-trained) model: counted from the training alignments, written into the
exp dir by training, read by ``asrtrain forward`` to turn posteriors into the scaled likelihoods
Kaldi's ``latgen-faster-mapped`` expects (log-posterior minus log-prior)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import numpy as np

from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_write_text


def priors_from(alignments: Dict[str, np.ndarray], num_targets: int) -> np.ndarray:
    """Class priors counted from the alignments, floored so no class has log(0)."""
    counts = np.zeros(num_targets, dtype=np.float64)
    for v in alignments.values():
        counts += np.bincount(v, minlength=num_targets)[:num_targets]
    counts = np.maximum(counts, 1.0)
    return counts / counts.sum()


def save_priors(priors: np.ndarray, path: Path) -> None:
    atomic_write_text(path, " ".join(f"{p:.10g}" for p in priors) + "\n")


def read_priors(path: Path) -> np.ndarray:
    if not Path(path).is_file():
        raise AsrError("priors not found", path, fix="train with --loss ce and --alignments first")
    return np.asarray([float(x) for x in Path(path).read_text().split()], dtype=np.float64)
