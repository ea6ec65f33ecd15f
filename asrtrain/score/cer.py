"""Character error rate of Kaldi ``text`` files, counted by jiwer.

Characters are those of the words joined by single spaces, the space included, as ESPnet scores CER
(its char tokens keep ``<space>``) and as ``jiwer.cer`` counts. The alignment is jiwer's unit-cost
Levenshtein (rapidfuzz): there are no optional words or fragments at the character level, so sclite's
weighted costs (:mod:`asrtrain.score.wer`) are not needed here. Case is folded as for the %WER (A-Z
only, sclite's default) unless ``case_sensitive``. Counts are summed over the corpus; an utterance
missing from HYP is scored against nothing; a HYP id not in REF is an error.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Union

from asrtrain.limits import check_alignable
from asrtrain.score.report import default_text_name, read_text_pair, write_summary
from asrtrain.score.wer import Counts, fold_case

log = logging.getLogger(__name__)


def char_counts(refs, hyps) -> Counts:
    """Counts over parallel lists of sentences (strings); ``wrd`` is the number of reference characters."""
    import jiwer
    if not refs:
        return Counts()
    out = jiwer.process_characters(list(refs), list(hyps))
    serr = sum(any(chunk.type != "equal" for chunk in sent) for sent in out.alignments)
    return Counts(snt=len(refs), cor=out.hits, sub=out.substitutions, dele=out.deletions, ins=out.insertions,
                  serr=serr)


def score_cer(ref_path: Union[str, Path], hyp_path: Union[str, Path], name: Optional[str] = None,
              out_dir: Optional[Union[str, Path]] = None, case_sensitive: bool = False) -> Counts:
    """CER counts of HYP against REF; writes ``out_dir/cer_summary`` (the ``%CER`` line) when given."""
    ref, hyp = read_text_pair(ref_path, hyp_path)
    utts = sorted(ref)
    empty = [u for u in utts if not ref[u]]
    if empty:  # jiwer refuses empty references; a data dir's text never has one (validate says so)
        log.warning("CER: %d reference utterance(s) are empty and left out, e.g. %s", len(empty), empty[0])
        utts = [u for u in utts if ref[u]]
    fold = (lambda t: t) if case_sensitive else fold_case
    for u in utts:
        check_alignable(len(" ".join(ref[u])), len(" ".join(hyp.get(u, []))), f"utterance '{u}'", hyp_path,
                        unit="characters")
    total = char_counts([fold(" ".join(ref[u])) for u in utts],
                        [fold(" ".join(hyp.get(u, []))) for u in utts])
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        path = Path(out_dir) / "cer_summary"
        name = name or default_text_name(hyp_path)
        write_summary(path, {name: total.line(name, "%CER")})  # one line per name, as wer_summary
        log.info("wrote %s", path)
    return total
