"""Differentially private training: DP-SGD on every learner, wrapped around SSGD or ADPSGD.

With ``--dp``, each learner's step replaces the batch gradient by (Abadi et al. 2016)

    g = ( sum_u clip_C(grad loss_u) + N(0, sigma^2 C^2 I) ) / (b * M)

where ``loss_u`` is utterance ``u``'s summed loss, ``clip_C(v) = v * min(1, C / ||v||)`` bounds every
utterance's contribution to norm ``C``, the noise is drawn once per step on the learner's *summed*
clipped gradient, ``b`` is the learner's expected utterances per step and ``M`` the size of its sync
group (SSGD: all learners, so the all-reduced sum is the mean over the global batch; ADPSGD: 1). The
normaliser is a constant, not the batch's own count, so it reveals nothing about the batch.

- ``--strategy adpsgd --dp`` is A(DP)^2SGD (Xu, Zhang, Wang): what a learner sends its neighbours is its
  weights, a post-processing of noisy gradients, so each learner's data is (epsilon, delta)-DP against
  everybody it gossips with.
- ``--strategy ssgd --dp`` is the DP-SSGD baseline: every learner noises its own gradient before the
  all-reduce, so each learner's data is protected from the others by the same accounting.

Accounting (per learner, opacus' RDP accountant): sampling rate ``q = 1 / steps_per_epoch`` (each step
reads one of the learner's batches of the epoch; an utterance is in at most one of them),
``T = steps_per_epoch * epochs`` steps, where ``steps_per_epoch`` is the fewest batches of any epoch for
``q`` and the most for ``T`` (each epoch's shuffle packs batches a little differently; planning on the
first epoch's count let a run spend 8.01 for a target of 8). Under static balance the epoch's global
batches are dealt anew each epoch, so the learners' data mixes across epochs (a one-machine simulation,
not sites). With
``train.balance=dynamic`` balance is private (:class:`asrtrain.train.batching.PrivateBatchSource`): each
learner keeps a fixed shard, takes turns over it as fast as it can, at most ``dp.max_step_share`` times
its share per epoch, and ``q = 1 / batches per pass over the shard``, ``T = that cap * epochs``
(:meth:`DPStrategy.plan`'s ``privacy``). ``sigma`` is either
given (``dp.noise_multiplier``) or computed by opacus for a target ``dp.epsilon`` at ``dp.delta``. The
epsilon spent so far is logged per learner each epoch (``train.log``) and in the metrics (TensorBoard
``train/dp_epsilon``); the accountant's history is in the strategy state, so a resumed run continues it.
Caveats, stated rather than hidden: our batches are shuffled length buckets, not Poisson samples (the
RDP bound assumes Poisson sampling, as opacus does without its Poisson sampler), and the noise comes
from torch's seeded PRNG (reproducible and resumable, not a cryptographic source).

Per-example gradients: one forward/backward per utterance of the batch ("microbatches of 1"). It works
with the packed-sequence cuDNN/MKL BLSTM unchanged; torch.func's vmap has no batching rule for
``aten::lstm`` with packed variable-length input, and opacus' DPLSTM replaces the fused LSTM by a
Python loop over time steps. Cost: docs/results/dp-periodic.md (measured against a normal step).
"""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from asrtrain.config import DPConfig
from asrtrain.distributed.base import Partition, Strategy
from asrtrain.distributed.collective import all_reduce_grads
from asrtrain.errors import AsrError

log = logging.getLogger("asrtrain.train")

DP_STRATEGIES = ("single", "ssgd", "adpsgd")


def check_dp(dp: DPConfig, strategy: str) -> None:
    """Refuse, in one line, DP settings that give no guarantee or that we do not support."""
    dp.validate()
    if strategy not in DP_STRATEGIES:
        raise AsrError(f"--dp is not supported with --strategy {strategy}",
                       fix=f"use --strategy {' or '.join(DP_STRATEGIES[1:])} with --dp")


def noise_multiplier_for(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """sigma such that ``steps`` Poisson-subsampled Gaussian steps at ``sample_rate`` are
    (epsilon, delta)-DP."""
    from opacus.accountants.utils import get_noise_multiplier
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "optimal order is the largest alpha": the bound is still valid
        try:
            return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta,
                                              sample_rate=sample_rate, steps=steps, accountant="rdp",
                                              epsilon_tolerance=0.005))
        except ValueError as err:  # opacus: "The privacy budget is too low." (no noise reaches it)
            raise AsrError(f"dp.epsilon = {epsilon} at dp.delta = {delta} cannot be reached by any noise "
                           f"over {steps} steps at sample rate {sample_rate:.3g} (opacus: {err})",
                           fix="raise dp.epsilon (or dp.delta), train fewer steps, or give "
                               "dp.noise_multiplier instead") from None


def epsilon_spent(history: List[Tuple[float, float, int]], delta: float) -> float:
    """epsilon of the steps in ``history`` ((sigma, q, steps) runs, opacus' format) at ``delta``."""
    if not history:
        return 0.0
    from opacus.accountants import RDPAccountant
    acc = RDPAccountant()
    acc.history = [tuple(h) for h in history]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(acc.get_epsilon(delta))


def clip_factor(norm: torch.Tensor, clip: float) -> torch.Tensor:
    """min(1, C / ||g||): the scale that bounds one example's gradient to norm C."""
    return (clip / (norm + 1e-6)).clamp(max=1.0)


class DPStrategy(Strategy):
    """Per-example clipping, Gaussian noise and RDP accounting around another strategy (``inner``),
    which does all the communication.

    Args:
        inner: the SSGD / ADPSGD / single strategy.
        cfg: the ``dp`` section.
        seed: the job's seed; the noise of step ``k`` on learner ``r`` is drawn from (seed, r, k).
    """

    def __init__(self, inner: Strategy, cfg: DPConfig, seed: int = 1):
        check_dp(cfg, inner.name)
        super().__init__(inner.rank, inner.world_size)
        self.inner, self.cfg, self.seed = inner, cfg, seed
        self.name = f"{inner.name}+dp"
        self.sigma = cfg.noise_multiplier
        self.sample_rate = 0.0
        self.normaliser = 0.0
        self.steps = 0
        self.planned_steps = 0
        self.history: List[Tuple[float, float, int]] = []
        self._clipped = [0.0, 0.0]  # examples clipped, examples seen (for the metrics)

    # -- schedule ----------------------------------------------------------------------------------
    def plan(self, steps_per_epoch: int, epochs: int, examples: int,
             privacy: Optional[Callable[[], Tuple[int, int]]] = None) -> None:
        """Sampling rate, normaliser and (for a target epsilon) sigma for this learner's run.

        ``privacy``: a function giving (batches in one pass over the learner's data, the most steps it may take in an
        epoch), from the batch source; by default both are ``steps_per_epoch`` (static balance). Under
        private dynamic balance a fast learner may take more steps than its share, and sigma is
        computed for the most it may take."""
        self.inner.plan(steps_per_epoch, epochs, examples)
        n = examples / self.world_size  # every partition gives a learner ~1/N of the utterances
        if self.cfg.delta >= 1.0 / max(1.0, n):
            raise AsrError(f"dp.delta = {self.cfg.delta:g} >= 1/n for n = {n:.0f} utterances per learner: "
                           "no meaningful guarantee", fix=f"set dp.delta below {1.0 / max(1.0, n):.2g}")
        per_pass, most = privacy() if privacy is not None else (steps_per_epoch, steps_per_epoch)
        per_pass, most = max(1, per_pass), max(1, most)
        self.sample_rate = 1.0 / per_pass
        self.normaliser = n / per_pass * self.inner.partition().group_size
        self.planned_steps = most * epochs
        if self.cfg.epsilon > 0 and not self.history:
            self.sigma = noise_multiplier_for(self.cfg.epsilon, self.cfg.delta, self.sample_rate,
                                              self.planned_steps)
        if self.is_main:
            log.info("dp: clip %g, sigma %.4f, sampling rate %.4g, at most %d steps, delta %g%s", self.cfg.clip,
                     self.sigma, self.sample_rate, self.planned_steps, self.cfg.delta,
                     f", target epsilon {self.cfg.epsilon:g}" if self.cfg.epsilon > 0 else "")
            per_step, run = self.noise_to_signal()
            model = getattr(self, "model", None)
            d = sum(p.numel() for p in model.parameters() if p.requires_grad) if model is not None else 0
            log.info("dp: the noise's norm is %.3g x the largest clipped mean gradient each step (%d parameters, "
                     "%.3g utterances per step and learner); over %d steps %.3g", per_step, d,
                     self.normaliser / self.inner.partition().group_size, self.planned_steps, run)
            if run > 1.0:
                log.warning("dp: the noise dominates (%.3g > 1 over the run): expect the model to learn little; "
                            "more utterances per step (train.max_frames), more data per learner, fewer "
                            "parameters or a larger dp.epsilon lower it", run)

    def noise_to_signal(self) -> Tuple[float, float]:
        """(per step, over the run): the expected norm of the noise in one step's update of the learners'
        average, sigma C sqrt(d W) / (b W) for d trainable parameters, W learners and b utterances per
        learner and step (SSGD all-reduces the W noisy sums; ADPSGD's gossip averages the learners' noisy
        steps into the consensus model), over the largest norm the mean of clipped gradients can have (C);
        and that ratio over sqrt(T) for the planned T steps: the noise's random walk against a drift that
        always points the same way. A run-level figure above 1 means the noise outweighs even the most
        consistent gradient; in practice learning needs it well below 1 (a heuristic, not a guarantee
        either way)."""
        model = getattr(self, "model", None)
        if model is None or self.normaliser <= 0:
            return 0.0, 0.0
        d = sum(p.numel() for p in model.parameters() if p.requires_grad)
        w = max(1, self.world_size)
        b = self.normaliser / self.inner.partition().group_size
        per_step = self.sigma * math.sqrt(d * w) / (b * w)
        return per_step, per_step / math.sqrt(max(1, self.planned_steps))

    # -- one step ----------------------------------------------------------------------------------
    def compute_gradients(self, net: torch.nn.Module, batch: Any,
                          loss_fn: Callable[[torch.nn.Module, Any], Tuple[torch.Tensor, int]], count: int,
                          scale: Optional[Callable[[torch.Tensor], torch.Tensor]] = None
                          ) -> Tuple[torch.Tensor, int]:
        """``.grad`` <- (sum of clipped per-utterance gradients + noise) / normaliser (times the fp16
        scaler's scale when ``scale`` is given, which the loop divides out again). ``net`` is
        :meth:`wrap`'s: the bare model, so no DDP hook fires on the per-utterance passes."""
        if self.normaliser <= 0:
            raise AsrError("DPStrategy.plan was not called before the first step")
        params = [p for p in net.parameters() if p.requires_grad]
        acc = [torch.zeros_like(p) for p in params]
        # Sums stay on the device: no host sync per utterance (the loop reads the loss once per step).
        loss_sum = torch.zeros((), dtype=torch.float64, device=params[0].device)
        clipped = torch.zeros((), device=params[0].device)
        count = seen = 0
        # Under fp16 each utterance's backward runs on its loss per token times the scaler's scale, the
        # magnitude of the non-private path's scaled backward (summed loss / count x scale), and the factor
        # is divided out again: fp16 activations' gradients that would underflow unscaled survive. An
        # overflow makes that utterance's norm inf, the sum NaN and the step non-finite: the scaler skips
        # it and lowers its scale (the accountant still counts the step: safe, if wasteful).
        s = None if scale is None else float(scale(torch.ones((), device=params[0].device)))
        for ex in batch.examples():
            loss, c = loss_fn(net, ex)
            k = None if s is None else s / max(1, c)
            grads = torch.autograd.grad(loss if k is None else loss * k, params, allow_unused=True)
            grads = [torch.zeros_like(p) if g is None else g if k is None else g / k for p, g in zip(params, grads)]
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
            factor = clip_factor(norm, self.cfg.clip)
            clipped += factor < 1.0
            for a, g in zip(acc, grads):
                a.add_(g * factor)
            loss_sum += loss.detach().double()
            count += c
            seen += 1
        self._clipped[0] += clipped
        self._clipped[1] += seen
        self.add_noise(acc, self.steps)
        for p, a in zip(params, acc):
            a.div_(self.normaliser)
            p.grad = scale(a) if scale is not None else a
        return loss_sum, count

    def add_noise(self, grads: List[torch.Tensor], step: int) -> None:
        """grads += N(0, (sigma C)^2), drawn from (seed, rank, step) so a resumed run draws the same."""
        gen = torch.Generator().manual_seed((self.seed * 1_000_003 + self.rank) * 1_000_033 + step)
        std = self.sigma * self.cfg.clip
        for g in grads:
            g.add_(torch.randn(g.shape, generator=gen, dtype=g.dtype).to(g.device), alpha=std)

    def apply_step(self, optimizer: torch.optim.Optimizer) -> None:
        self.inner.apply_step(optimizer)
        self.steps += 1
        if self.history and self.history[-1][:2] == (self.sigma, self.sample_rate):
            self.history[-1] = (self.sigma, self.sample_rate, self.history[-1][2] + 1)
        else:
            self.history.append((self.sigma, self.sample_rate, 1))

    def epsilon(self) -> float:
        return epsilon_spent(self.history, self.cfg.delta)

    # -- everything else is the inner strategy's ---------------------------------------------------
    def partition(self) -> Partition:
        return self.inner.partition()

    def shares_gradients(self) -> bool:
        return self.inner.shares_gradients()

    def setup(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        super().setup(model, optimizer)
        self.inner.setup(model, optimizer)

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The bare model, never the inner strategy's DDP: per-utterance passes must not trigger its
        all-reduce; :meth:`reduce_gradients` sums the noisy gradients of a sync group instead."""
        return model

    def global_count(self, local_count: float) -> float:
        return self.inner.global_count(local_count)

    def before_step(self, step: int) -> None:
        self.inner.before_step(step)

    def reduce_gradients(self) -> None:
        """The inner strategy's timing (and injected slowdown), then, in a sync group (SSGD), the SUM of
        the members' noisy gradients: one flat all-reduce, as DDP would have done in the backward."""
        self.inner.reduce_gradients()
        if self.inner.partition().group_size > 1:
            all_reduce_grads([p for p in self.model.parameters() if p.requires_grad],
                             getattr(self.inner, "group", None))

    def after_step(self, step: int) -> None:
        self.inner.after_step(step)

    def all_reduce_sum(self, values: torch.Tensor) -> torch.Tensor:
        return self.inner.all_reduce_sum(values)

    def barrier(self) -> None:
        self.inner.barrier()

    def settle(self) -> None:
        self.inner.settle()

    def end_epoch(self, epoch: int) -> None:
        self.inner.end_epoch(epoch)
        log.info("[learner %d] epoch %d dp: epsilon %.4g spent at delta %g (sigma %.4g, q %.4g, %d steps)",
                 self.rank, epoch + 1, self.epsilon(), self.cfg.delta, self.sigma, self.sample_rate,
                 self.steps)

    def finalize(self, model: torch.nn.Module) -> torch.nn.Module:
        return self.inner.finalize(model)

    def close(self) -> None:
        self.inner.close()

    def state_dict(self) -> Dict[str, Any]:
        return {"inner": self.inner.state_dict(),
                "dp": {"history": list(self.history), "steps": self.steps, "sigma": self.sigma}}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.inner.load_state_dict(state.get("inner", {}))
        dp = state.get("dp", {})
        self.history = [tuple(h) for h in dp.get("history", [])]
        self.steps = int(dp.get("steps", 0))
        if dp.get("sigma"):
            self.sigma = float(dp["sigma"])

    def metrics(self) -> Dict[str, float]:
        out = dict(self.inner.metrics())
        out["dp_epsilon"] = self.epsilon()
        if self._clipped[1]:
            out["dp_clipped_frac"] = float(self._clipped[0]) / self._clipped[1]
        self._clipped = [0.0, 0.0]
        return out


__all__ = ["DPStrategy", "check_dp", "noise_multiplier_for", "epsilon_spent", "clip_factor"]
