"""Reports built from alignments and counts, and text-mode scoring of Kaldi ``text`` files.

Outputs in ``out_dir``:
  - ``NAME.pra``: per utterance ``id:``, ``Scores: (#C #S #D #I)``, ``REF:``/``HYP:``/``Eval:`` lines
    as sclite's pralign prints them: the words as compared, ``***`` for a gap; case-insensitive
    (sclite's default) correct words in lower case and errors in upper case (A-Z only, as sclite);
    case-sensitive (``sclite -s``) every word as written, under an ``Attributes: Case_sensitve`` line
    (sclite's spelling, so tools that read sclite's .pra read ours).
  - ``NAME.sys``: per-speaker totals (counts and percentages) and the Sum line.
  - ``wer_summary``: the ``%WER`` line(s), one per scored name: a rerun replaces its own lines and keeps
    the other names' (decode dirs scored into one OUT_DIR each keep their line, as Kaldi's wer_* files).

Text mode NAME: ``--name``, else the decode dir's name for a hypothesis file called ``text``
(``exp/m/decode_test/text`` -> ``decode_test``, so decode dirs scored into one OUT_DIR do not overwrite
each other), else the hypothesis file's name.

Text mode speaker of an utterance: ``--utt2spk`` if given, else the ``utt2spk`` beside REF (a data dir's
``text``) when it names every reference utterance, else sclite's ``-i swb`` rule: the id's prefix before
the first ``-``, or if there is none before the first ``_``, or the whole id.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from asrtrain.data.table import iter_lines, read_table
from asrtrain.limits import check_alignable
from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_open, atomic_write_text
from asrtrain.score.wer import Counts, Pair, align_words, ascii_upper, fold_case, split_ascii

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


def pra_lines(pairs: Sequence[Pair], case_sensitive: bool = False) -> Tuple[str, str, str]:
    """REF/HYP/Eval strings with columns padded to the wider word; case marks correct words and errors
    unless the words were compared ``case_sensitive`` (then they are shown as written, as sclite -s)."""
    refs, hyps, evals = [], [], []
    for op, r, h in pairs:
        rs = r.show if r is not None else ""
        hs = h.show if h is not None and h.text else ""
        if not case_sensitive:
            mark = fold_case if op == "C" else ascii_upper
            rs, hs = mark(rs), mark(hs)
        if op == "I":
            rs = "*" * len(hs)
        if op == "D":
            hs = "*" * len(rs)
        width = max(len(rs), len(hs))
        refs.append(rs.ljust(width))
        hyps.append(hs.ljust(width))
        evals.append(("" if op == "C" else op).ljust(width))
    return " ".join(refs), " ".join(hyps), " ".join(evals)


def write_pra(path: Path, scored: Iterable[Scored], title: str = "", case_sensitive: bool = False) -> None:
    """Per-utterance alignments, one block per sentence."""
    with atomic_open(path) as fh:
        if title:
            fh.write(f"System name: {title}\n\n")
        for s in scored:
            c = s.counts
            ref, hyp, ev = pra_lines(s.pairs, case_sensitive)
            fh.write(f"id: ({s.utt})\n")
            fh.write(f"Speaker: {s.spk}\n")
            if s.note:
                fh.write(f"Note: {s.note}\n")
            fh.write(f"Scores: (#C #S #D #I) {c.cor} {c.sub} {c.dele} {c.ins}\n")
            if case_sensitive:
                fh.write("Attributes: Case_sensitve\n")
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
        return (f"| {name:<14} | {c.snt:>5} {c.wrd:>6} | {c.cor:>6} {c.sub:>5} {c.dele:>5} {c.ins:>5} "
                f"{c.err:>5} {c.serr:>6} | " + " ".join(f"{x:>5}" for x in c.percent_texts()) + " |")

    lines = [title, rule, head, rule]
    lines += [row(spk, c) for spk, c in groups.items()]
    lines += [rule, row("Sum", total), rule]
    return "\n".join(lines) + "\n"


def _read_text(path: Union[str, Path]) -> Dict[str, List[str]]:
    """{utterance id: words} of a REF or HYP ``text`` file; an id given twice is an error."""
    out: Dict[str, List[str]] = {}
    for no, line in iter_lines(path):
        key, *words = split_ascii(line)
        if key in out:
            raise AsrError(f"duplicate id '{key}'", path, no,
                           fix="keep one line per utterance (a decode writes each once; for a data dir's "
                               "text, asrtrain data fix DIR keeps the first)")
        out[key] = words
    return out


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
               utt2spk: Optional[Union[str, Path]] = None, case_sensitive: bool = False) -> List[Scored]:
    """Align every REF utterance of two Kaldi ``text`` files; per-utterance results sorted by id.

    Words are compared case-insensitively unless ``case_sensitive`` (:func:`asrtrain.score.wer.fold_case`).
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
        check_alignable(len(ref[utt]), len(hyp.get(utt, [])), f"utterance '{utt}'", hyp_path)
        pairs = align_words(ref[utt], hyp.get(utt, []), case_sensitive)
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
               utt2spk: Optional[Union[str, Path]] = None, case_sensitive: bool = False) -> Counts:
    """Score a Kaldi ``text`` hypothesis against a reference: counts summed over the corpus.

    Writes NAME.pra, NAME.sys and wer_summary to ``out_dir`` when given (NAME: :func:`default_text_name`
    unless given; speakers: ``utt2spk``, else :func:`utt2spk_beside`). See :func:`align_text` for
    missing and extra utterances and for ``case_sensitive``.
    """
    if utt2spk is None and out_dir is not None:  # speakers only show in the reports
        utt2spk = utt2spk_beside(ref_path)
    scored = align_text(ref_path, hyp_path, utt2spk, case_sensitive)
    total = total_of(scored)
    if out_dir is not None:
        name = name or default_text_name(hyp_path)
        write_reports(Path(out_dir), name, scored, {name: total}, case_sensitive)
    return total


def default_text_name(hyp_path: Union[str, Path]) -> str:
    """The report name of a text hypothesis: its decode dir's name for a file called ``text``
    (``exp/m/decode_test/text`` -> ``decode_test``), else its file name."""
    p = Path(hyp_path)
    parent = p.resolve().parent.name if p.name == "text" else ""
    return parent or p.name


def utt2spk_beside(ref_path: Union[str, Path]) -> Optional[Path]:
    """The ``utt2spk`` in REF's directory (REF is a data dir's ``text``) when it names a speaker for every
    reference utterance; None (and a warning when the file exists) otherwise."""
    path = Path(ref_path).parent / "utt2spk"
    if not path.is_file():
        return None
    try:
        spk = read_table(path)
        utts = read_table(ref_path, min_fields=1)
    except AsrError as err:  # a malformed file beside REF: say so, and fall back to the id prefix
        log.warning("not using %s for the speakers: %s", path, err)
        return None
    missing = [u for u in utts if u not in spk]
    if missing:
        log.warning("not using %s for the speakers: it has no speaker for '%s' (%d utterances); "
                    "speakers are the id prefixes (pass --utt2spk to choose)", path, missing[0], len(missing))
        return None
    log.info("speakers from %s", path)
    return path


def check_report_name(name: Optional[str]) -> None:
    """Refuse a report NAME that is not a plain file name: NAME.pra and NAME.sys must land in OUT_DIR."""
    if name and ("/" in name or os.sep in name or name in (".", "..")):
        raise AsrError(f"--name {name!r} must be a plain file name (no path separator or '..'): "
                       "the reports are written as OUT_DIR/NAME.pra and NAME.sys", fix="e.g. --name test_wer")


def write_reports(out_dir: Path, name: str, scored: List[Scored], lines: Dict[str, Counts],
                  case_sensitive: bool = False) -> None:
    """Write NAME.pra, NAME.sys (per-speaker totals) and wer_summary (one %WER line per entry)."""
    check_report_name(name)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_pra(out_dir / f"{name}.pra", scored, name, case_sensitive)
    atomic_write_text(out_dir / f"{name}.sys", sys_table(per_speaker(scored), total_of(scored), name))
    write_summary(out_dir / "wer_summary", {n: c.line(n) for n, c in lines.items()})
    log.info("wrote %s, %s.sys and wer_summary", out_dir / f"{name}.pra", name)


def write_summary(path: Path, lines: Dict[str, str]) -> None:
    """Write ``lines`` ({name: line ending ``| name``}) to the summary file ``path``, replacing the lines
    of those names and keeping the others' lines in their order."""
    kept: List[str] = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.strip() and line.rsplit("| ", 1)[-1] not in lines:
                kept.append(line)
    atomic_write_text(path, "".join(line + "\n" for line in kept + list(lines.values())))
