"""CTC prefix beam search over word pieces, constrained to a word vocabulary, with a word n-gram LM.

What Kaldi's decoding graph or flashlight's lexicon decoder give a CTC model: hypotheses may only spell
words of the vocabulary, and each finished word adds ``lm_weight * ln p(word | history) + word_bonus``
(shallow fusion). Words are spelled by any sequence of sentencepiece pieces, not only the tokenizer's
canonical one: a piece starting with ``▁`` starts a word, others continue it, and the word so far must be
a prefix of a vocabulary word. A word is scored when the next one starts or the utterance ends (then
``</s>`` is scored too).

The end, as flashlight's ``LexiconDecoder::decodeEnd`` (and a Kaldi graph, whose only final states are
word ends): hypotheses of the last beam that end inside a word do not compete while any hypothesis ends
at a word's end. When none does (a beam too narrow, or a model too weak, to keep one), all compete
without their unfinished word, which is left out of the output (its tokens and frames): it was never
scored as a word, and a closed-vocabulary search outputs only vocabulary words.

Open vocabulary (``oov_penalty`` set; the default ``None`` keeps the search closed): a word may also be
spelled outside the vocabulary, as ESPnet's or Kaldi's ``<unk>``-aware systems let a letter or piece model
do. Such a word pays ``oov_penalty`` once, on the frame its spelling stops being the prefix of any
vocabulary word (so out-of-vocabulary spellings cannot crowd the beam for free), and when it is finished the
LM scores it as ``<unk>`` (``lm_weight * ln p(<unk> | history) + word_bonus``); the history after it is
what the LM keeps of an unseen word (nothing). Words spelled inside the vocabulary are scored exactly as in
the closed search, so with ``oov_penalty`` very negative the two agree.

Hypotheses are token prefixes, as in :func:`asrtrain.decode.ctc.prefix_beam_search` (blank and
non-blank scores), and return the same ``(tokens, frames, score)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from asrtrain.decode.ctc import NEG_INF, log_add
from asrtrain.decode.options import check_search

WORD_START = "\u2581"


class Lexicon:
    """The vocabulary as a set of words and of all their prefixes, and the pieces' spellings."""

    def __init__(self, words: Iterable[str], pieces: Sequence[str]):
        self.words: Set[str] = {w for w in words if w}
        self.prefixes: Set[str] = {w[:i] for w in self.words for i in range(len(w) + 1)}
        self.starts = [p.startswith(WORD_START) for p in pieces]
        self.spell = [p[1:] if s else p for p, s in zip(pieces, self.starts)]


@dataclass
class _Hyp:
    pb: float  # ends in blank
    pnb: float  # ends in its last token
    frames: Tuple[int, ...]
    lm: float  # LM and word-bonus part, words finished so far
    state: tuple  # LM state after the finished words
    partial: str  # the word being spelled
    word_at: int  # where its tokens begin in the prefix


def lexicon_beam_search(log_probs: np.ndarray, lexicon: Lexicon, lm=None, beam: int = 16,
                        lm_weight: float = 0.5, word_bonus: float = 0.0, blank: int = 0,
                        prune: float = -10.0, token_beam: int = 10,
                        oov_penalty: Optional[float] = None,
                        unfinished: Optional[List[str]] = None) -> Tuple[List[int], List[int], float]:
    """Best vocabulary-constrained path through ``log_probs`` (T, V); ``lm`` is an
    :class:`asrtrain.lm.ngram.NgramLM` or ``None`` (vocabulary constraint and word bonus only).
    ``oov_penalty`` (a log score, e.g. -8) opens the vocabulary (module docstring); ``None`` keeps it closed.
    ``unfinished``: as :func:`lexicon_nbest`'s.

    Per frame, only the ``token_beam`` most likely tokens with a log-probability above ``prune`` extend
    the ``beam`` hypotheses."""
    return lexicon_nbest(log_probs, lexicon, lm, beam, lm_weight, word_bonus, blank, prune, token_beam,
                         oov_penalty, nbest=1, unfinished=unfinished)[0]


def lexicon_nbest(log_probs: np.ndarray, lexicon: Lexicon, lm=None, beam: int = 16, lm_weight: float = 0.5,
                  word_bonus: float = 0.0, blank: int = 0, prune: float = -10.0, token_beam: int = 10,
                  oov_penalty: Optional[float] = None, nbest: int = 1,
                  unfinished: Optional[List[str]] = None) -> List[Tuple[List[int], List[int], float]]:
    """The ``nbest`` best hypotheses of :func:`lexicon_beam_search`'s final beam (at most ``beam``), best
    first, each ``(tokens, frames, score)`` with its words finished and ``</s>`` scored; distinct token
    sequences (two spellings of the same words are two entries). When every hypothesis ends inside a word,
    they compete without their unfinished words (module docstring), and the best one's unfinished word is
    appended to ``unfinished`` when it is given (callers count such utterances)."""
    check_search(beam)
    begin = lm.begin_state() if lm is not None else ()
    beams: Dict[Tuple[int, ...], _Hyp] = {(): _Hyp(0.0, NEG_INF, (), 0.0, begin, "", 0)}
    word_cache: Dict[Tuple[tuple, str], Tuple[float, tuple]] = {}

    def finish(state: tuple, word: str) -> Tuple[float, tuple]:
        key = (state, word)
        if key not in word_cache:
            if lm is None:
                word_cache[key] = (word_bonus, state)
            else:
                lp, nxt = lm.score(state, word)
                word_cache[key] = (lm_weight * lp + word_bonus, nxt)
        return word_cache[key]

    open_vocab = oov_penalty is not None

    def close(lm_part: float, state: tuple, partial: str) -> Optional[Tuple[float, tuple]]:
        """(lm part, state) once ``partial`` is finished as a word, or None if it may not be one."""
        if partial in lexicon.words:
            add, state = finish(state, partial)
            return lm_part + add, state
        if not open_vocab:
            return None
        # an out-of-vocabulary word: its penalty is due now unless it left the prefixes earlier
        due = oov_penalty if partial in lexicon.prefixes else 0.0
        add, state = finish(state, partial)  # the LM scores a word it does not know as <unk>
        return lm_part + due + add, state

    def begin(lm_part: float, partial: str, was: bool) -> float:
        """The lm part after the spelling grew to ``partial`` in the open search (``was``: the old one
        was a vocabulary prefix, so leaving the prefixes now is charged)."""
        return lm_part + oov_penalty if was and partial not in lexicon.prefixes else lm_part

    def extend_closed(h: _Hyp, k: int, at: int) -> Optional[Tuple[float, tuple, str, int]]:
        """(lm part, state, partial, word_at) after appending token ``k`` to ``h`` at prefix index
        ``at``, or None if no word fits."""
        spell = lexicon.spell[k]
        if lexicon.starts[k] and h.partial:
            if h.partial not in lexicon.words:
                return None
            add, state = finish(h.state, h.partial)
            return (h.lm + add, state, spell, at) if spell in lexicon.prefixes else None
        partial = h.partial + spell
        return (h.lm, h.state, partial, h.word_at) if partial in lexicon.prefixes else None

    def extend_open(h: _Hyp, k: int, at: int) -> Optional[Tuple[float, tuple, str, int]]:
        """As ``extend_closed``, with spellings outside the vocabulary allowed (and charged)."""
        spell = lexicon.spell[k]
        if lexicon.starts[k] and h.partial:
            closed = close(h.lm, h.state, h.partial)
            if closed is None:
                return None
            return begin(closed[0], spell, True), closed[1], spell, at
        partial = h.partial + spell
        return begin(h.lm, partial, h.partial in lexicon.prefixes), h.state, partial, h.word_at

    extend = extend_open if open_vocab else extend_closed  # the closed search keeps its lean inner step

    T = log_probs.shape[0]
    for t in range(T):
        row = log_probs[t]
        top = np.argpartition(row, -token_beam)[-token_beam:] if row.shape[0] > token_beam \
            else np.arange(row.shape[0])
        cand = [int(k) for k in top if row[k] >= prune and k != blank]
        p_blank = float(row[blank])
        nxt: Dict[Tuple[int, ...], _Hyp] = {}

        def add(prefix, pb, pnb, frames, lm_part, state, partial, word_at):
            e = nxt.get(prefix)
            if e is None:
                nxt[prefix] = _Hyp(pb, pnb, frames, lm_part, state, partial, word_at)
            else:
                e.pb, e.pnb = log_add(e.pb, pb), log_add(e.pnb, pnb)

        for prefix, h in beams.items():
            total = log_add(h.pb, h.pnb)
            add(prefix, total + p_blank, NEG_INF, h.frames, h.lm, h.state, h.partial, h.word_at)
            last = prefix[-1] if prefix else None
            for k in cand:
                p = float(row[k])
                if k == last:
                    add(prefix, NEG_INF, h.pnb + p, h.frames, h.lm, h.state, h.partial, h.word_at)  # held
                    if h.pb == NEG_INF:
                        continue
                    ext = extend(h, k, len(prefix))
                    if ext is not None:
                        add(prefix + (k,), NEG_INF, h.pb + p, h.frames + (t,), *ext)
                else:
                    ext = extend(h, k, len(prefix))
                    if ext is not None:
                        add(prefix + (k,), NEG_INF, total + p, h.frames + (t,), *ext)
        ranked = sorted(nxt.items(), key=lambda kv: log_add(kv[1].pb, kv[1].pnb) + kv[1].lm, reverse=True)
        beams = dict(ranked[:beam])

    def end(score: float, state: tuple) -> float:
        return score + lm_weight * lm.end_score(state) if lm is not None else score

    finished = []
    for prefix, h in beams.items():
        score = log_add(h.pb, h.pnb) + h.lm
        state = h.state
        if h.partial:
            closed = close(score, state, h.partial)
            if closed is None:
                continue
            score, state = closed
        finished.append((end(score, state), list(prefix), list(h.frames)))
    if not finished:  # every hypothesis ends inside a word: they compete without it (module docstring)
        best: Dict[Tuple[int, ...], Tuple[float, List[int], List[int]]] = {}
        top: Optional[_Hyp] = None  # the best hypothesis, whose unfinished word is reported
        top_score = NEG_INF
        for prefix, h in beams.items():
            kept = prefix[:h.word_at]
            score = end(log_add(h.pb, h.pnb) + h.lm, h.state)
            if top is None or score > top_score:  # the first of equals, as max() picks
                top, top_score = h, score
            if kept not in best or score > best[kept][0]:  # two unfinished words after the same ones
                best[kept] = (score, list(kept), list(h.frames[:h.word_at]))
        finished = list(best.values())
        if unfinished is not None:
            unfinished.append(top.partial)
    finished.sort(key=lambda f: f[0], reverse=True)  # stable: equal scores keep the beam's order
    return [(tokens, frames, score) for score, tokens, frames in finished[:max(1, nbest)]]


def read_words(path) -> List[str]:
    """A vocabulary file: one word per line (Kaldi ``words.txt`` with ids is accepted too)."""
    from pathlib import Path

    from asrtrain.errors import AsrError

    path = Path(path)
    if not path.is_file():
        raise AsrError("vocabulary file not found", path, fix="pass --words a file with one word per line")
    from asrtrain.data.table import iter_lines

    words = []
    for lineno, line in iter_lines(path):  # not UTF-8: a one-line error naming the line
        parts = line.split()
        if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
            raise AsrError("expected one word (optionally followed by an integer id) per line", path, lineno,
                           fix="give one word per line, or Kaldi's words.txt")
        if parts[0] not in ("<eps>", "<s>", "</s>", "<unk>", "#0"):
            words.append(parts[0])
    if not words:
        raise AsrError("vocabulary file has no words", path)
    return words

