"""Word error counts: sclite's weighted Levenshtein alignment over word networks, and text-mode scoring.

Why our own DP and not jiwer: jiwer (rapidfuzz) aligns with unit costs and has no notion of optional
words, fragments or alternations, and its tie-breaking differs from sclite's. Counts only equal NIST's if
we use sclite's costs (``word.c: wwd_WORD``) and its tie-breaking (``net_dp.c``):

======================================  =====
correct                                 0
insert/delete the null word ``@``       0.001
substitute ``@`` for ``@``              1
insert/delete an optional word ``(w)``  2
insert/delete                           3
substitute                              4
======================================  =====

Costs are kept as integers (x1000) so the sums are exact. A cell prefers substitution/match when it is
no worse than both others, then deletion when strictly cheaper than insertion, else insertion; among
predecessor arcs the first strictly smaller wins -- the same order sclite uses.

A *network* is a DAG of word arcs: ``Net.words[i]`` with ``Net.preds[i]`` (indices of arcs that end
where arc ``i`` starts; 0 is the null head arc) and ``Net.finals`` (arcs that end at the stop node).
A plain sentence is a chain; ``{ a / b c / @ }`` alternations make parallel branches.

Case: sclite compares words case-insensitively unless given ``-s``. Its folding (``TEXT_str_to_low`` in
the default 8-bit ASCII mode, and in practice with ``-e utf-8`` too, checked against sctk 2.4.10) maps
only A-Z, so ``ÉTÉ`` and ``été`` stay different words; :func:`fold_case` does the same.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from asrtrain.limits import check_alignable

NULL = "@"

#: the characters sclite and Kaldi split words on (C's isspace): U+00A0 or U+3000 inside a token do not
#: split it, where Python's ``str.split()`` would
ASCII_SPACE = " \t\n\r\f\v"
_ASCII_SPACE_RUN = re.compile("[ \t\n\r\f\v]+")


def split_ascii(text: str) -> List[str]:
    """``text.split()`` on ASCII whitespace only (:data:`ASCII_SPACE`)."""
    text = text.strip(ASCII_SPACE)
    return _ASCII_SPACE_RUN.split(text) if text else []


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def fold_case(text: str) -> str:
    """``text`` as sclite compares it by default (no ``-s``): A-Z lowered, every other character kept."""
    return text.translate(_ASCII_LOWER)


def ascii_upper(text: str) -> str:
    """a-z raised, as sclite's .pra prints an error (``été`` -> ``éTé``)."""
    return text.translate(_ASCII_UPPER)

COST_NULL = 1        # insert/delete "@"
COST_NULL_SUB = 1000  # "@" for "@"
COST_OPT = 2000      # insert/delete an optionally deletable word
COST_INSDEL = 3000
COST_SUB = 4000


@dataclass(frozen=True)
class Word:
    """One token: ``text`` as compared, ``opt`` if optionally deletable, ``frag`` if a fragment.

    ``text`` never carries the parentheses of an optional word; ``show`` is what reports print.
    """
    text: str
    opt: bool = False
    frag: bool = False

    @property
    def show(self) -> str:
        return f"({self.text})" if self.opt else self.text


def make_word(token: str, opt_del: bool = False, frag_corr: bool = False) -> Word:
    """Decode a token as sclite does with ``-D`` (``(w)`` optional) and ``-F`` (``abc-``/``-abc`` fragment)."""
    opt = opt_del and len(token) > 2 and token[0] == "(" and token[-1] == ")"
    text = token[1:-1] if opt else token
    frag = frag_corr and len(text) > 1 and (text[0] == "-" or text[-1] == "-")
    return Word(text, opt, frag)


def words_equal(r: Word, h: Word) -> bool:
    """sclite's ``equal_WORD2``: exact match, or a fragment ``abc-`` matching any word starting ``abc``."""
    a, b = r.text, h.text
    if r.frag or h.frag:
        if len(a) > 1 and a[0] == "-":
            return b.endswith(a[1:])
        if len(a) > 1 and a[-1] == "-":
            return b.startswith(a[:-1])
        if len(b) > 1 and b[0] == "-":
            return a.endswith(b[1:])
        if len(b) > 1 and b[-1] == "-":
            return a.startswith(b[:-1])
    return a == b


def cost(r: Optional[Word], h: Optional[Word]) -> int:
    """sclite's ``wwd_WORD`` x1000 (see module docstring)."""
    if h is None and r.text == NULL or r is None and h.text == NULL:
        return COST_NULL
    if (r is None and h.opt) or (h is None and r.opt):
        return COST_OPT
    if r is None or h is None:
        return COST_INSDEL
    if r.text == NULL and h.text == NULL:
        return COST_NULL_SUB
    return 0 if words_equal(r, h) else COST_SUB


@dataclass
class Net:
    """A word network: arc 0 is the null head; ``preds[i]`` lists arcs ending where arc i starts."""
    words: List[Optional[Word]] = field(default_factory=lambda: [None])
    preds: List[List[int]] = field(default_factory=lambda: [[]])
    finals: List[int] = field(default_factory=lambda: [0])

    def add(self, word: Word, preds: List[int]) -> int:
        self.words.append(word)
        self.preds.append(list(preds))
        return len(self.words) - 1


def chain(words: Sequence[Word]) -> Net:
    """A linear network of ``words``."""
    net = Net()
    last = [0]
    for w in words:
        last = [net.add(w, last)]
    net.finals = last
    return net


def build_net(items: Sequence, make=make_word) -> Net:
    """Network from a token list where an item is a token string or a list of alternatives.

    An alternative is a list of items (so alternations may nest); ``[]`` or ``["@"]`` is the null
    alternative, which becomes one ``@`` arc as in sclite.
    """
    net = Net()

    def walk(seq: Sequence, frontier: List[int]) -> List[int]:
        for item in seq:
            if isinstance(item, str):
                frontier = [net.add(make(item), frontier)]
                continue
            ends: List[int] = []
            for alt in item:
                ends.extend(walk(alt or [NULL], frontier))
            frontier = ends
        return frontier

    net.finals = walk(items, [0])
    return net


# One aligned pair: op in "C", "S", "D", "I"; ref/hyp word or None.
Pair = Tuple[str, Optional[Word], Optional[Word]]


def align(ref: Net, hyp: Net) -> List[Pair]:
    """Minimum-cost alignment of two networks, returned as (op, ref, hyp) pairs in order.

    DP cell ``[a][b]`` is the best cost of paths ending with ref arc ``a`` and hyp arc ``b``
    (shapes: (len(ref.words), len(hyp.words))). Null ``@`` arcs are dropped from the output; a
    deleted optional word is reported as correct with no hyp word (sclite ``-D``).
    """
    na, nb = len(ref.words), len(hyp.words)
    check_alignable(na, nb, "alignment")
    big = 1 << 60
    dist = [[big] * nb for _ in range(na)]
    back = [[(-1, -1)] * nb for _ in range(na)]
    dist[0][0] = 0
    for b in range(1, nb):
        best, bi = big, -1
        for pb in hyp.preds[b]:
            if dist[0][pb] < best:
                best, bi = dist[0][pb], pb
        dist[0][b] = best + cost(None, hyp.words[b])
        back[0][b] = (0, bi)
    for a in range(1, na):
        best, ai = big, -1
        for pa in ref.preds[a]:
            if dist[pa][0] < best:
                best, ai = dist[pa][0], pa
        dist[a][0] = best + cost(ref.words[a], None)
        back[a][0] = (ai, 0)
    for a in range(1, na):
        ra, rpreds, da = ref.words[a], ref.preds[a], dist[a]
        del_cost = cost(ra, None)
        for b in range(1, nb):
            hb = hyp.words[b]
            ins, ii = big, -1
            for pb in hyp.preds[b]:
                if da[pb] < ins:
                    ins, ii = da[pb], pb
            dl, di = big, -1
            sb, sa_i, sb_i = big, -1, -1
            for pa in rpreds:
                row = dist[pa]
                if row[b] < dl:
                    dl, di = row[b], pa
                for pb in hyp.preds[b]:
                    if row[pb] < sb:
                        sb, sa_i, sb_i = row[pb], pa, pb
            sb += cost(ra, hb)
            dl += del_cost
            ins += cost(None, hb)
            if sb <= dl and sb <= ins:
                da[b], back[a][b] = sb, (sa_i, sb_i)
            elif dl < ins:
                da[b], back[a][b] = dl, (di, b)
            else:
                da[b], back[a][b] = ins, (a, ii)
    best, a, b = big, 0, 0
    for fa in ref.finals:
        for fb in hyp.finals:
            if dist[fa][fb] < best:
                best, a, b = dist[fa][fb], fa, fb
    pairs: List[Pair] = []
    while a > 0 or b > 0:
        pa, pb = back[a][b]
        if pa == a:
            hw = hyp.words[b]
            if hw.text != NULL:
                pairs.append(("C", None, hw) if hw.opt else ("I", None, hw))
        elif pb == b:
            rw = ref.words[a]
            if rw.text != NULL:
                pairs.append(("C", rw, None) if rw.opt else ("D", rw, None))
        else:
            rw, hw = ref.words[a], hyp.words[b]
            if not (rw.text == NULL and hw.text == NULL):
                pairs.append(("C" if words_equal(rw, hw) else "S", rw, hw))
        a, b = pa, pb
    pairs.reverse()
    return pairs


@dataclass
class Counts:
    """Error counts summed over a corpus. ``wrd`` = reference words = cor + sub + dele."""
    snt: int = 0
    cor: int = 0
    sub: int = 0
    dele: int = 0
    ins: int = 0
    serr: int = 0

    @property
    def wrd(self) -> int:
        return self.cor + self.sub + self.dele

    @property
    def err(self) -> int:
        return self.sub + self.dele + self.ins

    @property
    def wer(self) -> float:
        """Word error rate in percent; 0 when there are no reference words, as sclite prints it (the
        insertions still show in ``ins`` and in the reports' counts)."""
        return 100.0 * self.err / self.wrd if self.wrd else 0.0

    def add_pairs(self, pairs: Sequence[Pair]) -> "Counts":
        """Add one sentence's alignment."""
        ops = [p[0] for p in pairs]
        self.snt += 1
        self.cor += ops.count("C")
        self.sub += ops.count("S")
        self.dele += ops.count("D")
        self.ins += ops.count("I")
        self.serr += any(o != "C" for o in ops)
        return self

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(*(getattr(self, f.name) + getattr(other, f.name)
                        for f in dataclasses.fields(self)))

    def fractions(self) -> Tuple[Tuple[int, int], ...]:
        """(Corr, Sub, Del, Ins, Err, S.Err) as (numerator, denominator) pairs; a zero denominator
        (no reference words, no sentences) stands for 0%, as in sclite."""
        w, s = self.wrd, self.snt
        return ((self.cor, w), (self.sub, w), (self.dele, w), (self.ins, w), (self.err, w), (self.serr, s))

    def percentages(self) -> Tuple[float, float, float, float, float, float]:
        """(Corr, Sub, Del, Ins, Err, S.Err) in percent (see :meth:`fractions`)."""
        return tuple(100.0 * n / d if d else 0.0 for n, d in self.fractions())

    def percent_texts(self) -> Tuple[str, ...]:
        """:meth:`percentages` to one decimal exactly as sclite prints them (:func:`percent_text`)."""
        return tuple(percent_text(n, d) for n, d in self.fractions())

    def line(self, name: str, label: str = "%WER") -> str:
        """``%WER 13.5 | 4459 42989 | 88.2 8.0 3.8 1.7 13.5 48.2 | name`` (``label`` %CER: characters)."""
        c, s, d, i, e, se = self.percent_texts()
        return f"{label} {e} | {self.snt} {self.wrd} | {c} {s} {d} {i} {e} {se} | {name}"


def percent_text(num: int, den: int) -> str:
    """``100 * num / den`` to one decimal, halves rounded up, from the exact fraction: sclite prints
    1 error in 16 words as 6.3 where Python's ``f"{6.25:.1f}"`` gives 6.2 (round half to even); checked
    against sclite 2.4.10 on 2,212 percentages. ``den == 0`` prints 0.0, as sclite does."""
    if den <= 0:
        return "0.0"
    tenths = (2000 * num + den) // (2 * den)  # floor(1000 num / den + 1/2)
    return f"{tenths // 10}.{tenths % 10}"


def align_words(ref: Sequence[str], hyp: Sequence[str], case_sensitive: bool = False) -> List[Pair]:
    """Align two plain word lists (no optional words, fragments or alternations); the words are
    compared, and kept in the pairs, case-folded (:func:`fold_case`) unless ``case_sensitive``."""
    fold = (lambda w: w) if case_sensitive else fold_case
    return align(chain([Word(fold(w)) for w in ref]), chain([Word(fold(w)) for w in hyp]))


def count_words(ref: Sequence[str], hyp: Sequence[str], case_sensitive: bool = False) -> Counts:
    """Counts for one sentence pair: the pure core of text-mode scoring."""
    return Counts().add_pairs(align_words(ref, hyp, case_sensitive))
