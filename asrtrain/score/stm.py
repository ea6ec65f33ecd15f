"""NIST STM reference files and sclite's transcript syntax.

An STM line is ``<file> <chan> <speaker> <begin> <end> [<labels>] <transcript>``; lines starting
``;;`` are comments. In a transcript ``(word)`` is optionally deletable, ``abc-`` a fragment, and
``{ a / b c / @ }`` an alternation (``@`` is the empty alternative). A segment whose transcript contains
``IGNORE_TIME_SEGMENT_IN_SCORING`` is not scored, and hypothesis words that fall in it are dropped.
"""

from __future__ import annotations

import math

import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Union

from asrtrain.data.table import iter_lines
from asrtrain.errors import AsrError
from asrtrain.score.wer import split_ascii

IGNORE_TAGS = ("IGNORE_TIME_SEGMENT_IN_SCORING", "IGNORETIMESEGMENTINSCORING")


@dataclass
class Segment:
    """One STM line. ``text`` is the raw transcript; times in seconds."""
    file: str
    chan: str
    spk: str
    begin: float
    end: float
    labels: str
    text: str
    line: int = 0

    @property
    def ignored(self) -> bool:
        up = self.text.upper()
        return any(tag in up for tag in IGNORE_TAGS)


def tokenize(text: str, where: str = "", line: Optional[int] = None) -> List:
    """Split a transcript into items: a token string, or for ``{ ... }`` a list of alternatives,
    each a list of items (alternations may nest, as GLM rewrites inside an alternation produce).
    ``@`` alone is the empty alternative.

    Braces and slashes need not be space-separated (``{YES / YEAH}`` as csrfilt writes it).
    """
    spaced = re.sub(r"([{}])", r" \1 ", text)
    stack: List[List[List]] = []  # open alternations, each a list of alternatives
    items: List = []

    def target() -> List:
        return stack[-1][-1] if stack else items

    for tok in split_ascii(spaced):
        if tok == "{":
            stack.append([[]])
        elif tok == "}":
            if not stack:
                raise AsrError("'}' without a matching '{'", where or None, line,
                               fix="balance the braces of the alternation")
            alts = stack.pop()
            target().append([[w for w in alt if w != "@"] for alt in alts])
        elif stack:
            parts = tok.split("/")
            for i, part in enumerate(parts):
                if i > 0:
                    stack[-1].append([])
                if part:
                    target().append(part)
        else:
            items.append(tok)
    if stack:
        raise AsrError("'{' without a closing '}'", where or None, line,
                       fix="close the alternation with '}'")
    return items


def detokenize(items: Sequence) -> str:
    """Inverse of :func:`tokenize` (alternations written ``{ a / b / @ }``)."""
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        else:
            out.append("{ " + " / ".join(detokenize(a) if a else "@" for a in item) + " }")
    return " ".join(out)


def parse_stm_line(line: str, path: str = "", no: int = 0) -> Segment:
    parts = line.split(None, 5)
    if len(parts) < 5:
        raise AsrError(f"expected '<file> <chan> <speaker> <begin> <end> [<labels>] words', got {line!r}",
                       path or None, no, fix="give at least the five leading STM fields")
    file, chan, spk, b, e = parts[:5]
    rest = parts[5] if len(parts) > 5 else ""
    try:
        begin, end = float(b), float(e)
    except ValueError:
        raise AsrError(f"begin/end times '{b}' '{e}' are not numbers", path or None, no,
                       fix="fields 4 and 5 of an STM line are times in seconds") from None
    if not (math.isfinite(begin) and math.isfinite(end)) or begin < 0:
        raise AsrError(f"begin/end times '{b}' '{e}' must be finite and not negative", path or None, no,
                       fix="fields 4 and 5 of an STM line are times in seconds")
    if end < begin:
        raise AsrError(f"segment ends ({end}) before it begins ({begin})", path or None, no,
                       fix="swap or correct the times")
    labels = ""
    rest = rest.strip()
    if rest.startswith("<"):
        close = rest.find(">")
        if close < 0:
            raise AsrError("unterminated '<labels>' field", path or None, no, fix="close it with '>'")
        labels, rest = rest[:close + 1], rest[close + 1:].strip()
    return Segment(file, chan, spk, begin, end, labels, rest, no)


def read_stm(path: Union[str, Path]) -> List[Segment]:
    """All STM segments in file order (comments and blank lines skipped)."""
    segs = []
    for no, line in iter_lines(path):
        if line.lstrip().startswith(";;"):
            continue
        seg = parse_stm_line(line, str(path), no)
        tokenize(seg.text, str(path), no)  # syntax errors surface here, naming the line
        segs.append(seg)
    if not segs:
        raise AsrError("no segments", path, fix="is this an STM file?")
    return segs
