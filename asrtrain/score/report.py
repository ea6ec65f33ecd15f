"""Reports built from alignments and counts, and text-mode scoring of Kaldi ``text`` files.

Outputs in ``out_dir``:
  - ``NAME.pra``: per utterance ``id:``, ``Scores: (#C #S #D #I)``, ``REF:``/``HYP:``/``Eval:`` lines
    as sclite's pralign prints them (correct words lower case, errors upper case, ``***`` for a gap).
  - ``NAME.sys``: per-speaker totals (counts and percentages) and the Sum line.
  - ``wer_summary``: the ``%WER`` line(s).

Text mode speaker of an utterance: ``--utt2spk`` if given, else sclite's ``-i swb`` rule: the id's prefix
before the first ``-``, or if there is none before the first ``_``, or the whole id.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from asrtrain.data.table import read_table
from asrtrain.errors import AsrError
from asrtrain.io import atomic_open, atomic_write_text
from asrtrain.score.wer import Counts, Pair, align_words

log = logging.getLogger(__name__)


@dataclass
class Scored:
    """One scored sentence: its id, speaker, alignment and counts."""
    utt: str
    spk: str
    pairs: List[Pair]
    counts: Counts
    note: str = ""
    file: str = ""


def speaker_of(utt: str) -> str:
    """sclite's speaker rule for ids: prefix before the first '-', else before the first '_'."""
    for sep in ("-", "_"):
        if sep in utt:
            return utt.split(sep, 1)[0]
    return utt


def pra_lines(pairs: Sequence[Pair]) -> Tuple[str, str, str]:
    """REF/HYP/Eval strings with columns padded to the wider word."""
    refs, hyps, evals = [], [], []
    for op, r, h in pairs:
        rs = r.show if r is not None else ""
        hs = h.show if h is not None and h.text else ""
        if op == "C":
            rs, hs = rs.lower(), hs.lower()
        else:
            rs, hs = rs.upper(), hs.upper()
        if op == "I":
            rs = "*" * len(hs)
        if op == "D":
            hs = "*" * len(rs)
        width = max(len(rs), len(hs))
        refs.append(rs.ljust(width))
        hyps.append(hs.ljust(width))
        evals.append(("" if op == "C" else op).ljust(width))
    return " ".join(refs), " ".join(hyps), " ".join(evals)


def write_pra(path: Path, scored: Iterable[Scored], title: str = "") -> None:
    """Per-utterance alignments, one block per sentence."""
    with atomic_open(path) as fh:
        if title:
            fh.write(f"System name: {title}\n\n")
        for s in scored:
            c = s.counts
            ref, hyp, ev = pra_lines(s.pairs)
            fh.write(f"id: ({s.utt})\n")
            fh.write(f"Speaker: {s.spk}\n")
            if s.note:
                fh.write(f"Note: {s.note}\n")
            fh.write(f"Scores: (#C #S #D #I) {c.cor} {c.sub} {c.dele} {c.ins}\n")
            fh.write(f"REF:  {ref}\nHYP:  {hyp}\nEval: {ev}\n\n")


def per_speaker(scored: Iterable[Scored]) -> Dict[str, Counts]:
    out: Dict[str, Counts] = {}
    for s in scored:
        out[s.spk] = out.get(s.spk, Counts()) + s.counts
    return dict(sorted(out.items()))


def sys_table(groups: Dict[str, Counts], total: Counts, title: str) -> str:
    """A sclite-like .sys table: one row per speaker (counts, then percentages), then Sum."""
    head = (f"| {'SPKR':<14} | {'#Snt':>5} {'#Wrd':>6} | {'#Corr':>6} {'#Sub':>5} {'#Del':>5} "
            f"{'#Ins':>5} {'#Err':>5} {'#S.Err':>6} | {'Corr':>5} {'Sub':>5} {'Del':>5} {'Ins':>5} "
            f"{'Err':>5} {'S.Err':>5} |")
    rule = "|" + "-" * (len(head) - 2) + "|"

    def row(name: str, c: Counts) -> str:
        p = c.percentages()
        return (f"| {name:<14} | {c.snt:>5} {c.wrd:>6} | {c.cor:>6} {c.sub:>5} {c.dele:>5} {c.ins:>5} "
                f"{c.err:>5} {c.serr:>6} | " + " ".join(f"{x:>5.1f}" for x in p) + " |")

    lines = [title, rule, head, rule]
    lines += [row(spk, c) for spk, c in groups.items()]
    lines += [rule, row("Sum", total), rule]
    return "\n".join(lines) + "\n"


def _read_text(path: Union[str, Path]) -> Dict[str, List[str]]:
    return {k: v.split() for k, v in read_table(path, min_fields=1).items()}


def read_text_pair(ref_path: Union[str, Path], hyp_path: Union[str, Path]
                   ) -> Tuple[Dict[str, List[str]], Dict[str, List[str]]]:
    """The words of each utterance of a REF and a HYP ``text`` file; a HYP id not in REF is an error."""
    ref = _read_text(ref_path)
    if not ref:
        raise AsrError("the reference has no utterances: there is nothing to score", ref_path,
                       fix="score against the text of the decoded data dir")
    hyp = _read_text(hyp_path)
    extra = [u for u in hyp if u not in ref]
    if extra:
        raise AsrError(f"{len(extra)} hypothesis id(s) not in the reference, e.g. '{extra[0]}'",
                       hyp_path, fix=f"score against the matching reference text (not {ref_path})")
    return ref, hyp


def align_text(ref_path: Union[str, Path], hyp_path: Union[str, Path],
               utt2spk: Optional[Union[str, Path]] = None) -> List[Scored]:
    """Align every REF utterance of two Kaldi ``text`` files; per-utterance results sorted by id.

    An utterance missing from HYP is scored against nothing (all deletions), logged and marked in
    ``Scored.note``. A HYP id not in REF is an error.
    """
    ref, hyp = read_text_pair(ref_path, hyp_path)
    spk_map = read_table(utt2spk) if utt2spk else {}
    if utt2spk:
        nospk = [u for u in ref if u not in spk_map]
        if nospk:
            raise AsrError(f"utterance '{nospk[0]}' of the reference has no speaker", utt2spk,
                           fix="give the utt2spk of the scored data dir")
    missing = [u for u in ref if u not in hyp]
    if missing:
        log.warning("%d of %d reference utterances have no hypothesis (scored as deletions), e.g. %s",
                    len(missing), len(ref), missing[0])
    scored: List[Scored] = []
    for utt in sorted(ref):
        pairs = align_words(ref[utt], hyp.get(utt, []))
        scored.append(Scored(utt, spk_map.get(utt) or speaker_of(utt), pairs, Counts().add_pairs(pairs),
                             "missing from hypothesis" if utt not in hyp else ""))
    log.info("aligned %d utterances (%d missing from hypothesis)", len(scored), len(missing))
    return scored


def total_of(scored: Iterable[Scored]) -> Counts:
    total = Counts()
    for s in scored:
        total = total + s.counts
    return total


def score_text(ref_path: Union[str, Path], hyp_path: Union[str, Path], name: Optional[str] = None,
               out_dir: Optional[Union[str, Path]] = None,
               utt2spk: Optional[Union[str, Path]] = None) -> Counts:
    """Score a Kaldi ``text`` hypothesis against a reference: counts summed over the corpus.

    Writes NAME.pra, NAME.sys and wer_summary to ``out_dir`` when given (NAME defaults to the HYP
    file name). See :func:`align_text` for missing and extra utterances.
    """
    scored = align_text(ref_path, hyp_path, utt2spk)
    total = total_of(scored)
    name = name or Path(hyp_path).name
    if out_dir is not None:
        write_reports(Path(out_dir), name, scored, {name: total})
    return total


def check_report_name(name: Optional[str]) -> None:
    """Refuse a report NAME that is not a plain file name: NAME.pra and NAME.sys must land in OUT_DIR."""
    if name and ("/" in name or os.sep in name or name in (".", "..")):
        raise AsrError(f"--name {name!r} must be a plain file name (no path separator or '..'): "
                       "the reports are written as OUT_DIR/NAME.pra and NAME.sys", fix="e.g. --name test_wer")


def write_reports(out_dir: Path, name: str, scored: List[Scored], lines: Dict[str, Counts]) -> None:
    """Write NAME.pra, NAME.sys (per-speaker totals) and wer_summary (one %WER line per entry)."""
    check_report_name(name)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_pra(out_dir / f"{name}.pra", scored, name)
    atomic_write_text(out_dir / f"{name}.sys", sys_table(per_speaker(scored), total_of(scored), name))
    atomic_write_text(out_dir / "wer_summary", "".join(c.line(n) + "\n" for n, c in lines.items()))
