"""The checkpoints that keep a learner's place in its training (:class:`asrtrain.train.state.LearnerState`) that keep it: every
learner writes its own file and ``latest`` moves only when all have, a resumed job checks that every
learner found the same epoch, and :func:`average_weights` gives the learner-averaged model an epoch
checkpoint carries for the final average. The files themselves (atomic writes, checksums, the
background writer) are :mod:`asrtrain.train.checkpoint`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Dict, Optional

import torch

from asrtrain.distributed.base import Strategy
from asrtrain.distributed.collective import flatten
from asrtrain.errors import AsrError
from asrtrain.distributed.runtime.beacon import note_progress
from asrtrain.distributed.runtime.launch import writes_job_files
from asrtrain.model.stamp import STAMP_KEY, check_stamp, config_stamp
from asrtrain.train import checkpoint as ckpt
from asrtrain.train.state import Learner, LearnerState, TrainJob

log = logging.getLogger("asrtrain.train")


def save_checkpoint(learner: Learner, strategy: Strategy, state: LearnerState, job: TrainJob, tag: str,
                    avg_model: Optional[Dict[str, torch.Tensor]] = None) -> None:
    """Every learner writes its own file; ``latest`` moves only after all of them have."""
    strategy.settle()
    payload = {
        "model": learner.model.state_dict(), "optimizer": learner.optimizer.state_dict(), "step": state.step,
        "epoch": state.epoch, "batch_index": state.batch_index, "history": state.history,
        "epoch_loss_sum": state.epoch_loss_sum, "epoch_count": state.epoch_count,
        "rng": ckpt.rng_state(learner.device), "strategy": strategy.state_dict(),
        "world_size": strategy.world_size, "bad_steps": learner.bad_steps, STAMP_KEY: config_stamp(job.cfg),
    }
    if learner.scaler is not None:
        payload["scaler"] = learner.scaler.state_dict()
    if avg_model is not None:
        payload["avg_model"] = avg_model
    keep, keep_epochs = job.cfg.train.keep_checkpoints, job.cfg.train.average_last
    if learner.writer is not None and strategy.world_size == 1:
        # One learner: no barrier to wait for, so the write overlaps the next steps; ``latest`` moves
        # when the file is on disk (on the writer's thread). Several learners write in place: ``latest``
        # may move only after all of them have, which takes a barrier on the training thread.
        def mark() -> None:
            ckpt.mark_latest(job.exp_dir, tag, keep, 1, keep_epochs=keep_epochs)
            log.info("checkpoint %s (step %d)", tag, payload["step"])

        learner.writer.submit(ckpt.ckpt_path(job.exp_dir, tag, strategy.rank), payload, then=mark)
        note_progress()
        return
    ckpt.save(job.exp_dir, tag, strategy.rank, payload)
    note_progress()
    strategy.barrier()
    if strategy.is_main:
        ckpt.mark_latest(job.exp_dir, tag, keep, strategy.world_size, keep_epochs=keep_epochs)
        log.info("checkpoint %s (step %d)", tag, state.step)
    elif writes_job_files():  # each node's local leader: its disk may not be rank 0's (no shared fs)
        ckpt.prune(job.exp_dir, tag, keep, strategy.world_size, keep_epochs=keep_epochs)


def check_resumed_together(strategy: Strategy, state: LearnerState, exp_dir: Path) -> None:
    """--resume: every learner found a checkpoint of the same epoch, or none did. A learner that found
    none (a node that does not see rank 0's checkpoint files: no shared file system) would start at
    step 0 while the others continue, and the job would hang or train wrong; refuse it in one line."""
    if strategy.world_size == 1:
        return
    found = float(state.step > 0 or state.epoch > 0)
    tot = strategy.all_reduce_sum(torch.tensor([found, state.epoch, state.epoch ** 2], dtype=torch.float64))
    n = strategy.world_size
    if float(tot[0]) not in (0.0, float(n)) or n * float(tot[2]) != float(tot[1]) ** 2:
        raise AsrError(f"--resume: the learners found different checkpoints ({int(tot[0])} of {n} found one; "
                       "a node that cannot see rank 0's checkpoint files starts over)", ckpt.ckpt_dir(exp_dir),
                       fix="resume with the exp dir on a file system every node shares")


def load_checkpoint(learner: Learner, strategy: Strategy, job: TrainJob) -> LearnerState:
    """The learner's state from the exp dir's latest checkpoint, tensors mapped to its device."""
    tag = ckpt.latest_tag(job.exp_dir)
    if tag is None:
        log.info("--resume: no checkpoint in %s, starting fresh", job.exp_dir)
        return LearnerState()
    path = ckpt.ckpt_path(job.exp_dir, tag, strategy.rank)
    payload = ckpt.load(job.exp_dir, tag, strategy.rank, map_location=learner.device)
    if payload.get("world_size", 1) != strategy.world_size:
        raise AsrError(f"checkpoint was written by {payload['world_size']} learners, this run has "
                       f"{strategy.world_size}", path, fix=f"resume with --learners {payload['world_size']}")
    check_stamp(payload, job.cfg, job.exp_dir / "config.yaml", path)
    try:
        learner.model.load_state_dict(payload["model"])
        learner.optimizer.load_state_dict(payload["optimizer"])
    except (RuntimeError, ValueError, KeyError) as err:
        raise AsrError(f"checkpoint does not fit this model ({' '.join(str(err).split())[:160]})", path,
                       fix="resume with the config the run was trained with") from None
    if learner.scaler is not None and "scaler" in payload:
        learner.scaler.load_state_dict(payload["scaler"])
    learner.bad_steps = int(payload.get("bad_steps", 0))
    strategy.load_state_dict(payload["strategy"])
    ckpt.set_rng_state(payload["rng"], learner.device)
    log.info("resumed from %s: epoch %d, batch %d, step %d", tag, payload["epoch"] + 1,
             payload["batch_index"], payload["step"])
    state = LearnerState(payload["step"], payload["epoch"], payload["batch_index"], payload["history"],
                         float(payload.get("epoch_loss_sum", 0.0)), int(payload.get("epoch_count", 0)))
    if payload["batch_index"] and "epoch_count" not in payload:
        # A step checkpoint of an older asrtrain kept no running loss: the epoch's train_loss can only
        # cover what this run trains of it.
        log.info("learner %d: %s predates the epoch's running loss in step checkpoints: epoch %d's train_loss "
                 "covers the batches since the resume (from batch %d)", strategy.rank, tag,
                 payload["epoch"] + 1, payload["batch_index"] + 1)
    return state


def average_weights(model, strategy: Strategy) -> Dict[str, torch.Tensor]:
    """The mean of all learners' weights, identical on every learner and on the host; a collective call.

    One learner: its own weights (on its device), not a copy. The checkpoint then holds tensors that
    share storage with its ``model`` entry, and ``torch.save`` writes them once (an AN4 epoch
    checkpoint with Adam: 54.7 MB instead of 72.9 MB); loads map them to where they are wanted."""
    state = model.state_dict()
    if strategy.world_size == 1:
        return state
    names = [n for n, t in state.items() if t.is_floating_point()]
    flat = flatten([state[n] for n in names], dtype=torch.float64)
    flat = strategy.all_reduce_sum(flat) / strategy.world_size  # on the host
    out, offset = {}, 0
    for n, t in state.items():
        if n in names:
            out[n] = flat[offset: offset + t.numel()].view(t.shape).to(t.dtype).clone()
            offset += t.numel()
        else:
            out[n] = t.to("cpu", copy=True)
    return out
