"""CTC decoding: greedy and prefix beam search over (T, V) log-probabilities, with token frames.

Both return ``(tokens, frames, score)``: the token ids and, for each token, the output frame where the
path emits it (used for ctm times).
"""

from __future__ import annotations

import math
from typing import Dict, List, Tuple

import numpy as np

from asrtrain.decode.options import check_search

NEG_INF = -math.inf


def greedy(log_probs: np.ndarray, blank: int = 0) -> Tuple[List[int], List[int], float]:
    """Best path: argmax per frame, merge repeats, drop blanks. ``log_probs`` (T, V)."""
    best = log_probs.argmax(axis=-1)
    tokens, frames = [], []
    prev = blank
    for t, k in enumerate(best.tolist()):
        if k != blank and k != prev:
            tokens.append(k)
            frames.append(t)
        prev = k
    score = float(log_probs[np.arange(len(best)), best].sum()) if len(best) else 0.0
    return tokens, frames, score


def log_add(a: float, b: float) -> float:
    """ln(e^a + e^b) of two log-probabilities, exact when either is NEG_INF (the lexicon search uses it too)."""
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    m = max(a, b)
    return m + math.log1p(math.exp(-abs(a - b)))


def prefix_beam_search(log_probs: np.ndarray, beam: int = 8, blank: int = 0, prune: float = -12.0
                       ) -> Tuple[List[int], List[int], float]:
    """CTC prefix beam search (Hannun et al. 2014) without a language model.

    Each prefix keeps two scores, ending in blank (``pb``) and ending in its last token (``pnb``), so
    that repeated tokens separated by a blank are distinct from a held token. Per frame only tokens
    whose log-probability is above ``prune`` (and the ``beam`` best) are expanded.
    """
    check_search(beam)
    T, V = log_probs.shape
    # prefix -> (pb, pnb, frames)
    beams: Dict[Tuple[int, ...], Tuple[float, float, Tuple[int, ...]]] = {(): (0.0, NEG_INF, ())}
    for t in range(T):
        row = log_probs[t]
        cand = np.argsort(row)[::-1][: max(beam, 1)]
        cand = [int(k) for k in cand if row[k] >= prune or k == blank] or [int(row.argmax())]
        nxt: Dict[Tuple[int, ...], List] = {}

        def add(prefix, pb, pnb, frames):
            if prefix in nxt:
                e = nxt[prefix]
                e[0] = log_add(e[0], pb)
                e[1] = log_add(e[1], pnb)
            else:
                nxt[prefix] = [pb, pnb, frames]

        for prefix, (pb, pnb, frames) in beams.items():
            total = log_add(pb, pnb)
            last = prefix[-1] if prefix else None
            for k in cand:
                p = float(row[k])
                if k == blank:
                    add(prefix, total + p, NEG_INF, frames)
                elif k == last:
                    add(prefix, NEG_INF, pnb + p, frames)  # held token: same prefix
                    add(prefix + (k,), NEG_INF, pb + p, frames + (t,))  # repeat after a blank
                else:
                    add(prefix + (k,), NEG_INF, total + p, frames + (t,))
        ranked = sorted(nxt.items(), key=lambda kv: log_add(kv[1][0], kv[1][1]), reverse=True)[:beam]
        beams = {p: (v[0], v[1], v[2]) for p, v in ranked}
    prefix, (pb, pnb, frames) = max(beams.items(), key=lambda kv: log_add(kv[1][0], kv[1][1]))
    return list(prefix), list(frames), log_add(pb, pnb)
