"""Word n-gram language models: train (interpolated modified Kneser-Ney), write and read ARPA, score.

Training follows Chen & Goodman (1998) as SRILM's ``ngram-count -kndiscount -interpolate`` and KenLM's
``lmplz`` do: the highest order uses real counts, lower orders use continuation counts (the number of
distinct words seen before an n-gram), each order has three discounts D1, D2, D3+ from its
counts-of-counts, and every order is interpolated with the next lower one (the unigrams with the
uniform distribution over the vocabulary). Written as ARPA, a seen n-gram's entry is its interpolated
probability and a context's backoff weight is its interpolation weight, so any ARPA reader (SRILM,
KenLM, Kaldi's ``arpa2fst``) computes the same probabilities as :meth:`NgramLM.logprob`.

Sentences are wrapped in ``<s> ... </s>``; ``<unk>`` is always in the vocabulary: with its share of the
uniform mass only, unless the text holds ``<unk>`` (a transcript's unknown word), which is then counted
like any word. It is never one of the words a lexicon search may output (:attr:`NgramLM.vocab`).
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_write_text

log = logging.getLogger(__name__)

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
LN10 = math.log(10.0)
Ngram = Tuple[str, ...]


def _discounts(counts: Dict[Ngram, int], order: int) -> Tuple[float, float, float]:
    """Modified KN discounts (D1, D2, D3+) of one order from its counts-of-counts."""
    n = [0, 0, 0, 0, 0]
    for c in counts.values():
        if c <= 4:
            n[c] += 1
    n1, n2, n3, n4 = n[1], n[2], n[3], n[4]
    if n1 and n2 and n3 and n4:
        y = n1 / (n1 + 2 * n2)
        d = (1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3)
        if all(0 < d[k] < k + 1 for k in range(3)):
            return d
    # Too little data for the counts-of-counts to define them (tiny corpora): one absolute discount.
    y = n1 / (n1 + 2 * n2) if n1 + n2 else 0.5
    y = min(max(y, 0.1), 0.9)
    log.info("order %d: counts-of-counts %s do not define modified KN discounts; using D=%.2f", order,
             n[1:], y)
    return (y, y, y)


class NgramLM:
    """A backoff n-gram model: ``probs[k][ngram] = log10 p``, ``bows[k][context] = log10 backoff``."""

    def __init__(self, order: int, probs: List[Dict[Ngram, float]], bows: List[Dict[Ngram, float]]):
        self.order = order
        self.probs, self.bows = probs, bows
        self.vocab = sorted(w for (w,) in probs[0] if w not in (BOS, EOS, UNK))

    # -- scoring --------------------------------------------------------------------------------
    def logprob10(self, context: Sequence[str], word: str) -> float:
        """log10 p(word | context) with standard backoff (context: the preceding words, any length)."""
        context = tuple(context)[-(self.order - 1):] if self.order > 1 else ()
        backoff = 0.0
        for k in range(len(context), -1, -1):
            h = context[len(context) - k:]
            p = self.probs[k].get(h + (word,))
            if p is not None:
                return backoff + p
            backoff += self.bows[k - 1].get(h, 0.0) if k else 0.0
        return backoff + self.probs[0].get((UNK,), -99.0)

    def begin_state(self) -> Ngram:
        return (BOS,)

    def score(self, state: Ngram, word: str) -> Tuple[float, Ngram]:
        """(natural-log p(word | state), next state); states are the longest known history, <= order-1."""
        lp = self.logprob10(state, word) * LN10
        nxt = (state + (word,))[-(self.order - 1):] if self.order > 1 else ()
        while nxt and nxt not in self.bows[len(nxt) - 1]:
            nxt = nxt[1:]  # as KenLM: forget history the model has never seen as a context
        return lp, nxt

    def end_score(self, state: Ngram) -> float:
        return self.logprob10(state, EOS) * LN10

    def sentence_logprob10(self, words: Sequence[str]) -> float:
        hist, total = [BOS], 0.0
        for w in list(words) + [EOS]:
            total += self.logprob10(hist, w)
            hist.append(w)
        return total

    # -- ARPA -----------------------------------------------------------------------------------
    def write_arpa(self, path: Path) -> None:
        lines = ["", "\\data\\"]
        lines += [f"ngram {k + 1}={len(self.probs[k])}" for k in range(self.order)]
        for k in range(self.order):
            lines += ["", f"\\{k + 1}-grams:"]
            for ng in sorted(self.probs[k]):
                row = f"{self.probs[k][ng]:.6f}\t{' '.join(ng)}"
                if k < self.order - 1 and ng in self.bows[k]:
                    row += f"\t{self.bows[k][ng]:.6f}"
                lines.append(row)
        lines += ["", "\\end\\", ""]
        atomic_write_text(Path(path), "\n".join(lines))


def read_arpa(path: Path) -> NgramLM:
    """Parse an ARPA file strictly; anything malformed is a one-line error naming the line.

    Strict means: a ``\\data\\`` header with ``ngram k=N`` for k = 1..K, then every section ``\\k-grams:``
    in order holding exactly N entries of a log10 probability (a number, or -inf), k words and, below the
    top order, an optional finite backoff weight; then ``\\end\\``. A file cut anywhere (a missing
    section, fewer entries than declared, no ``\\end\\``) is refused, never read as a lower-order LM.
    """
    path = Path(path)
    if not path.is_file():
        raise AsrError("language model not found", path, fix="train one with asrtrain lm train")
    try:
        raw_lines = path.read_bytes().split(b"\n")
    except OSError as err:
        raise AsrError(f"cannot read language model: {err.strerror}", path) from None
    declared: Dict[int, int] = {}
    probs: List[Dict[Ngram, float]] = []
    bows: List[Dict[Ngram, float]] = []
    section = None  # None: before \data\; 0: in \data\; k: in \k-grams:
    ended = False
    lineno = 0

    def bad(message: str) -> AsrError:
        return AsrError(f"malformed ARPA file: {message}", path, lineno,
                        fix="regenerate it with asrtrain lm train, SRILM or KenLM")

    for lineno, raw in enumerate(raw_lines, 1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as err:
            raise bad(f"not valid UTF-8 (byte {err.start + 1} of the line)") from None
        if not line:
            continue
        if line == "\\data\\":
            if section is not None:
                raise bad("a second \\data\\ header")
            section = 0
        elif line == "\\end\\":
            ended = True
            break
        elif section is None:
            continue  # text before \data\ is allowed (comments)
        elif section == 0 and line.startswith("ngram "):
            k, eq, n = line[6:].partition("=")
            try:
                k, n = int(k), int(n)
            except ValueError:
                raise bad(f"expected 'ngram K=N', got {line!r}") from None
            if not eq or k != len(declared) + 1 or n < 0:
                raise bad(f"expected 'ngram {len(declared) + 1}=N' with N >= 0, got {line!r}")
            declared[k] = n
        elif line.startswith("\\") and line.endswith("-grams:"):
            try:
                k = int(line[1:-7])
            except ValueError:
                raise bad(f"bad section header {line!r}") from None
            if k != len(probs) + 1 or k not in declared:
                raise bad(f"section {line} out of order or not declared in \\data\\ "
                          f"(want \\{len(probs) + 1}-grams:)")
            _check_section_count(probs, declared, lineno, bad)
            section = k
            probs.append({})
            bows.append({})
        elif section == 0:
            raise bad(f"unexpected line in the \\data\\ header: {line[:40]!r}")
        else:
            _arpa_entry(line, section, len(declared), probs[-1], bows[-1], bad)
    if section is None:
        raise AsrError("not an ARPA file: no \\data\\ header", path,
                       fix="give an ARPA n-gram LM (asrtrain lm train, SRILM or KenLM)")
    _check_section_count(probs, declared, lineno, bad)
    if not ended:
        raise bad("no \\end\\ line: the file is cut short (truncated?)")
    if len(probs) != len(declared) or not declared:
        raise bad(f"\\data\\ declares {len(declared)} order(s) but {len(probs)} section(s) follow "
                  f"(truncated?)")
    return NgramLM(len(probs), probs, bows)


def _check_section_count(probs, declared, lineno, bad) -> None:
    """The section just read must hold as many entries as \\data\\ declared for it."""
    if probs and len(probs[-1]) != declared[len(probs)]:
        raise bad(f"\\{len(probs)}-grams: holds {len(probs[-1])} entries but \\data\\ declares "
                  f"{declared[len(probs)]} (truncated?)")


def _arpa_entry(line: str, k: int, order: int, probs: Dict[Ngram, float], bows: Dict[Ngram, float],
                bad) -> None:
    parts = line.split()
    allowed = (k + 1, k + 2) if k < order else (k + 1,)
    if len(parts) not in allowed:
        raise bad(f"expected a log10 probability, {k} word(s)"
                  + (" and an optional backoff weight" if k < order else "") + f", got {len(parts)} fields")
    ng = tuple(parts[1:k + 1])
    try:
        prob = float(parts[0])
        bow = float(parts[-1]) if len(parts) == k + 2 else None
    except ValueError:
        raise bad(f"not a number in {line[:60]!r}") from None
    if math.isnan(prob) or prob == math.inf or (bow is not None and not math.isfinite(bow)):
        raise bad(f"probability or backoff is not a finite number (or -inf) in {line[:60]!r}")
    if ng in probs:
        raise bad(f"duplicate {k}-gram {' '.join(ng)!r}")
    probs[ng] = prob
    if bow is not None:
        bows[ng] = bow


#: Highest n-gram order ``train_ngram`` builds (KenLM's default build reads 6; SRILM's LMs seldom go past 5).
MAX_ORDER = 10


def read_sentences(text_path: Path) -> Iterable[List[str]]:
    """Word lists of a Kaldi text file (the first field, the utterance id, is dropped). A line that data
    validate refuses (``<s>``, ``</s>``, ``#0``, odd whitespace) is an AsrError: ``<s>`` inside a sentence
    would become n-grams such as ``a <s> b``. So is a repeated id: a file of plain sentences would lose
    every first word."""
    from asrtrain.data.table import iter_lines
    from asrtrain.data.textcheck import PLAIN_TEXT_FIX, repeated_id, text_line_problem

    seen: Dict[str, int] = {}
    empty = 0
    for no, line in iter_lines(Path(text_path)):
        bad = text_line_problem(line)
        if bad:
            raise AsrError(bad, text_path, no, fix="correct the transcript (asrtrain data validate checks a "
                                                   "data dir's text), or drop the line")
        parts = line.split()
        again = repeated_id(seen, parts[0], no)
        if again:
            raise AsrError(again, text_path, no, fix=PLAIN_TEXT_FIX)
        if len(parts) > 1:
            yield parts[1:]
        else:
            empty += 1
    if empty:
        log.info("%s: %d line(s) with an id and no words are not sentences of the LM", text_path, empty)


def train_ngram(sentences: Iterable[Sequence[str]], order: int = 3,
                source: Optional[Path] = None) -> NgramLM:
    """Interpolated modified Kneser-Ney n-gram model of ``order`` from word sequences (streamed: LM texts
    can be large); ``source``, the file they come from, is named when it holds none."""
    if not 1 <= order <= MAX_ORDER:
        raise AsrError(f"--order must be 1 to {MAX_ORDER}, got {order}",
                       fix="e.g. --order 3 (flashlight's KenLM reads up to 6)")
    counts: List[Dict[Ngram, int]] = [defaultdict(int) for _ in range(order)]
    n_sent = 0
    for words in sentences:
        n_sent += 1
        seq = [BOS] + list(words) + [EOS]
        for i in range(1, len(seq)):
            ng = tuple(seq[max(0, i - order + 1):i + 1])
            counts[len(ng) - 1][ng] += 1  # the highest order available at this position
    if not n_sent:
        raise AsrError("no sentences to train a language model on", source,
                       fix="give a Kaldi text file with transcripts (<utt-id> <words...>)")
    top = max(k for k in range(order) if counts[k]) + 1
    if top < order:
        log.warning("--order %d: the longest sentence gives %d-grams at most, so orders %d..%d of the LM are "
                    "empty (a lower --order is the same model)", order, top, top + 1, order)
    # Lower orders: continuation counts N1+(. ng), the number of distinct words seen left of ng. The
    # n-grams starting with <s> have nothing to their left and keep the real counts counted above.
    for k in range(order - 1, 0, -1):
        cont: Dict[Ngram, int] = defaultdict(int)
        for ng in counts[k]:
            cont[ng[1:]] += 1
        counts[k - 1].update(cont)
    vocab = {w for (w,) in counts[0]} | {UNK, EOS}
    probs: List[Dict[Ngram, float]] = [dict() for _ in range(order)]
    bows: List[Dict[Ngram, float]] = [dict() for _ in range(order)]
    lin: List[Dict[Ngram, float]] = [dict() for _ in range(order)]  # interpolated probabilities
    for k in range(order):
        d = _discounts(counts[k], k + 1)
        by_ctx: Dict[Ngram, List[Ngram]] = defaultdict(list)
        for ng in counts[k]:
            by_ctx[ng[:-1]].append(ng)
        for ctx, ngs in by_ctx.items():
            total = sum(counts[k][ng] for ng in ngs)
            gamma = sum(d[min(counts[k][ng], 3) - 1] for ng in ngs) / total
            for ng in ngs:
                c = counts[k][ng]
                # every suffix of a counted n-gram is counted one order down (continuation counts)
                lower = lin[k - 1][ng[1:]] if k else 1.0 / len(vocab)
                lin[k][ng] = (c - d[min(c, 3) - 1]) / total + gamma * lower
            if k:
                bows[k - 1][ctx] = gamma
            else:
                for w in vocab - {ng[0] for ng in ngs}:
                    lin[0][(w,)] = gamma / len(vocab)
    for k in range(order):
        probs[k] = {ng: math.log10(p) for ng, p in lin[k].items()}
        bows[k] = {ctx: math.log10(g) for ctx, g in bows[k].items()}
    probs[0][(BOS,)] = -99.0  # never predicted; listed so that it can be a context
    bows[0].setdefault((BOS,), 0.0)
    log.info("n-gram LM: %d sentences, %d words in the vocabulary, %s n-grams", n_sent, len(vocab),
             " ".join(f"{k + 1}:{len(probs[k])}" for k in range(order)))
    return NgramLM(order, probs, bows)


def arpa_order_and_vocab(path: Path) -> Tuple[int, List[str]]:
    """(order, vocabulary) of an ARPA file from its header and 1-grams only: what a decoder that loads
    the LM itself (KenLM) needs from us, without reading the higher orders into Python."""
    path = Path(path)
    if not path.is_file():
        raise AsrError("language model not found", path, fix="train one with asrtrain lm train")
    order, words, section = 0, [], None
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.decode("utf-8", errors="replace").strip()
            if line == "\\data\\":
                section = 0
            elif section == 0 and line.startswith("ngram ") and "=" in line:
                order += 1
            elif line == "\\1-grams:":
                section = 1
            elif section == 1 and line:
                if line.startswith("\\"):
                    break
                parts = line.split()
                if len(parts) < 2:
                    raise AsrError("malformed ARPA file: expected a log10 probability and a word", path,
                                   lineno, fix="regenerate it with asrtrain lm train, SRILM or KenLM")
                if parts[1] not in (BOS, EOS, UNK):
                    words.append(parts[1])
    if section is None or not order:
        raise AsrError("not an ARPA file: no \\data\\ header", path,
                       fix="give an ARPA n-gram LM (asrtrain lm train, SRILM or KenLM)")
    return order, sorted(words)
