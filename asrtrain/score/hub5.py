"""Hub5 scoring: STM reference, CTM (or text) hypothesis, GLM; counts as ``hubscr``/``sclite -F -D``.

Pipeline (each step as NIST's tools do it, so counts equal real sclite's on the same inputs):
  1. GLM filtering of the STM transcripts and of every CTM word (:mod:`asrtrain.score.glm`).
  2. Non-speech filtering: tokens ``[...]``, ``<...>``, ``((`` and ``))`` are dropped from both sides.
     Hesitations (``%HESITATION`` after the GLM) are never errors, as in Kaldi's Switchboard scoring:
     in the reference a bare one becomes optional ``(%HESITATION)``, in the hypothesis they are dropped.
     Pass ``hesitations="keep"`` to score them as ordinary words.
  3. Time-mediated assignment, as sclite's ``segment_hyp_for_utt``: per file and channel, segments in
     time order; a segment takes the following hyp words while their midpoint is before its end (so a
     word before the first segment or in the gap before a segment belongs to that segment); the last
     segment of the channel takes all remaining words. Words assigned to an
     ``IGNORE_TIME_SEGMENT_IN_SCORING`` segment are dropped with it.
  4. Alignment with sclite's costs, case-insensitive as sclite by default (``case_sensitive=True``:
     as ``sclite -s``; the GLM has already upper-cased a-z on both sides unless it says
     ``case_sensitive = 'T'``), ``(w)`` optional (``-D``), ``abc-`` a fragment (``-F``),
     ``{ a / b / @ }`` alternations on either side (:mod:`asrtrain.score.wer`).
  5. Subsets by file prefix: ``sw_`` -> ``swbd`` (Switchboard), ``en_`` -> ``callhm`` (CallHome);
     ``all`` is every scored segment. Lines are named ``"<name> swbd"``, ``"<name> callhm"``,
     ``"<name> all"``; a subset line is printed only when that subset has segments.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from asrtrain.errors import AsrError
from asrtrain.score.ctm import CtmItem, filter_ctm, group_by_channel, read_ctm, text_to_ctm
from asrtrain.score.glm import load_rules
from asrtrain.score.report import Scored, write_reports
from asrtrain.score.stm import Segment, read_stm, tokenize
from asrtrain.limits import check_alignable
from asrtrain.score.wer import Counts, Net, align, build_net, fold_case, make_word

log = logging.getLogger(__name__)

SUBSETS = (("swbd", "sw_"), ("callhm", "en_"))
HESITATION = "%HESITATION"
_NON_SPEECH = re.compile(r"^(\[.*\]|<.*>|\(\(|\)\))$")

PathLike = Union[str, Path]


def is_non_speech(token: str) -> bool:
    """Noise/non-speech markup dropped before scoring: ``[laughter]``, ``<unk>``, ``((``, ``))``."""
    return bool(_NON_SPEECH.match(token))


def clean_ref_items(items: Sequence, hesitations: str = "optional") -> List:
    """Drop non-speech tokens; make bare hesitations optional (unless ``hesitations == "keep"``)."""
    def fix(tok: str) -> Optional[str]:
        if is_non_speech(tok):
            return None
        if hesitations == "optional" and tok.upper() == HESITATION:
            return f"({tok})"
        return tok

    def walk(seq: Sequence) -> List:
        out: List = []
        for it in seq:
            if isinstance(it, str):
                t = fix(it)
                if t is not None:
                    out.append(t)
            else:
                out.append([walk(alt) for alt in it])
        return out

    return walk(items)


def hyp_drop(hesitations: str = "optional"):
    """Predicate for hypothesis tokens removed before scoring."""
    def drop(tok: str) -> bool:
        return is_non_speech(tok) or (hesitations == "optional" and tok.upper() == HESITATION)
    return drop


def assign_to_segments(segs: List[Segment], items: List[CtmItem]) -> List[List[CtmItem]]:
    """sclite's ``segment_hyp_for_utt`` for one channel: hyp items per segment (segs in time order)."""
    out: List[List[CtmItem]] = []
    i = 0
    for k, seg in enumerate(segs):
        if k == len(segs) - 1:
            out.append(items[i:])
            break
        j = i
        while j < len(items) and items[j].mid < seg.end:
            j += 1
        out.append(items[i:j])
        i = j
    return out


def _mk(token: str):
    return make_word(fold_case(token), opt_del=True, frag_corr=True)


def _mk_cased(token: str):
    return make_word(token, opt_del=True, frag_corr=True)


def hyp_net(items: List[CtmItem], case_sensitive: bool = False) -> Net:
    """Hypothesis network from CTM items (alternations become parallel branches)."""
    seq: List = []
    for it in items:
        if it.alts is None:
            seq.append(it.word)
        else:
            seq.append([[w for w, _, _ in alt] for alt in it.alts])
    return build_net(seq, make=_mk_cased if case_sensitive else _mk)


def subset_of(file: str) -> Optional[str]:
    for name, prefix in SUBSETS:
        if file.lower().startswith(prefix):
            return name
    return None


def align_hub5(stm: PathLike, ctm: Optional[PathLike] = None, glm: Optional[PathLike] = None,
               hyp_items: Optional[List[CtmItem]] = None, hesitations: str = "optional",
               delete_hyphens: bool = True, case_sensitive: bool = False) -> List[Scored]:
    """Steps 1-4 of the module docstring: one :class:`Scored` per scored STM segment.

    The hypothesis is a CTM path or pre-built ``hyp_items``; ``glm=None`` uses the shipped
    ``asrtrain/resources/hub5.glm``.
    """
    if hesitations not in ("optional", "keep"):
        raise AsrError(f"hesitations must be 'optional' or 'keep', not '{hesitations}'")
    if hyp_items is None:
        if ctm is None:
            raise AsrError("no hypothesis given", fix="pass a CTM file or text hypotheses")
        hyp_items = read_ctm(ctm)
    segs = read_stm(stm)
    ref_rules = load_rules(glm, "stm", "ref")
    hyp_rules = load_rules(glm, "ctm", "hyp")
    n_hyp_in = len(hyp_items)
    hyp_items = filter_ctm(hyp_items, hyp_rules, hyp_drop(hesitations), delete_hyphens)

    by_chan: Dict[Tuple[str, str], List[Segment]] = {}
    for seg in segs:
        by_chan.setdefault((seg.file.lower(), seg.chan.lower()), []).append(seg)
    hyps = {(f.lower(), c.lower()): v for (f, c), v in group_by_channel(hyp_items).items()}
    extra = sorted(set(hyps) - set(by_chan))
    if extra:
        f, c = extra[0]
        raise AsrError(f"hypothesis has words for file '{f}' channel '{c}', which the reference lacks "
                       f"({len(extra)} such file/channel pairs)", ctm,
                       fix="score against the STM of the same test set")

    scored: List[Scored] = []
    n_ignored = n_dropped = 0
    spk_count: Dict[str, int] = {}
    for key in sorted(by_chan):
        chan_segs = sorted(by_chan[key], key=lambda s: s.begin)
        for seg, items in zip(chan_segs, assign_to_segments(chan_segs, hyps.get(key, []))):
            if seg.ignored:
                n_ignored += 1
                n_dropped += len(items)
                continue
            text = ref_rules.filter_text(seg.text, delete_hyphens)
            ref = build_net(clean_ref_items(tokenize(text, str(stm), seg.line), hesitations),
                            make=_mk_cased if case_sensitive else _mk)
            hyp = hyp_net(items, case_sensitive)
            check_alignable(len(ref.words), len(hyp.words), "segment", stm, seg.line)
            pairs = align(ref, hyp)
            spk = seg.spk.lower()
            n = spk_count.get(spk, 0)
            spk_count[spk] = n + 1
            scored.append(Scored(f"{spk}-{n:03d}", spk, pairs, Counts().add_pairs(pairs),
                                 f"{seg.file} {seg.chan} {seg.begin:.2f}-{seg.end:.2f}", seg.file))
    log.info("scored %d segments (%d ignored, %d hyp words in them dropped) from %d hyp items",
             len(scored), n_ignored, n_dropped, n_hyp_in)
    return scored


def subset_totals(scored: List[Scored]) -> Dict[str, Counts]:
    """{"swbd", "callhm" (only when they have segments), "all" (always)}: summed counts."""
    totals: Dict[str, Counts] = {}
    for s in scored:
        for sub in (subset_of(s.file), "all"):
            if sub is not None:
                totals[sub] = totals.get(sub, Counts()) + s.counts
    result = {sub: totals[sub] for sub in [s for s, _ in SUBSETS] if sub in totals}
    result["all"] = totals.get("all", Counts())
    return result


def score_hub5(stm: PathLike, ctm: Optional[PathLike] = None, glm: Optional[PathLike] = None,
               hyp_items: Optional[List[CtmItem]] = None, name: Optional[str] = None,
               out_dir: Optional[PathLike] = None, hesitations: str = "optional",
               delete_hyphens: bool = True, case_sensitive: bool = False) -> Dict[str, Counts]:
    """Score a CTM against an STM with GLM filtering: {"swbd", "callhm", "all"} -> Counts.

    Writes NAME.pra, NAME.sys and wer_summary (lines named ``"<name> <subset>"``) to ``out_dir``
    when given; NAME defaults to the STM's data dir name (for ``.../eval2000/stm``) or file stem.
    """
    scored = align_hub5(stm, ctm, glm, hyp_items, hesitations, delete_hyphens, case_sensitive)
    result = subset_totals(scored)
    if out_dir is not None:
        name = name or default_name(stm)
        write_reports(Path(out_dir), name, scored, {f"{name} {k}": v for k, v in result.items()},
                      case_sensitive)
    return result


def score_hub5_text(stm: PathLike, hyp_text: PathLike, segments: PathLike, reco2file_and_channel: PathLike,
                    **kwargs) -> Dict[str, Counts]:
    """Like :func:`score_hub5` for a Kaldi ``text`` hypothesis (times spread evenly per segment)."""
    items = text_to_ctm(hyp_text, segments, reco2file_and_channel)
    return score_hub5(stm, hyp_items=items, **kwargs)


def default_name(stm: PathLike) -> str:
    p = Path(stm)
    return p.parent.name if p.stem == "stm" and p.parent.name else p.stem
