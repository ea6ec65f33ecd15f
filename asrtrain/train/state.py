"""What a learner trains with and where it stands: the job (:class:`TrainJob`, resolved once in the
parent), the learner's model, optimizer and device (:class:`Learner`), and its place in the run
(:class:`LearnerState`, what a checkpoint keeps). Shared by the loop and the checkpoints, so neither
imports the other for its types."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import torch

from asrtrain.config import Config
from asrtrain.device import ScaledStep
from asrtrain.model.blstm import BLSTM
from asrtrain.train import checkpoint as ckpt


@dataclass(frozen=True)
class TrainJob:
    """Everything one learner needs; resolved by :func:`asrtrain.train.job.prepare_job` in the parent."""
    cfg: Config
    train_dir: Path
    dev_dir: Optional[Path]
    exp_dir: Path
    tokenizer: Optional[Path] = None  # CTC
    alignments: Optional[str] = None  # CE: rspecifier-like path to an ark/scp of frame labels
    resume: bool = False
    stop_after_steps: int = 0  # testing: stop abruptly after this global step, as if killed
    extended_from: int = 0  # --resume with a larger train.epochs: the epochs the run had (0: not extended)


@dataclass
class Learner:
    """What one learner trains with: the model, the module forward passes run through (DDP in sync
    groups), the optimizer and what steps it (through the fp16 scaler), its device and precision."""
    model: BLSTM
    net: torch.nn.Module
    optimizer: torch.optim.Optimizer
    stepper: ScaledStep
    device: torch.device
    precision: str
    bad_steps: int = 0  # consecutive steps whose gradients were not finite
    writer: Optional[ckpt.AsyncWriter] = None  # one learner: checkpoints are written in the background

    @property
    def scaler(self):
        return self.stepper.scaler


@dataclass
class LearnerState:
    step: int = 0  # optimizer steps taken (global step counter of this learner)
    epoch: int = 0  # the epoch being trained
    batch_index: int = 0  # batches of ``epoch`` already consumed
    history: List[Dict[str, float]] = field(default_factory=list)  # one row per finished epoch
    # ``epoch``'s running train loss so far: the summed loss and count of its counted batches (this
    # learner's), kept in step checkpoints so a mid-epoch resume reports the whole epoch's train_loss
    epoch_loss_sum: float = 0.0
    epoch_count: int = 0
