"""BLSTM acoustic model: frame stacking and subsampling (or a conv front-end, :mod:`.frontend`),
bidirectional LSTM layers, a CTC or CE head.

Shapes: input ``(N, T, D)`` features, lengths ``(N,)``; output ``(N, T', V)`` log-probabilities with
``T' = ceil(T / subsample)``, lengths ``(N,)``.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from asrtrain.config import ModelConfig


def stack_frames(x: torch.Tensor, lengths: torch.Tensor, stack: int, subsample: int):
    """Stack ``stack`` consecutive frames and keep every ``subsample``-th stacked frame.

    ``x``: (N, T, D) -> (N, ceil(T / subsample), D * stack). The last frames are padded by repeating the
    final frame of each utterance (as Kaldi's splice does at the edges) so no output sees padding.
    """
    n, t, d = x.shape
    if stack == 1 and subsample == 1:
        return x, lengths
    pad = stack - 1
    # Repeat each utterance's last valid frame into the padding region, so stacking at the edge is clean.
    idx = torch.arange(t + pad, device=x.device).unsqueeze(0).expand(n, -1)
    idx = torch.minimum(idx, (lengths - 1).clamp(min=0).unsqueeze(1).to(x.device))
    xp = torch.gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, d))  # (N, T + pad, D)
    frames = xp.unfold(1, stack, 1)[:, :t]  # (N, T, D, stack)
    frames = frames.permute(0, 1, 3, 2).reshape(n, t, d * stack)
    out = frames[:, ::subsample]
    out_lengths = torch.div(lengths + subsample - 1, subsample, rounding_mode="floor")
    return out.contiguous(), out_lengths


def reverse_index(lengths: torch.Tensor, t: int) -> torch.Tensor:
    """(N, T) time indices that reverse each utterance's first ``lengths[n]`` frames and leave its padding
    in place. The map is its own inverse."""
    steps = torch.arange(t, device=lengths.device).unsqueeze(0)
    last = lengths.unsqueeze(1) - 1
    return torch.where(steps <= last, last - steps, steps)


def blstm_padded(layer: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """One bidirectional ``layer`` over the padded batch ``x`` (N, T, D) -> (N, T, 2 x out), equal on the
    valid frames to running it over the packed batch (tested).

    Why: on the CPU torch runs an LSTM over a PackedSequence with its native time loop, but a padded
    batch through oneDNN's fused RNN, 2.3-2.6x faster for the recipes' layers (``scripts/bench_rnn.py``).
    Padding is harmless in the forward direction (it comes after the valid frames); the backward direction
    runs forward over each utterance reversed within its length (padding left at the end), and its output
    is reversed back. Outputs at padded frames are garbage and never read: CTC and CE stop at ``lengths``,
    and the next layer's directions see them only after each utterance's valid frames.
    ``lengths`` (N,) on the device of ``x``."""
    n, t, _ = x.shape
    outputs = []
    for suffix in ("", "_reverse"):
        weights = [getattr(layer, f"{kind}_l0{suffix}") for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        if layer.proj_size > 0:
            weights.append(getattr(layer, f"weight_hr_l0{suffix}"))
        h0 = x.new_zeros(1, n, layer.proj_size or layer.hidden_size)
        c0 = x.new_zeros(1, n, layer.hidden_size)
        if suffix:
            index = reverse_index(lengths, t).unsqueeze(-1)
            x = torch.gather(x, 1, index.expand(-1, -1, x.shape[2]))
        out, _, _ = torch.lstm(x, (h0, c0), weights, True, 1, 0.0, layer.training, False, True)
        if suffix:
            out = torch.gather(out, 1, index.expand(-1, -1, out.shape[2]))
        outputs.append(out)
    return torch.cat(outputs, dim=-1)


def blstm_packed(layer: nn.LSTM, x: torch.Tensor, cpu_lengths: torch.Tensor) -> torch.Tensor:
    """One bidirectional ``layer`` over ``x`` (N, T, D) packed by ``cpu_lengths``: cuDNN's path."""
    packed = pack_padded_sequence(x, cpu_lengths, batch_first=True, enforce_sorted=False)
    out, _ = layer(packed)
    return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]


def padded_path_on_cpu(x: torch.Tensor) -> bool:
    """Whether a CPU layer may take :func:`blstm_padded`: oneDNN's RNN runs fp32 everywhere, bf16 and
    fp16 only where the CPU has them (otherwise it cannot build its primitive); those fall back to the
    packed path, torch's native loop, as before."""
    dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else x.dtype
    if dtype == torch.bfloat16:
        return torch.ops.mkldnn._is_mkldnn_bf16_supported() and _onednn_lstm_runs(dtype)
    if dtype == torch.float16:
        return torch.ops.mkldnn._is_mkldnn_fp16_supported() and _onednn_lstm_runs(dtype)
    return True


@functools.lru_cache(maxsize=None)
def _onednn_lstm_runs(dtype: torch.dtype) -> bool:
    """Whether oneDNN can build its LSTM primitive in ``dtype`` on this CPU: a CPU with AVX512-FP16 makes
    ``_is_mkldnn_fp16_supported()`` true, yet oneDNN may still refuse the fp16 LSTM ("could not create a
    primitive descriptor"), so one tiny forward is tried as the model makes it (fp32 tensors under
    autocast, weights that need gradients), once per process and dtype."""
    try:
        with torch.autocast("cpu", dtype=dtype):
            x = torch.zeros(1, 2, 4)
            h = torch.zeros(1, 1, 3)
            w = [torch.zeros(12, 4, requires_grad=True), torch.zeros(12, 3, requires_grad=True),
                 torch.zeros(12, requires_grad=True), torch.zeros(12, requires_grad=True)]
            torch.lstm(x, (h, h), w, True, 1, 0.0, True, False, True)
    except RuntimeError:
        return False
    return True


def rnn_outside_autocast(x: torch.Tensor) -> bool:
    """True under a bf16 autocast on CUDA: there the LSTMs must run outside autocast, in fp32.

    torch's autocast wrapper for cuDNN RNNs (aten/src/ATen/cudnn/AutocastRNN.cpp) casts input and weights
    to fp16 whatever dtype autocast was asked for, so under bf16 the LSTMs would run in fp16 with no
    gradient scaler (bf16 gets none) and small gradients would underflow unseen. fp16 keeps autocast's
    fp16 LSTMs: its scaler protects them. On the CPU autocast runs the LSTMs in the asked dtype."""
    return (x.is_cuda and torch.is_autocast_enabled("cuda")
            and torch.get_autocast_dtype("cuda") == torch.bfloat16)


class BLSTM(nn.Module):
    """Stacked bidirectional LSTM with optional per-layer projection and a linear output head."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.input_dim <= 0 or cfg.num_targets <= 0:
            raise ValueError("ModelConfig.input_dim and num_targets must be set (from the data)")
        self.cfg = cfg
        self.layers = nn.ModuleList()
        self.frontend = None
        in_dim = cfg.input_dim * cfg.stack
        if cfg.frontend == "conv":
            from asrtrain.model.frontend import ConvFrontend
            self.frontend = ConvFrontend(cfg.input_dim, cfg.conv_channels, cfg.subsample)
            in_dim = self.frontend.out_dim
        out_per_dir = cfg.proj if cfg.proj > 0 else cfg.hidden
        for _ in range(cfg.num_layers):
            self.layers.append(nn.LSTM(in_dim, cfg.hidden, batch_first=True, bidirectional=True,
                                       proj_size=cfg.proj if cfg.proj > 0 else 0))
            in_dim = 2 * out_per_dir
        self.dropout = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(in_dim, cfg.num_targets)
        if cfg.att_weight > 0:  # joint CTC/attention training: an attention decoder beside the CTC head
            from asrtrain.model.attention import AttentionDecoder
            self.decoder = AttentionDecoder(in_dim, cfg.num_targets, cfg.att_dim, cfg.dropout)
        self._init_forget_bias()

    def _init_forget_bias(self) -> None:
        """Forget-gate bias 1 (Gers et al. 2000; Jozefowicz et al. 2015): cells keep their state from the
        start, which shortens CTC's initial all-blank plateau. PyTorch orders gates i, f, g, o."""
        with torch.no_grad():
            for layer in self.layers:
                for name, bias in layer.named_parameters():
                    if name.startswith("bias_ih"):
                        h = bias.shape[0] // 4
                        bias[h:2 * h].fill_(1.0)
                    elif name.startswith("bias_hh"):
                        h = bias.shape[0] // 4
                        bias[h:2 * h].fill_(0.0)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, inter: bool = False, att=None):
        """``x`` (N, T, D), ``lengths`` (N,) -> log-probs (N, T', V), lengths (N,). With ``inter``, also
        the log-probs of the middle layer (after ``num_layers // 2`` layers) through the same head, for
        the intermediate CTC loss (``model.inter_ctc``). With ``att`` (targets (N, S), their lengths), last
        the attention decoder's summed CE of them (``model.att_weight``; inside forward, so DDP sees it)."""
        h, lengths, middle = self.encode(x, lengths, inter)
        out = [self.log_probs(h), lengths]
        if inter:
            out.append(self.log_probs(middle))
        if att is not None:
            out.append(self.decoder(h, lengths, *att))
        return tuple(out)

    def log_probs(self, h: torch.Tensor) -> torch.Tensor:
        """The CTC (or CE) head's log-probabilities (N, T', V) over encoder states ``h`` (N, T', E)."""
        return F.log_softmax(self.head(h), dim=-1)

    def encode(self, x: torch.Tensor, lengths: torch.Tensor, inter: bool = False):
        """The encoder's last states (N, T', 2 x out), their lengths (N,), and with ``inter`` the middle
        layer's states (else None): what the CTC head and the attention decoder read."""
        if self.frontend is not None:
            h, lengths = self.frontend(x, lengths)
        else:
            h, lengths = stack_frames(x, lengths, self.cfg.stack, self.cfg.subsample)
        cpu_lengths = lengths.cpu()
        fp32_rnn = rnn_outside_autocast(h)
        middle = None
        for i, layer in enumerate(self.layers):
            if i == len(self.layers) // 2 and inter:
                middle = h
            if h.is_cuda:
                with torch.autocast("cuda", enabled=False) if fp32_rnn else contextlib.nullcontext():
                    h = blstm_packed(layer, h.float() if fp32_rnn else h, cpu_lengths)
            elif padded_path_on_cpu(h):
                h = blstm_padded(layer, h, cpu_lengths)
            else:
                h = blstm_packed(layer, h, cpu_lengths)
            h = self.dropout(h)
        return h, lengths, middle


def build_model(cfg: ModelConfig) -> BLSTM:
    return BLSTM(cfg)

