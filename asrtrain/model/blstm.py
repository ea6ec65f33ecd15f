"""BLSTM acoustic model: frame stacking and subsampling (or a conv front-end, :mod:`.frontend`),
bidirectional LSTM layers, a CTC or CE head.

Shapes: input ``(N, T, D)`` features, lengths ``(N,)``; output ``(N, T', V)`` log-probabilities with
``T' = ceil(T / subsample)``, lengths ``(N,)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from asrtrain.config import ModelConfig
from asrtrain.model.rnn_stack import run_stack


def stack_frames(x: torch.Tensor, lengths: torch.Tensor, stack: int, subsample: int):
    """Stack ``stack`` consecutive frames and keep every ``subsample``-th stacked frame.

    ``x``: (N, T, D) -> (N, ceil(T / subsample), D * stack): output frame ``j`` is input frames
    ``j * subsample ... j * subsample + stack - 1`` side by side. Frames past each utterance's end are its
    final frame repeated (as Kaldi's splice does at the edges), so no output sees padding. One gather of
    the kept rows' frames (no ``unfold``: this form exports to ONNX with a dynamic time axis).
    """
    n, t, d = x.shape
    if stack == 1 and subsample == 1:
        return x, lengths
    starts = torch.arange(0, t, subsample, device=x.device)  # (T',)
    idx = (starts.unsqueeze(1) + torch.arange(stack, device=x.device).unsqueeze(0)).reshape(1, -1)  # (1, T' x stack)
    idx = torch.minimum(idx, (lengths - 1).clamp(min=0).unsqueeze(1).to(x.device))  # (N, T' x stack)
    frames = torch.gather(x, 1, idx.unsqueeze(-1).expand(-1, -1, d))  # (N, T' x stack, D)
    out = frames.reshape(n, starts.shape[0], stack * d)
    out_lengths = torch.div(lengths + subsample - 1, subsample, rounding_mode="floor")
    return out, out_lengths


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
        h, middle = run_stack(self.layers, self.dropout, h, lengths, self.cfg.rnn_layout,
                              len(self.layers) // 2 if inter else None, self.cfg.rnn_bf16)
        return h, lengths, middle


def build_model(cfg: ModelConfig) -> BLSTM:
    return BLSTM(cfg)

