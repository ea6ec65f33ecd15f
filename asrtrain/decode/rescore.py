"""Attention rescoring of the lexicon search's n-best, for a joint CTC/attention model (``model.att_weight``).

The lexicon search (:func:`asrtrain.decode.lexicon.lexicon_nbest`) keeps its ``nbest`` best hypotheses,
each scored ``ln p_CTC + lm_weight ln p_LM + word_bonus x words``; the attention decoder then reads the
same encoder states and gives each hypothesis's pieces ``ln p_att(pieces, end | encoder)``, and the
hypothesis with the best ``search score + att_rescore x ln p_att`` wins. This is the second pass of
ESPnet's and WeNet's "attention rescoring" with a word LM kept in the first pass; ``att_rescore`` is chosen
on dev by ``asrtrain tune-lm --att-weights`` (0, no rescoring, is always a candidate and wins ties).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Tuple

import torch

from asrtrain.errors import AsrError

Hyp = Tuple[List[int], List[int], float]


def has_decoder(model) -> bool:
    """Whether ``model`` was built with an attention decoder (``model.att_weight`` > 0)."""
    return getattr(model, "decoder", None) is not None


def check_rescorable(model, exp_dir: Path) -> None:
    """One line when the model has no attention decoder to rescore with."""
    if not has_decoder(model):
        raise AsrError("attention rescoring needs a model trained with model.att_weight > 0 (this one has no "
                       "attention decoder)", Path(exp_dir) / "config.yaml",
                       fix="drop --att-rescore/--att-weights, or train with --set model.att_weight=0.3")


@torch.no_grad()
def attention_scores(model, enc: torch.Tensor, hyps: Sequence[Sequence[int]]) -> List[float]:
    """``ln p_att(tokens, end | enc)`` for each hypothesis's tokens, given one utterance's encoder states
    ``enc`` (T', E) (moved to the model's device); all hypotheses in one batch."""
    n = len(hyps)
    if n == 0:
        return []
    device = next(model.parameters()).device
    enc = enc.to(device)
    lens = torch.tensor([len(h) for h in hyps], dtype=torch.long)
    targets = torch.zeros(n, max(1, int(lens.max())), dtype=torch.long)
    for i, h in enumerate(hyps):
        targets[i, : len(h)] = torch.tensor(list(h), dtype=torch.long)
    states = enc.unsqueeze(0).expand(n, -1, -1)
    enc_lens = torch.full((n,), enc.shape[0], dtype=torch.long, device=device)
    scores = model.decoder.sequence_logprob(states, enc_lens, targets.to(device), lens.to(device))
    return scores.cpu().tolist()


def rescored_best(model, search, lp, enc: torch.Tensor, weight: float) -> Hyp:
    """Our lexicon search's n-best over one utterance's log-probs ``lp`` (T', V) (``search.nbest``, from
    :func:`asrtrain.decode.lexicon_search.lexicon_search`), rescored with the attention decoder over the
    same utterance's encoder states ``enc`` (T', E) at ``weight``: the hypothesis decode and transcribe
    output."""
    hyps = search.nbest(lp)
    return pick(hyps, attention_scores(model, enc, [h[0] for h in hyps]), weight)


def pick(nbest: Sequence[Hyp], att: Sequence[float], weight: float) -> Hyp:
    """The hypothesis with the best ``search score + weight x att``; the search's first among equals."""
    best = max(range(len(nbest)), key=lambda i: (nbest[i][2] + weight * att[i], -i))
    return nbest[best]
