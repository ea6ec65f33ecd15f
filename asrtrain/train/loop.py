"""One learner's training loop: epochs of length-bucketed batches, lr_at(step), clipping, validation,
atomic checkpoints and exact resume. Distributed behaviour lives entirely in the Strategy object.

Commands (the exp dir describes itself: config.yaml, tokenizer.model, checkpoints/, final.pt)::

    # one process
    asrtrain train --config conf/train.yaml --train-data dump/train --dev-data dump/dev \
        --tokenizer exp/tok/tokenizer.model --exp-dir exp/blstm
    # one node, 4 learners, ADPSGD with random partners
    asrtrain train ... --strategy adpsgd --learners 4 --averaging random
    # two nodes: torchrun --nnodes 2 --nproc-per-node 4 --rdzv-endpoint HOST:29500 -m asrtrain train ...
"""

from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn.functional as F

from asrtrain.config import Config
from asrtrain.distributed.base import Strategy
from asrtrain.model.blstm import BLSTM, build_model
from asrtrain.train import checkpoint as ckpt
from asrtrain.train.batching import BatchSource, BatchSpec, batch_source, oversized
from asrtrain.train.dataset import AsrDataset, Batch, prefetch
from asrtrain.train.lr import lr_at
from asrtrain.train.monitor import Monitor
from asrtrain.train.specaug import spec_augment

log = logging.getLogger("asrtrain.train")


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


@dataclass
class LearnerState:
    step: int = 0  # optimizer steps taken (global step counter of this learner)
    epoch: int = 0  # the epoch being trained
    batch_index: int = 0  # batches of ``epoch`` already consumed
    history: List[Dict[str, float]] = field(default_factory=list)  # one row per finished epoch


# ------------------------------------------------------------------------------------------------
# Pieces of one step

def compute_loss(model: BLSTM, batch: Batch, loss_kind: str):
    """Summed loss of a batch and its count (tokens for CTC, output frames for CE).

    The sum, not the mean, comes back: the caller divides by the *global* count over all learners,
    so that N learners' summed gradients equal one learner's gradient on the union of their batches.
    """
    if len(batch.utts) == 0:
        zero = sum(p.sum() for p in model.parameters()) * 0.0  # keeps the graph for allreduce
        return zero, 0
    log_probs, out_lens = model(batch.feats, batch.feat_lens)
    if loss_kind == "ctc":
        targets = batch.targets.clamp(min=0)
        loss = F.ctc_loss(log_probs.transpose(0, 1), targets, out_lens, batch.target_lens, blank=0,
                          reduction="sum", zero_infinity=True)
        count = int(batch.target_lens.sum())
    else:
        t = min(log_probs.shape[1], batch.targets.shape[1])
        loss = F.nll_loss(log_probs[:, :t].reshape(-1, log_probs.shape[-1]),
                          batch.targets[:, :t].reshape(-1), ignore_index=-1, reduction="sum")
        count = int((batch.targets[:, :t] >= 0).sum())
    return loss, count


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def make_optimizer(model: torch.nn.Module, cfg: Config) -> torch.optim.Optimizer:
    t = cfg.train
    if t.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=t.lr, momentum=t.momentum, weight_decay=t.weight_decay)
    return torch.optim.Adam(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)


def train_one_epoch(model, optimizer, strategy: Strategy, data: AsrDataset, source: BatchSource,
                    state: LearnerState, job: TrainJob, total_steps: int, monitor: Monitor
                    ) -> Dict[str, float]:
    """Train on this learner's batches of ``state.epoch`` from ``state.batch_index``; returns totals."""
    cfg = job.cfg
    model.train()
    loss_sum, count_sum = 0.0, 0
    gen = torch.Generator()
    todo = source.batches(state.epoch, state.batch_index)
    for batch in prefetch(data, todo, source.prefetch_depth):
        lr = lr_at(source.schedule_step(state.step), cfg.train, total_steps)
        set_lr(optimizer, lr)
        strategy.before_step(state.step)
        gen.manual_seed(cfg.train.seed * 7919 + state.step * 31 + strategy.rank)
        feats = spec_augment(batch.feats, batch.feat_lens, cfg.specaug, gen)
        t0 = time.perf_counter()
        loss, count = compute_loss(model, Batch(batch.utts, feats, batch.feat_lens, batch.targets,
                                                batch.target_lens), cfg.model.loss)
        denom = max(1.0, strategy.global_count(count))
        optimizer.zero_grad(set_to_none=False)
        (loss / denom).backward()
        strategy.reduce_gradients()
        if cfg.train.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip)
        strategy.apply_step(optimizer)
        strategy.after_step(state.step)
        compute_s = time.perf_counter() - t0
        state.step += 1
        state.batch_index += 1
        loss_sum += float(loss.detach())
        count_sum += count
        monitor.step(state, float(loss.detach()) / max(1, count), lr, batch.num_frames, compute_s,
                     strategy.metrics)
        if cfg.train.checkpoint_every_steps and state.step % cfg.train.checkpoint_every_steps == 0 \
                and source.remaining(state.epoch, state.batch_index):
            save_checkpoint(model, optimizer, strategy, state, job, tag=f"step-{state.step:08d}")
        # The job's progress in static steps (a learner's own count under dynamic balance differs)
        if job.stop_after_steps and source.schedule_step(state.step) >= job.stop_after_steps:
            raise StopTraining(state.step)
    return {"train_loss": loss_sum / max(1, count_sum), "train_count": count_sum}


class StopTraining(Exception):
    """Raised by ``stop_after_steps`` to end a run abruptly (tests of resume)."""


@torch.no_grad()
def compute_validation_loss(model, strategy: Strategy, data: AsrDataset, cfg: Config) -> float:
    """Loss per token (CTC) or frame (CE) on the dev set, summed over all learners' shards."""
    model.eval()
    utts = sorted(data.lengths)[strategy.rank::strategy.world_size]
    spec = BatchSpec(cfg.train.max_frames, cfg.train.max_utts, cfg.train.bucket_width, 0)
    from asrtrain.train.batching import make_batches
    totals = torch.zeros(2, dtype=torch.float64)
    for batch in prefetch(data, make_batches({u: data.lengths[u] for u in utts}, spec, 0)):
        loss, count = compute_loss(model, batch, cfg.model.loss)
        totals += torch.tensor([float(loss), float(count)], dtype=torch.float64)
    totals = strategy.all_reduce_sum(totals)
    model.train()
    return float(totals[0] / max(1.0, float(totals[1])))


def save_checkpoint(model, optimizer, strategy: Strategy, state: LearnerState, job: TrainJob, tag: str,
                    avg_model: Optional[Dict[str, torch.Tensor]] = None) -> None:
    """Every learner writes its own file; ``latest`` moves only after all of them have."""
    payload = {
        "model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": state.step,
        "epoch": state.epoch, "batch_index": state.batch_index, "history": state.history,
        "rng": ckpt.rng_state(), "strategy": strategy.state_dict(), "world_size": strategy.world_size,
    }
    if avg_model is not None:
        payload["avg_model"] = avg_model
    ckpt.save(job.exp_dir, tag, strategy.rank, payload)
    strategy.barrier()
    if strategy.is_main:
        ckpt.mark_latest(job.exp_dir, tag, job.cfg.train.keep_checkpoints, strategy.world_size)
        log.info("checkpoint %s (step %d)", tag, state.step)


def load_checkpoint(model, optimizer, strategy: Strategy, job: TrainJob) -> LearnerState:
    tag = ckpt.latest_tag(job.exp_dir)
    if tag is None:
        log.info("--resume: no checkpoint in %s, starting fresh", job.exp_dir)
        return LearnerState()
    payload = ckpt.load(job.exp_dir, tag, strategy.rank)
    if payload.get("world_size", 1) != strategy.world_size:
        from asrtrain.errors import AsrError
        raise AsrError(f"checkpoint was written by {payload['world_size']} learners, this run has "
                       f"{strategy.world_size}", ckpt.ckpt_path(job.exp_dir, tag, strategy.rank),
                       fix=f"resume with --learners {payload['world_size']}")
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    strategy.load_state_dict(payload["strategy"])
    ckpt.set_rng_state(payload["rng"])
    log.info("resumed from %s: epoch %d, batch %d, step %d", tag, payload["epoch"] + 1,
             payload["batch_index"], payload["step"])
    return LearnerState(payload["step"], payload["epoch"], payload["batch_index"], payload["history"])


def average_weights(model, strategy: Strategy) -> Dict[str, torch.Tensor]:
    """The mean of all learners' weights (identical on every learner); a collective call."""
    state = model.state_dict()
    names = [n for n, t in state.items() if t.is_floating_point()]
    if strategy.world_size == 1:
        return {n: t.detach().clone() for n, t in state.items()}
    flat = torch.cat([state[n].detach().reshape(-1).double() for n in names])
    flat = strategy.all_reduce_sum(flat) / strategy.world_size
    out, offset = {}, 0
    for n, t in state.items():
        if n in names:
            out[n] = flat[offset: offset + t.numel()].view_as(t).to(t.dtype).clone()
            offset += t.numel()
        else:
            out[n] = t.clone()
    return out


# ------------------------------------------------------------------------------------------------
# The learner

def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def run(rank: int, world_size: int, job: TrainJob, strategy: Strategy) -> Optional[Path]:
    """Train one learner to the end. Returns the final model path on the main learner."""
    cfg = job.cfg
    seed_everything(cfg.train.seed)  # same initial weights on every learner ...
    tokenizer = None
    if cfg.model.loss == "ctc":
        from asrtrain.text.tokenizer import Tokenizer
        tokenizer = Tokenizer(job.exp_dir / "tokenizer.model")
    alignments = None
    if cfg.model.loss == "ce":
        from asrtrain.train.hybrid import read_alignments
        alignments = read_alignments(job.alignments)
    train_data = AsrDataset(job.train_dir, cfg.model.subsample, tokenizer, alignments)
    dev_data = AsrDataset(job.dev_dir, cfg.model.subsample, tokenizer, alignments) if job.dev_dir else None
    model = build_model(cfg.model)
    optimizer = make_optimizer(model, cfg)
    state = load_checkpoint(model, optimizer, strategy, job) if job.resume else LearnerState()
    if not job.resume or state.step == 0:
        seed_everything(cfg.train.seed + 1000 * rank)  # ... then each learner its own dropout stream
    strategy.setup(model, optimizer)

    part = strategy.partition()
    spec = BatchSpec(cfg.train.max_frames, cfg.train.max_utts, cfg.train.bucket_width, cfg.train.seed,
                     cfg.train.sortagrad)
    too_long = oversized(train_data.lengths, cfg.train.max_frames * part.group_size)
    if too_long and strategy.is_main:
        log.warning("%d utterances exceed train.max_frames and get batches of their own", len(too_long))
    source = batch_source(cfg.train.balance, train_data.lengths, spec, part, rank, cfg.dist.timeout_s)
    steps_per_epoch = source.steps_per_epoch()
    total_steps = steps_per_epoch * cfg.train.epochs
    monitor = Monitor(job.exp_dir, strategy, cfg.train.log_every_steps, total_steps)
    try:
        while state.epoch < cfg.train.epochs:
            t0 = time.time()
            totals = train_one_epoch(model, optimizer, strategy, train_data, source, state, job, total_steps,
                                     monitor)
            strategy.end_epoch(state.epoch)
            dev_loss = compute_validation_loss(model, strategy, dev_data, cfg) if dev_data else float("nan")
            row = {"epoch": state.epoch + 1, "train_loss": totals["train_loss"], "dev_loss": dev_loss,
                   "lr": lr_at(max(0, state.step - 1), cfg.train, total_steps), "seconds": time.time() - t0}
            state.history.append(row)
            monitor.epoch(row)
            state.epoch += 1
            state.batch_index = 0
            save_checkpoint(model, optimizer, strategy, state, job, tag=f"epoch-{state.epoch:04d}",
                            avg_model=average_weights(model, strategy))
    except StopTraining:
        monitor.close()
        strategy.close()
        return None
    final = strategy.finalize(model)
    path = None
    if strategy.is_main:
        path = write_final(job, final)
        monitor.curves(state.history)
    monitor.close()
    strategy.close()
    return path


def write_final(job: TrainJob, model) -> Path:
    """``final.pt``: the average of the last ``train.average_last`` epochs' averaged models."""
    from asrtrain.io import atomic_torch_save
    k = min(job.cfg.train.average_last, len(ckpt.epoch_checkpoints(job.exp_dir)))
    state = ckpt.average_last(job.exp_dir, k) if k > 1 else model.state_dict()
    path = job.exp_dir / "final.pt"
    atomic_torch_save({"model": state, "averaged": k}, path)
    log.info("final model (average of the last %d epoch(s)) -> %s", max(1, k), path)
    return path


def threads_for(cfg: Config, learners_here: int) -> int:
    if cfg.train.threads > 0:
        return cfg.train.threads
    return max(1, (os.cpu_count() or 1) // max(1, learners_here))


__all__ = ["TrainJob", "LearnerState", "run", "compute_loss", "train_one_epoch", "compute_validation_loss",
           "save_checkpoint", "load_checkpoint", "average_weights", "lr_at"]
