"""An attention decoder over the BLSTM encoder, for joint CTC/attention training (Kim, Hori and Watanabe,
ICASSP 2017; the loss ESPnet's recipes train with, AN4's among them): ``model.att_weight`` w makes the
training loss ``(1 - w) CTC + w CE``, the CE of this decoder predicting each target piece and then the end
of the sentence from the pieces before it (teacher forcing) and the encoder's states. It is an auxiliary
task for the shared encoder: decoding uses the CTC branch (greedy, lexicon, flashlight), which this decoder
can rescore (``sequence_logprob``; :mod:`asrtrain.decode.rescore`), and the dev loss stays the CTC loss,
comparable across runs.

The decoder is one LSTM cell over [previous piece's embedding; previous context] with additive attention
(Bahdanau et al. 2015) over the encoder's valid frames; padded frames get no weight, so an utterance's
loss does not depend on its batch mates. Token 0 (CTC's blank, never a target) is the start and the end of
every sentence.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from asrtrain.model.masks import valid_frames


def _wide(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 where autocast made it fp16/bf16 (softmax and loss in full precision)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class AttentionDecoder(nn.Module):
    def __init__(self, enc_dim: int, num_targets: int, dim: int, dropout: float = 0.0):
        super().__init__()
        self.dim = dim
        self.embed = nn.Embedding(num_targets, dim)
        self.cell = nn.LSTMCell(dim + enc_dim, dim)
        self.enc_proj = nn.Linear(enc_dim, dim)
        self.dec_proj = nn.Linear(dim, dim, bias=False)
        self.score = nn.Linear(dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(dim + enc_dim, num_targets)

    def forward(self, enc: torch.Tensor, enc_lens: torch.Tensor, targets: torch.Tensor,
                target_lens: torch.Tensor) -> torch.Tensor:
        """Summed CE (a float32 scalar) of ``targets`` (N, S), padded with anything past ``target_lens``,
        each followed by the end token, given the encoder's ``enc`` (N, T, E) of ``enc_lens`` (N,) frames."""
        logits, gold = self._logits(enc, enc_lens, targets, target_lens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), gold.reshape(-1), ignore_index=-1,
                               reduction="sum").float()

    def sequence_logprob(self, enc: torch.Tensor, enc_lens: torch.Tensor, targets: torch.Tensor,
                         target_lens: torch.Tensor) -> torch.Tensor:
        """Per utterance (N,) float32: ln p(pieces, then the end token | encoder), the sum that ``forward``
        negates and adds over the batch; what attention rescoring adds to an n-best hypothesis."""
        logits, gold = self._logits(enc, enc_lens, targets, target_lens)
        lp = F.log_softmax(logits, dim=-1).gather(-1, gold.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return lp.masked_fill(gold < 0, 0.0).sum(dim=1).float()

    def _logits(self, enc: torch.Tensor, enc_lens: torch.Tensor, targets: torch.Tensor,
                target_lens: torch.Tensor):
        """(logits (N, S + 1, V) at least float32, gold (N, S + 1): each step's target, -1 past the end)."""
        n, t, _ = enc.shape
        s = int(target_lens.max()) if n else 0
        device = enc.device
        valid = valid_frames(enc_lens, t, device)  # (N, T)
        keys = self.enc_proj(enc)  # (N, T, A), once per utterance
        pos = torch.arange(s + 1, device=device)[None, :]
        lens = target_lens.to(device)[:, None]
        tgt = targets[:, :s].clamp(min=0).to(device)
        # what step u predicts: piece u, then the end token (0) at u = len; -1 (ignored) after it
        gold = torch.cat([tgt, torch.zeros(n, 1, dtype=tgt.dtype, device=device)], dim=1)
        gold = torch.where(pos <= lens, gold, -torch.ones_like(gold))
        prev = torch.cat([torch.zeros(n, 1, dtype=tgt.dtype, device=device), tgt], dim=1)  # start, pieces
        emb = self.dropout(self.embed(prev))  # (N, S + 1, D)
        h = enc.new_zeros(n, self.dim)
        c = enc.new_zeros(n, self.dim)
        ctx = enc.new_zeros(n, enc.shape[-1])
        logits = []
        for u in range(s + 1):
            h, c = self.cell(torch.cat([emb[:, u], ctx], dim=-1), (h, c))
            e = self.score(torch.tanh(keys + self.dec_proj(h)[:, None, :])).squeeze(-1)  # (N, T)
            a = torch.softmax(_wide(e).masked_fill(~valid, float("-inf")), dim=-1).to(enc.dtype)
            ctx = torch.bmm(a[:, None, :], enc).squeeze(1)  # (N, E)
            logits.append(self.out(self.dropout(torch.cat([h, ctx], dim=-1))))
        logits = _wide(torch.stack(logits, dim=1))  # (N, S + 1, V), at least float32
        return logits, gold
