"""CTM hypotheses: ``<file> <chan> <begin> <dur> <word> [<conf>]`` lines, ``;;`` comments.

A CTM *item* is a word with times, or an alternation (sclite's ``<ALT_BEGIN>`` / ``<ALT>`` /
``<ALT_END>`` marker lines, as csrfilt writes them when a GLM rule maps a hyp word to ``{ A / B C }``).
Text hypotheses (Kaldi ``text`` + ``segments`` + ``reco2file_and_channel``) become CTM words with the
segment's time spread evenly over its words, as ESPnet does.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from asrtrain.data.table import iter_lines, read_table
from asrtrain.errors import AsrError
from asrtrain.score.glm import RuleSet
from asrtrain.score.stm import tokenize
from asrtrain.score.wer import split_ascii

# One timed token: (word, begin, dur)
Timed = Tuple[str, float, float]


@dataclass
class CtmItem:
    """A word (``alts`` is None) or an alternation (``alts``: list of alternatives of timed words)."""
    file: str
    chan: str
    begin: float
    dur: float
    word: str = ""
    alts: Optional[List[List[Timed]]] = None
    line: int = 0

    @property
    def mid(self) -> float:
        """Midpoint used for segment assignment; for an alternation sclite takes the largest word mid."""
        if self.alts is None:
            return self.begin + self.dur / 2.0
        mids = [b + d / 2.0 for alt in self.alts for _, b, d in alt]
        return max(mids) if mids else 0.0


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def read_ctm(path: Union[str, Path]) -> List[CtmItem]:
    """Parse a CTM file (alternation markers included) into items, in file order."""
    items: List[CtmItem] = []
    alt: Optional[CtmItem] = None
    for no, line in iter_lines(path):
        if line.lstrip().startswith(";;"):
            continue
        f = split_ascii(line)
        if len(f) < 5:
            raise AsrError(f"expected '<file> <chan> <begin> <dur> <word> [<conf>]', got {line!r}",
                           path, no, fix="CTM lines have at least five fields")
        word = f[4]
        up = word.upper()
        if up == "<ALT_BEGIN>":
            alt = CtmItem(f[0], f[1], 0.0, 0.0, alts=[[]], line=no)
            continue
        if up == "<ALT>":
            if alt is None:
                raise AsrError("<ALT> outside <ALT_BEGIN> ... <ALT_END>", path, no, fix="balance the markers")
            alt.alts.append([])
            continue
        if up == "<ALT_END>":
            if alt is None:
                raise AsrError("<ALT_END> without <ALT_BEGIN>", path, no, fix="balance the markers")
            words = [w for a in alt.alts for w in a]
            if words:
                alt.begin = min(b for _, b, _ in words)
                alt.dur = max(b + d for _, b, d in words) - alt.begin
            items.append(alt)
            alt = None
            continue
        try:
            begin, dur = float(f[2]), float(f[3])
        except ValueError:
            raise AsrError(f"begin/duration '{f[2]}' '{f[3]}' are not numbers", path, no,
                           fix="fields 3 and 4 are begin time and duration in seconds") from None
        if not (math.isfinite(begin) and math.isfinite(dur)) or begin < 0 or dur < 0:
            raise AsrError(f"begin/duration '{f[2]}' '{f[3]}' must be finite and not negative", path, no,
                           fix="fields 3 and 4 are begin time and duration in seconds")
        if len(f) > 6 or (len(f) == 6 and not _is_number(f[5])):
            # sclite reads five fields and ignores the rest, but hubscr's csrfilt.sh filters every field
            # after the word as words: the same file scores two ways. A malformed line is refused.
            raise AsrError(f"expected '<file> <chan> <begin> <dur> <word> [<conf>]' with a numeric "
                           f"confidence, got {line!r}", path, no,
                           fix="one word per line; the sixth field, if any, is a confidence such as 0.93")
        if alt is not None:
            if word != "@":
                alt.alts[-1].append((word, begin, dur))
        else:
            items.append(CtmItem(f[0], f[1], begin, dur, word, line=no))
    if alt is not None:
        raise AsrError("<ALT_BEGIN> without <ALT_END>", path, fix="close the alternation")
    return items


def text_to_ctm(text_path: Union[str, Path], segments_path: Union[str, Path],
                r2fc_path: Union[str, Path]) -> List[CtmItem]:
    """Kaldi text hypotheses to CTM words, each segment's duration shared evenly by its words."""
    text = read_table(text_path, min_fields=1)
    segs = read_table(segments_path)
    r2fc = read_table(r2fc_path)
    items: List[CtmItem] = []
    for utt, words in text.items():
        if utt not in segs:
            raise AsrError(f"utterance '{utt}' has no entry in {segments_path}", text_path,
                           fix="give the segments file of the decoded data dir")
        reco, begin, end = _segment(segs[utt], utt, segments_path)
        if reco not in r2fc:
            raise AsrError(f"recording '{reco}' has no entry in {r2fc_path}", segments_path,
                           fix="give the reco2file_and_channel of the decoded data dir")
        rf = split_ascii(r2fc[reco])
        if len(rf) != 2:
            raise AsrError(f"expected '<reco> <file> <channel>', got '{reco} {r2fc[reco]}'", r2fc_path,
                           fix="reco2file_and_channel lines have three fields")
        ws = split_ascii(words)
        dur = (end - begin) / len(ws) if ws else 0.0
        for i, w in enumerate(ws):
            items.append(CtmItem(rf[0], rf[1], begin + i * dur, dur, w))
    return items


def _segment(value: str, utt: str, path) -> Tuple[str, float, float]:
    """A Kaldi segments value ``<rec-id> <start> <end>`` -> (rec, start, end), checked."""
    from asrtrain.data.datadir import parse_segment

    try:
        seg = parse_segment(value)
        if seg.end < 0:
            raise ValueError("end -1 (to the recording's end) gives no time to place the words at")
    except ValueError as err:
        line = next((no for no, text in iter_lines(path) if split_ascii(text)[0] == utt), None)
        raise AsrError(f"malformed segment of '{utt}': {err}", path, line,
                       fix="give the segments file of the decoded data dir") from None
    return seg.rec, seg.start, seg.end


def _split_timed(words: List[str], begin: float, dur: float) -> List[Timed]:
    step = dur / len(words) if words else 0.0
    return [(w, begin + i * step, step) for i, w in enumerate(words)]


def _first_path(items: List) -> List[str]:
    """Words of ``items`` taking the first alternative of every alternation."""
    out: List[str] = []
    for x in items:
        out.extend([x] if isinstance(x, str) else _first_path(x[0] if x else []))
    return out


def filter_ctm(items: List[CtmItem], rules: Optional[RuleSet], drop=None,
               delete_hyphens: bool = True) -> List[CtmItem]:
    """Apply GLM rules to each CTM word (csrfilt ``-i ctm``) and drop tokens where ``drop(word)``.

    A word rewritten to several words shares its duration evenly; a rewrite to ``{ A / B C }`` becomes
    an alternation item. Existing alternations are filtered word by word.
    """
    out: List[CtmItem] = []
    seen: Dict[str, List] = {}  # words repeat: filter each distinct word once

    def words_of(word: str) -> List:
        if word not in seen:
            seen[word] = tokenize(word if rules is None else rules.filter_text(word, delete_hyphens))
        return seen[word]

    def keep(tokens: List[str]) -> List[str]:
        return [t for t in tokens if not (drop and drop(t))]

    for it in items:
        if it.alts is not None:
            alts = []
            for alt in it.alts:
                new: List[Timed] = []
                for w, b, d in alt:
                    flat = _first_path(words_of(w))  # sclite cannot nest CTM alternations
                    new.extend(_split_timed(keep(flat), b, d))
                alts.append(new)
            out.append(CtmItem(it.file, it.chan, it.begin, it.dur, alts=alts, line=it.line))
            continue
        toks = words_of(it.word)
        if len(toks) == 1 and isinstance(toks[0], str):
            if keep(toks):
                out.append(CtmItem(it.file, it.chan, it.begin, it.dur, toks[0], line=it.line))
            continue
        if any(not isinstance(t, str) for t in toks):
            if len(toks) != 1:
                raise AsrError(f"GLM output '{toks}' mixes words and an alternation for one CTM word",
                               None, it.line, fix="write the rule's TO side as one alternation")
            alts = [_split_timed(keep(_first_path(a)), it.begin, it.dur) for a in toks[0]]
            out.append(CtmItem(it.file, it.chan, it.begin, it.dur, alts=alts, line=it.line))
            continue
        for w, b, d in _split_timed(keep(toks), it.begin, it.dur):
            out.append(CtmItem(it.file, it.chan, b, d, w, line=it.line))
    return out


def group_by_channel(items: List[CtmItem]) -> Dict[Tuple[str, str], List[CtmItem]]:
    """Items per (file, channel), sorted by begin time (stable), as hubscr sorts the ctm."""
    out: Dict[Tuple[str, str], List[CtmItem]] = {}
    for it in items:
        out.setdefault((it.file, it.chan), []).append(it)
    for key in out:
        out[key].sort(key=lambda x: x.begin)
    return out
