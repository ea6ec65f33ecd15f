"""Character error rate of Kaldi ``text`` files, counted as sclite counts ESPnet's character ``trn``.

Characters are those of the words joined by single spaces, the space included as a token of its own, as
ESPnet scores CER (its char tokens keep ``<space>``, and it runs sclite on them). They are aligned with
sclite's weighted costs and tie-breaking (:mod:`asrtrain.score.wer`: substitution 4, insertion and
deletion 3), the costs that count the %WER: unit-cost Levenshtein (``jiwer.cer``) can find fewer errors,
``abcde`` against ``xyzab`` is 5 substitutions for it and 2 correct + 3 deletions + 3 insertions for
sclite. Case is folded as for the %WER (A-Z only, sclite's default) unless ``case_sensitive``. Counts are
summed over the corpus; an utterance with an empty reference counts its insertions (sclite's trn does),
one missing from HYP is scored against nothing, and a HYP id not in REF is an error.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Sequence, Union

from asrtrain.limits import check_alignable
from asrtrain.score.report import default_text_name, read_text_pair, write_summary
from asrtrain.score.wer import Counts, Word, align, chain, fold_case

log = logging.getLogger(__name__)


def char_counts(refs: Sequence[str], hyps: Sequence[str]) -> Counts:
    """Counts over parallel lists of sentences (strings); ``wrd`` is the number of reference characters."""
    total = Counts()
    for ref, hyp in zip(refs, hyps):
        total = total.add_pairs(align(chain([Word(c) for c in ref]), chain([Word(c) for c in hyp])))
    return total


def score_cer(ref_path: Union[str, Path], hyp_path: Union[str, Path], name: Optional[str] = None,
              out_dir: Optional[Union[str, Path]] = None, case_sensitive: bool = False) -> Counts:
    """CER counts of HYP against REF; writes ``out_dir/cer_summary`` (the ``%CER`` line) when given."""
    ref, hyp = read_text_pair(ref_path, hyp_path)
    utts = sorted(ref)
    missing = [u for u in utts if u not in hyp]
    if missing:
        log.warning("CER: %d of %d reference utterances have no hypothesis (scored as deletions), e.g. %s",
                    len(missing), len(utts), missing[0])
    fold = (lambda t: t) if case_sensitive else fold_case
    refs = [fold(" ".join(ref[u])) for u in utts]
    hyps = [fold(" ".join(hyp.get(u, []))) for u in utts]
    for u, r, h in zip(utts, refs, hyps):
        check_alignable(len(r), len(h), f"utterance '{u}'", hyp_path, unit="characters")
    total = char_counts(refs, hyps)
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        path = Path(out_dir) / "cer_summary"
        name = name or default_text_name(hyp_path)
        write_summary(path, {name: total.line(name, "%CER")})  # one line per name, as wer_summary
        log.info("wrote %s", path)
    return total
