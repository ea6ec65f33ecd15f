"""One learner's training loop: epochs of length-bucketed batches, lr_at(step), clipping, validation,
atomic checkpoints and exact resume (:mod:`asrtrain.train.resume`). Distributed behaviour lives entirely
in the Strategy object.

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
import math
import random
import time
from pathlib import Path
from typing import Dict, Optional

import numpy as np
import torch
import torch.nn.functional as F

from asrtrain.config import Config
from asrtrain.device import ScaledStep, autocast, check_precision, env_int, make_scaler, resolve_device
from asrtrain.limits import usable_cores
from asrtrain.distributed.base import Strategy
from asrtrain.distributed.runtime.beacon import note_progress
from asrtrain.errors import AsrError
from asrtrain.model.blstm import build_model
from asrtrain.model.rnn_stack import check_rnn_bf16
from asrtrain.model.stamp import STAMP_KEY, config_stamp
from asrtrain.train import checkpoint as ckpt
from asrtrain.train.batching import BatchSource, BatchSpec, batch_source, oversized
from asrtrain.features.dataset import AsrDataset, Batch, prefetch, stop_prefetch
from asrtrain.train.lr import lr_at, schedule_change
from asrtrain.train.resume import average_weights, check_resumed_together, load_checkpoint, save_checkpoint
from asrtrain.train.state import Learner, LearnerState, TrainJob
from asrtrain.train.monitor import Monitor
from asrtrain.train.specaug import spec_augment

log = logging.getLogger("asrtrain.train")


# ------------------------------------------------------------------------------------------------
# Pieces of one step

def batch_count(batch: Batch, loss_kind: str) -> int:
    """What the loss of ``batch`` is normalised by, known on the host before the forward pass: its
    tokens (CTC) or its labelled output frames (CE)."""
    if loss_kind == "ctc":
        return int(batch.target_lens.sum())
    return int((batch.targets >= 0).sum())


def compute_loss(net: torch.nn.Module, batch: Batch, loss_kind: str, precision: str = "fp32",
                 model_cfg=None):
    """Summed loss of a batch (a float32 scalar) and its count (tokens for CTC, output frames for CE).

    The sum, not the mean, comes back: the caller divides by the *global* count over all learners,
    so that N learners' summed gradients equal one learner's gradient on the union of their batches.
    The forward pass runs under autocast (``precision`` bf16/fp16); the loss is computed in float32 from
    float32 log-probabilities. A learner whose slice of a batch is empty runs a zero-weighted forward of
    a one-frame dummy, so every parameter gets its (zero) gradient and the group's all-reduce matches.
    """
    device = next(net.parameters()).device
    cfg = model_cfg if model_cfg is not None else net.cfg  # ``net`` may be DDP around the model: pass its cfg
    inter_w = cfg.inter_ctc if net.training else 0.0
    att_w = cfg.att_weight if net.training and loss_kind == "ctc" else 0.0
    if len(batch.utts) == 0:
        none = (torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long))  # just the end token
        with autocast(device, precision):
            out = net(torch.zeros(1, 1, cfg.input_dim, device=device), torch.ones(1, dtype=torch.long),
                      att=none if att_w > 0 else None)
        return sum(o.float().sum() for o in out if o.is_floating_point()) * 0.0, 0
    with autocast(device, precision):
        out = list(net(batch.feats, batch.feat_lens, inter=inter_w > 0,
                       att=(batch.targets, batch.target_lens) if att_w > 0 else None))
    att_ce = out.pop() if att_w > 0 else None
    inter_log_probs = out.pop() if inter_w > 0 else None
    log_probs, out_lens = out
    log_probs = log_probs.float()
    if loss_kind == "ctc":
        targets = batch.targets.clamp(min=0)

        def ctc(lp: torch.Tensor) -> torch.Tensor:
            return F.ctc_loss(lp.float().transpose(0, 1), targets, out_lens, batch.target_lens, blank=0,
                              reduction="sum", zero_infinity=True)
        loss = ctc(log_probs)
        if inter_w > 0:  # training only: the dev loss stays the last layer's, comparable across runs
            loss = (1.0 - inter_w) * loss + inter_w * ctc(inter_log_probs)
        if att_w > 0:  # the same: training only
            loss = (1.0 - att_w) * loss + att_w * att_ce.float()
    else:
        t = min(log_probs.shape[1], batch.targets.shape[1])
        loss = F.nll_loss(log_probs[:, :t].reshape(-1, log_probs.shape[-1]),
                          batch.targets[:, :t].reshape(-1), ignore_index=-1, reduction="sum")
    return loss, batch_count(batch, loss_kind)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def make_optimizer(model: torch.nn.Module, cfg: Config) -> torch.optim.Optimizer:
    """SGD or Adam, fused (one kernel over all parameters) where torch has it for the parameters' device:
    the same update to rounding (3e-8 after 50 steps), and on a CPU Adam's step is ~12x faster than the
    per-tensor loop torch picks by default there (6.4 vs 75 ms for the 4.5 M-parameter recipe model)."""
    t = cfg.train
    params = list(model.parameters())
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
    if t.optimizer == "sgd":
        return torch.optim.SGD(params, lr=t.lr, momentum=t.momentum, weight_decay=t.weight_decay,
                               fused=fused or None)
    return torch.optim.Adam(params, lr=t.lr, weight_decay=t.weight_decay, fused=fused or None)


def train_one_epoch(learner: Learner, strategy: Strategy, data: AsrDataset, source: BatchSource,
                    state: LearnerState, job: TrainJob, total_steps: int, monitor: Monitor
                    ) -> Dict[str, float]:
    """Train on this learner's batches of ``state.epoch`` from ``state.batch_index``; returns totals over
    the whole epoch: the running sum and count start from ``state``'s (a mid-epoch resume's batches
    before the checkpoint count too) and are kept there, for the step checkpoints."""
    cfg = job.cfg
    model, optimizer = learner.model, learner.optimizer
    model.train()
    gen = torch.Generator()
    todo = source.batches(state.epoch, state.batch_index)
    for batch in prefetch(data, todo, source.prefetch_depth, device=learner.device):
        lr = lr_at(source.schedule_step(state.step), cfg.train, total_steps)
        set_lr(optimizer, lr)
        strategy.before_step(state.step)
        count_here = batch_count(batch, cfg.model.loss)  # from the host batch: no wait on the copy below
        batch = batch.to(learner.device)
        gen.manual_seed(cfg.train.seed * 7919 + state.step * 31 + strategy.rank)
        feats = spec_augment(batch.feats, batch.feat_lens, cfg.specaug, gen)
        t0 = time.perf_counter()
        loss, count = strategy.compute_gradients(
            learner.net, Batch(batch.utts, feats, batch.feat_lens, batch.targets, batch.target_lens),
            lambda net, b: compute_loss(net, b, cfg.model.loss, learner.precision, cfg.model),
            count_here, learner.scaler.scale if learner.scaler is not None else None)
        strategy.reduce_gradients()
        loss_value = step_or_skip(learner, strategy, loss, cfg.train, state.step)
        strategy.after_step(state.step)
        compute_s = time.perf_counter() - t0
        note_progress()
        state.step += 1
        state.batch_index += 1
        if loss_value is not None:
            state.epoch_loss_sum += loss_value
            state.epoch_count += count
        monitor.step(state, (loss_value or 0.0) / max(1, count), lr, batch.num_frames, compute_s,
                     strategy.metrics)
        if cfg.train.checkpoint_every_steps and state.step % cfg.train.checkpoint_every_steps == 0 \
                and source.remaining(state.epoch, state.batch_index):
            save_checkpoint(learner, strategy, state, job, tag=f"step-{state.step:08d}")
        # The job's progress in static steps (a learner's own count under dynamic balance differs)
        if job.stop_after_steps and source.schedule_step(state.step) >= job.stop_after_steps:
            raise StopTraining(state.step)
    return {"train_loss": state.epoch_loss_sum / max(1, state.epoch_count), "train_count": state.epoch_count}


def step_or_skip(learner: Learner, strategy: Strategy, loss: torch.Tensor, t, step: int) -> Optional[float]:
    """Clip and take the optimizer step, unless the loss or the (all-reduced) gradients are not finite.

    Non-finite numbers are caught where they enter the weights: such a step is skipped with a warning
    and counted (in a sync group every member sees the same reduced gradients, so all skip together,
    and a member's own non-finite loss does not make it skip alone;
    under fp16 the gradient scaler skips overflowed steps itself and lowers its scale).
    ``train.max_bad_steps`` skipped steps in a row stop training with an error. Returns the batch's
    summed loss, or None when the step was skipped. (One host sync per step: the loss and the norm.)
    """
    params = [p for p in learner.model.parameters() if p.grad is not None]
    if learner.scaler is not None:
        learner.scaler.unscale_(learner.optimizer)
    grads = [p.grad for p in params]
    norm = torch.nn.utils.get_total_norm(grads)
    loss_value, norm_value = torch.stack([loss.detach().float(), norm.detach().float().to(loss.device)]).tolist()
    loss_ok = math.isfinite(loss_value)
    # A sync group's members step together or not at all, so there the all-reduced norm alone decides:
    # were one member's own loss to decide, it would skip while the others step, and the replicas part.
    finite = math.isfinite(norm_value) and (loss_ok or strategy.shares_gradients())
    if finite and t.grad_clip > 0:
        clip_coef = t.grad_clip / (norm_value + 1e-6)  # torch's clip_grad_norm_ coefficient, clamped at 1
        if clip_coef < 1.0:
            # Scaled only when the norm exceeds the bound: clip_grad_norm_ multiplies every gradient by
            # the clamped coefficient on every step (3.5 ms of a 115 ms step on 2 CPU threads, for x1.0
            # on most steps). Same update; the norm is on the host already, for the finiteness check.
            torch.nn.utils.clip_grads_with_norm_(params, t.grad_clip, norm)
    learner.stepper.skip = not finite and learner.scaler is None
    strategy.apply_step(learner.stepper)
    if finite:
        learner.bad_steps = 0
        if not loss_ok:
            log.warning("learner %d step %d: loss is %s here but the group's gradients are finite: the step "
                        "is taken with the group, the loss not counted", strategy.rank, step, loss_value)
            return None
        return loss_value
    learner.bad_steps += 1
    what = "loss" if not math.isfinite(loss_value) else "gradient norm"
    if learner.scaler is None or not math.isfinite(loss_value):
        log.warning("learner %d step %d: %s is %s; step skipped (%d in a row)", strategy.rank, step, what,
                    loss_value if what == "loss" else norm_value, learner.bad_steps)
    if learner.bad_steps >= t.max_bad_steps:
        raise AsrError(f"{learner.bad_steps} steps in a row had a non-finite {what} (learner {strategy.rank}, "
                       f"step {step}); training stopped, none of those steps was applied",
                       fix="lower train.lr, check the features for NaN/Inf, or use train.precision=fp32")
    return None


class StopTraining(Exception):
    """Raised by ``stop_after_steps`` to end a run abruptly (tests of resume)."""


@torch.no_grad()
def compute_validation_loss(learner: Learner, strategy: Strategy, data: AsrDataset, cfg: Config) -> float:
    """Loss per token (CTC) or frame (CE) on the dev set, summed over all learners' shards (the
    learner's own weights; the plain module, not DDP: shards differ in size and need no sync)."""
    model = learner.model
    model.eval()
    utts = sorted(data.lengths)[strategy.rank::strategy.world_size]
    spec = BatchSpec(cfg.train.max_frames, cfg.train.max_utts, cfg.train.bucket_width, 0)
    from asrtrain.train.batching import make_batches
    loss_sum = torch.zeros((), dtype=torch.float64, device=learner.device)
    count = 0
    for batch in prefetch(data, make_batches({u: data.lengths[u] for u in utts}, spec, 0),
                          device=learner.device):
        loss, n = compute_loss(model, batch.to(learner.device), cfg.model.loss, learner.precision)
        loss_sum += loss.double()
        count += n
        note_progress()
    totals = strategy.all_reduce_sum(torch.tensor([float(loss_sum), float(count)], dtype=torch.float64))
    model.train()
    return float(totals[0] / max(1.0, float(totals[1])))


# ------------------------------------------------------------------------------------------------
# The learner

def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


def run(rank: int, world_size: int, job: TrainJob, strategy: Strategy) -> Optional[Path]:
    """Train one learner to the end. Returns the final model path on the main learner."""
    cfg = job.cfg
    device = resolve_device(cfg.train.device)
    check_precision(cfg.train.precision, device)
    check_rnn_bf16(cfg.model.rnn_bf16, cfg.train.precision, device)
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
    model = build_model(cfg.model).to(device)  # before the optimizer: its state lives on the device too
    optimizer = make_optimizer(model, cfg)
    learner = Learner(model, model, optimizer, ScaledStep(optimizer, make_scaler(cfg.train.precision, device)),
                      device, cfg.train.precision)
    if strategy.is_main:
        log.info("learner device %s, precision %s, %d parameters", device, cfg.train.precision,
                 sum(p.numel() for p in model.parameters()))
    if strategy.is_main and job.resume and (removed := ckpt.clean_stale(job.exp_dir)):
        log.info("removed %d unfinished checkpoint write(s) left by a killed run", removed)
    state = load_checkpoint(learner, strategy, job) if job.resume else LearnerState()
    if not job.resume or state.step == 0:
        seed_everything(cfg.train.seed + 1000 * rank)  # ... then each learner its own dropout stream
    strategy.setup(model, optimizer)
    if job.resume:
        check_resumed_together(strategy, state, job.exp_dir)
    learner.net = strategy.wrap(model)

    part = strategy.partition()
    spec = BatchSpec(cfg.train.max_frames, cfg.train.max_utts, cfg.train.bucket_width, cfg.train.seed,
                     cfg.train.sortagrad)
    too_long = oversized(train_data.lengths, cfg.train.max_frames * part.group_size)
    if too_long and strategy.is_main:
        log.warning("%d utterances exceed train.max_frames and get batches of their own", len(too_long))
    source = batch_source(cfg.train.balance, train_data.lengths, spec, part, rank, cfg.dist.timeout_s,
                          private=cfg.dp.enabled, max_share=cfg.dp.max_step_share)
    steps_per_epoch = source.steps_per_epoch()
    strategy.plan(steps_per_epoch, cfg.train.epochs, len(train_data.lengths),
                  privacy=lambda: source.privacy_steps(cfg.train.epochs))
    total_steps = steps_per_epoch * cfg.train.epochs
    if job.extended_from and strategy.is_main:
        note = schedule_change(cfg.train, source.schedule_step(state.step),
                               steps_per_epoch * job.extended_from, total_steps)
        if note:
            log.warning("%s", note)
    monitor = Monitor(job.exp_dir, strategy, cfg.train.log_every_steps, total_steps)
    # started here, right before the try whose finally closes it, so no way out leaves its thread behind
    learner.writer = ckpt.AsyncWriter() if world_size == 1 else None
    try:
        while state.epoch < cfg.train.epochs:
            t0 = time.time()
            totals = train_one_epoch(learner, strategy, train_data, source, state, job, total_steps, monitor)
            strategy.end_epoch(state.epoch)
            dev_loss = compute_validation_loss(learner, strategy, dev_data, cfg) if dev_data else float("nan")
            row = {"epoch": state.epoch + 1, "train_loss": totals["train_loss"], "dev_loss": dev_loss,
                   "lr": lr_at(max(0, state.step - 1), cfg.train, total_steps), "seconds": time.time() - t0}
            state.history.append(row)
            monitor.epoch(row)
            state.epoch += 1
            state.batch_index = 0
            state.epoch_loss_sum, state.epoch_count = 0.0, 0
            save_checkpoint(learner, strategy, state, job, tag=f"epoch-{state.epoch:04d}",
                            avg_model=average_weights(model, strategy))
        if learner.writer is not None:
            if strategy.is_main:
                monitor.curves(state.history)  # drawn while the last checkpoint is being written
            learner.writer.wait()  # before final.pt, which averages the epoch checkpoints
    except StopTraining:
        if learner.writer is not None:
            learner.writer.wait()
        monitor.close()
        strategy.close()
        return None
    except BaseException:
        # Ctrl-C or an error: no thread of this run may outlive it (prefetch collating in native code, the
        # TensorBoard writer's) -- one still running at interpreter exit can crash it.
        stop_prefetch()
        monitor.close()
        raise
    finally:
        if learner.writer is not None:
            learner.writer.close()  # a failed run still leaves its last checkpoint whole on disk
    final = strategy.finalize(model)
    path = None
    if strategy.is_main:
        path = write_final(job, final)
        if learner.writer is None:
            monitor.curves(state.history)
    monitor.close()
    strategy.close()
    return path


def write_final(job: TrainJob, model) -> Path:
    """``final.pt``: the average of the last ``train.average_last`` epochs' averaged models."""
    k = min(job.cfg.train.average_last, len(ckpt.epoch_checkpoints(job.exp_dir)))
    state = ckpt.average_last(job.exp_dir, k) if k > 1 else {n: t.to("cpu") for n, t in model.state_dict().items()}
    bad = [n for n, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise AsrError(f"the final model has non-finite weights ({', '.join(bad[:3])}); final.pt not written",
                       job.exp_dir / "checkpoints",
                       fix="train again with a lower train.lr: add --restart --set train.lr=... (--resume keeps "
                           "the run's config, lr included)")
    path = job.exp_dir / "final.pt"
    done = ckpt.epoch_checkpoints(job.exp_dir)
    epochs = ckpt.epoch_of(done[-1]) if done else job.cfg.train.epochs  # what ran (pack's card reads it)
    ckpt.save_checked({"model": state, "averaged": k, "epochs": epochs,
                       STAMP_KEY: config_stamp(job.cfg)}, path)
    log.info("final model (average of the last %d epoch(s)) -> %s", max(1, k), path)
    return path


def threads_for(cfg: Config, learners_here: int) -> int:
    """Torch intra-op threads per learner: ``train.threads``, else the cores shared by the learners on
    this node (under torchrun/srun LOCAL_WORLD_SIZE of them, not ``dist.learners``)."""
    if cfg.train.threads > 0:
        from asrtrain.limits import check_threads
        return check_threads(cfg.train.threads, "train.threads")
    local = env_int("LOCAL_WORLD_SIZE", 0)
    return max(1, usable_cores() // max(1, local or learners_here))


__all__ = ["TrainJob", "LearnerState", "Learner", "run", "compute_loss", "batch_count", "train_one_epoch", "compute_validation_loss",
           "save_checkpoint", "load_checkpoint", "average_weights", "lr_at"]
