"""LDC GLM rewrite rules, applied as NIST's ``csrfilt.sh -dh`` (with ``rfilter1``) applies them.

GLM format: header lines ``* name "..."``, ``* desc ...``, ``* format = 'NIST1'``,
``* case_sensitive = 'F'`` ...; ``;;`` comments; ``;; INPUT_DEPENDENT_APPLICATION = "<regexp>"`` starts a
section that applies only when the regexp matches the input type (``stm``/``ctm``) or purpose
(``ref``/``hyp``); rules ``FROM => TO / LEFT __ RIGHT`` where ``[ ]`` in a context is a word boundary
and TO may be an alternation ``{ A / B C }``.

The filter, as csrfilt does it on one transcript (a whole STM text, or one CTM word):
  1. upper-case a-z; pad parentheses ``(UH)`` -> ``( UH )``; surround with spaces;
  2. rfilter1: scan left to right; at each position the first rule in file order whose FROM matches
     there and whose contexts match the input around it is applied; scanning resumes after FROM
     (output is never rewritten again);
  3. ``-dh``: a hyphen between two word characters becomes a space (fragments ``abc-`` stay);
  4. an optional group ``( A B )`` becomes ``( A ) ( B )``; parentheses are closed up again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from asrtrain.data.table import iter_lines
from asrtrain.errors import AsrError
from asrtrain.score.wer import split_ascii

DEFAULT_GLM = Path(__file__).resolve().parent.parent / "resources" / "hub5.glm"

_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@dataclass(frozen=True)
class Rule:
    """One rewrite: ``src`` -> ``dst`` when ``left`` precedes and ``right`` follows (strings)."""
    src: str
    dst: str
    left: str
    right: str
    line: int


def _context(text: str) -> str:
    text = " ".join(split_ascii(text))
    text = re.sub(r"\[\s*\]", " ", text)
    return re.sub(" +", " ", text)


@dataclass
class Glm:
    """Parsed GLM: rules in file order, each tagged with the applicability regexp in force."""
    rules: List[Tuple[Optional[str], Rule]]
    case_sensitive: bool = False
    path: str = ""

    def select(self, input_type: str, purpose: str) -> "RuleSet":
        keep = [r for cond, r in self.rules
                if cond is None or re.search(cond, input_type) or re.search(cond, purpose)]
        return RuleSet(keep, self.case_sensitive)


def parse_glm(path: Union[str, Path]) -> Glm:
    """Read an LDC GLM file; a malformed rule is an AsrError naming its line."""
    rules: List[Tuple[Optional[str], Rule]] = []
    cond: Optional[str] = None
    case_sensitive = False
    for no, raw in iter_lines(path):
        line = raw.strip()
        m = re.match(r';;\s+INPUT_DEPENDENT_APPLICATION\s*=\s*"([^"]*)"', line)
        if m:
            cond = m.group(1).lower()
            try:
                re.compile(cond)
            except (re.error, RecursionError, OverflowError) as err:
                raise AsrError(f"INPUT_DEPENDENT_APPLICATION is not a valid regular expression ({err})",
                               path, no, fix="correct the regular expression between the quotes") from None
            continue
        if line.startswith(";;") or not line:
            continue
        if line.startswith("*"):
            m = re.match(r"\*\s*case_sensitive\s*=\s*'(\w)'", line)
            if m:
                case_sensitive = m.group(1).upper() == "T"
            continue
        line = line.split(";;", 1)[0].strip()
        if "=>" not in line:
            raise AsrError(f"not a rule (expected 'FROM => TO / LEFT __ RIGHT'): {raw!r}", path, no,
                           fix="fix the rule or comment it out with ';;'")
        src, rhs = line.split("=>", 1)
        left = right = ""
        if "/" in rhs and "__" in rhs:
            # the context separator is the last '/' before '__' (TO may contain '/' in alternations)
            cut = rhs.rfind("/", 0, rhs.index("__"))
            rhs, ctx = rhs[:cut], rhs[cut + 1:]
            left, right = ctx.split("__", 1)
        src, dst = " ".join(split_ascii(src)), " ".join(split_ascii(rhs))
        if not src:
            raise AsrError(f"rule with an empty FROM side: {raw!r}", path, no, fix="give the text to replace")
        rules.append((cond, Rule(src, dst, _context(left), _context(right), no)))
    return Glm(rules, case_sensitive, str(path))


class RuleSet:
    """Rules for one input type and purpose, indexed by first character for speed."""

    def __init__(self, rules: List[Rule], case_sensitive: bool = False):
        self.case_sensitive = case_sensitive
        if not case_sensitive:
            rules = [Rule(r.src.translate(_UPPER), r.dst.translate(_UPPER), r.left.translate(_UPPER),
                          r.right.translate(_UPPER), r.line) for r in rules]
        self.by_char: Dict[str, List[Tuple[int, Rule]]] = {}
        for i, r in enumerate(rules):
            self.by_char.setdefault(r.src[0], []).append((i, r))

    def rewrite(self, s: str) -> str:
        """rfilter1 on a space-padded string."""
        out, i, n = [], 0, len(s)
        while i < n:
            hit = None
            for _, r in self.by_char.get(s[i], ()):
                if (s.startswith(r.src, i) and s.endswith(r.left, 0, i)
                        and s.startswith(r.right, i + len(r.src))):
                    hit = r
                    break
            if hit is None:
                out.append(s[i])
                i += 1
            else:
                out.append(hit.dst)
                i += len(hit.src)
        return "".join(out)

    def filter_text(self, text: str, delete_hyphens: bool = True) -> str:
        """csrfilt's transcript pipeline (see module docstring); returns the filtered transcript."""
        if not self.case_sensitive:
            text = text.translate(_UPPER)
        s = " " + " ".join(split_ascii(text.replace("(", "( ").replace(")", " )"))) + " "
        s = self.rewrite(s)
        if delete_hyphens:
            s = re.sub(r"([^( ])-(?=[^) ])", r"\1 ", s)
        pat = re.compile(r"(\(\s+[^()\s]+\s+)([^()\s]+)")
        while pat.search(s):
            s = pat.sub(r"\1) ( \2", s, count=1)
        s = re.sub(r"\(\s+", "(", s.strip())
        return re.sub(r"\s+\)", ")", s)


def load_rules(glm: Optional[Union[str, Path]], input_type: str, purpose: str) -> RuleSet:
    """Rules of ``glm`` (default: the shipped Hub5 GLM) for ``input_type`` and ``purpose``."""
    return parse_glm(glm or DEFAULT_GLM).select(input_type, purpose)
