"""Checkpoints: atomic, one file per learner and tag, a ``latest`` pointer written last.

Layout in ``<exp>/checkpoints/``::

    epoch-0003.rank0.pt          end of epoch 3 (position: epoch 4, batch 0)
    step-00001200.rank0.pt       mid-epoch, every ``train.checkpoint_every_steps``
    latest                       the tag of the newest complete checkpoint (all ranks written)

Each file holds the model, optimizer, step, sampler position (epoch, batch index), the RNG states,
the strategy state and the learner's history; epoch files also hold the averaged model of all
learners (``avg_model``), which ``average_last`` uses for ``final.pt``.
"""

from __future__ import annotations

import logging
import random
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import torch

from asrtrain.errors import AsrError
from asrtrain.io import atomic_torch_save, atomic_write_text

log = logging.getLogger(__name__)


def rng_state() -> Dict[str, Any]:
    return {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}


def set_rng_state(state: Dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])


def ckpt_dir(exp_dir: Path) -> Path:
    return Path(exp_dir) / "checkpoints"


def ckpt_path(exp_dir: Path, tag: str, rank: int) -> Path:
    return ckpt_dir(exp_dir) / f"{tag}.rank{rank}.pt"


def save(exp_dir: Path, tag: str, rank: int, state: Dict[str, Any]) -> Path:
    path = ckpt_path(exp_dir, tag, rank)
    atomic_torch_save(state, path)
    return path


def mark_latest(exp_dir: Path, tag: str, keep: int, world_size: int) -> None:
    """Point ``latest`` at ``tag`` (call after every rank has written it) and prune old step files."""
    atomic_write_text(ckpt_dir(exp_dir) / "latest", tag + "\n")
    steps = sorted(ckpt_dir(exp_dir).glob("step-*.rank0.pt"))
    for old in steps[:-max(1, keep)]:
        old_tag = old.name.split(".rank")[0]
        if old_tag == tag:
            continue
        for r in range(world_size):
            ckpt_path(exp_dir, old_tag, r).unlink(missing_ok=True)


def latest_tag(exp_dir: Path) -> Optional[str]:
    p = ckpt_dir(exp_dir) / "latest"
    if not p.is_file():
        return None
    tag = p.read_text().strip()
    return tag or None


def load(exp_dir: Path, tag: str, rank: int) -> Dict[str, Any]:
    path = ckpt_path(exp_dir, tag, rank)
    if not path.is_file():
        raise AsrError(f"checkpoint for learner {rank} missing", path,
                       fix="resume with the same --learners as the interrupted run")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # a truncated file cannot happen with atomic writes, but say so clearly
        raise AsrError(f"cannot read checkpoint: {err}", path, fix="delete it and resume from the previous one")


def epoch_checkpoints(exp_dir: Path) -> List[Path]:
    return sorted(ckpt_dir(exp_dir).glob("epoch-*.rank0.pt"),
                  key=lambda p: int(re.findall(r"epoch-(\d+)", p.name)[0]))


def average_last(exp_dir: Path, k: int) -> Dict[str, torch.Tensor]:
    """Average the ``avg_model`` of the last ``k`` epoch checkpoints (floating tensors only)."""
    paths = epoch_checkpoints(exp_dir)[-max(1, k):]
    if not paths:
        raise AsrError("no epoch checkpoints to average", ckpt_dir(exp_dir), fix="train first")
    total: Dict[str, torch.Tensor] = {}
    for p in paths:
        state = torch.load(p, map_location="cpu", weights_only=False)["avg_model"]
        for name, t in state.items():
            if name not in total:
                total[name] = t.clone().double() if t.is_floating_point() else t.clone()
            elif t.is_floating_point():
                total[name] += t.double()
    out = {n: (t / len(paths)).float() if t.is_floating_point() else t for n, t in total.items()}
    log.info("averaged %d checkpoints: %s", len(paths), ", ".join(p.name for p in paths))
    return out
