"""The work of one training step of the BLSTM, counted from its shapes: floating-point operations per output
(subsampled) frame, forward and backward, split into what batches over time and what is sequential.

Counted: every matrix product (a multiply-add is 2 FLOPs) of the front-end's convolutions, the LSTM layers
(input projection, recurrence, the optional projection) and the output head; not counted: elementwise work
(gates, dropout, log-softmax, the CTC loss) and the attention decoder (``model.att_weight``), whose work
depends on the transcripts. Backward is twice the forward (gradients of inputs and of weights), except the
product that reads the features, which needs no input gradient: once.

Sequential: the recurrent products, which run one time step after another in the forward pass and again in
the backward's gradient of the previous state; the recurrent weights' gradient batches over time (one
product over all steps) and counts as batched, as do the input projections, the projection and the head.
"""

from __future__ import annotations

from dataclasses import dataclass

from asrtrain.config import ModelConfig


@dataclass(frozen=True)
class StepFlops:
    """FLOPs per output frame of one training step (forward + backward)."""
    batched: float  # products over all frames at once: input projections, head, conv, weight gradients
    sequential: float  # recurrent products one step at a time: forward, and backward's state gradient

    @property
    def total(self) -> float:
        return self.batched + self.sequential


def train_flops_per_frame(cfg: ModelConfig) -> StepFlops:
    """Forward + backward FLOPs per output frame of ``cfg``'s encoder and head (``input_dim`` and
    ``num_targets`` must be set)."""
    if cfg.input_dim <= 0 or cfg.num_targets <= 0:
        raise ValueError("ModelConfig.input_dim and num_targets must be set to count FLOPs")
    batched = 0.0
    first_product_done = False
    if cfg.frontend == "conv":
        from asrtrain.model.frontend import conv_out_bins
        c = cfg.conv_channels
        f1 = (cfg.input_dim - 3) // 2 + 1
        conv1 = 2 * 9 * c * f1 * cfg.subsample  # per input frame, subsample input frames per output frame
        conv2 = 2 * 9 * c * c * conv_out_bins(cfg.input_dim)
        batched += 2 * conv1 + 3 * conv2  # conv1 reads the features: no input gradient
        in_dim = c * conv_out_bins(cfg.input_dim)
        first_product_done = True
    else:
        in_dim = cfg.input_dim * cfg.stack
    hidden, out = cfg.hidden, (cfg.proj if cfg.proj > 0 else cfg.hidden)
    sequential = 0.0
    for _ in range(cfg.num_layers):
        for _direction in range(2):
            inp = 2 * in_dim * 4 * hidden
            batched += (3 if first_product_done else 2) * inp
            rec = 2 * out * 4 * hidden
            sequential += 2 * rec  # forward, and the state gradient step by step
            batched += rec  # the recurrent weights' gradient, over all steps at once
            if cfg.proj > 0:
                batched += 3 * 2 * hidden * cfg.proj
        first_product_done = True
        in_dim = 2 * out
    batched += 3 * 2 * in_dim * cfg.num_targets
    return StepFlops(batched=float(batched), sequential=float(sequential))


def train_flops(cfg: ModelConfig, output_frames: int) -> float:
    """FLOPs of one training pass (forward + backward) over ``output_frames`` valid output frames (the sum
    over the batch of ``ceil(length / subsample)``; padded frames are not counted as work)."""
    return train_flops_per_frame(cfg).total * output_frames


def flops_per_audio_second(cfg: ModelConfig, frame_shift_ms: float = 10.0) -> float:
    """Training FLOPs per second of audio: ``1000 / frame_shift_ms / subsample`` output frames a second."""
    return train_flops_per_frame(cfg).total * 1000.0 / frame_shift_ms / cfg.subsample
