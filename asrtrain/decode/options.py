"""What the options of ``decode``, ``tune-lm`` and ``forward`` may be combined with, and their torch threads.

An option that cannot apply to the search being run is an error naming the fix, never silently ignored:
the LM and its weight, the word bonus and the engine belong to the lexicon search (selected by ``--lm`` or
``--words``), a beam to a beam or lexicon search, and the OOV penalty is a cost (<= 0).

Threads: torch's intra-op threads for the forward pass (and any CPU work of torch). Default 1, as Kaldi's
decoding jobs and ``asrtrain features --nj`` run one thread per job, so a decode does not take every core
of a shared machine; 0 means every core (torch's own default), as ``train.threads`` 0 does.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Iterator, Optional

from asrtrain.errors import AsrError
from asrtrain.limits import MAX_BEAM, check_threads, usable_cores

DEFAULT_THREADS = 1
NBEST = 10  # hypotheses kept for attention rescoring unless asked otherwise


def check_decode_options(method: Optional[str], lm: Optional[Path], words: Optional[Path],
                         lm_weight: Optional[float], word_bonus: Optional[float],
                         engine: Optional[str]) -> None:
    """Refuse decode options that the search they select cannot use (``None``: not given)."""
    lexicon = lm is not None or words is not None
    if lexicon and method in ("greedy", "beam"):
        given = "--lm" if lm is not None else "--words"
        raise AsrError(f"--method {method} cannot use {given}: {given} selects the lexicon search",
                       fix=f"drop --method {method} (or pass --method lexicon), or drop {given}")
    if lm_weight is not None and lm is None:
        raise AsrError("--lm-weight weighs the scores of --lm, and no LM is given",
                       fix="pass --lm LM.arpa as well, or drop --lm-weight")
    for option, value in (("--word-bonus", word_bonus), ("--engine", engine)):
        if value is not None and not lexicon:
            raise AsrError(f"{option} is for the lexicon search, which needs --lm (or --words)",
                           fix=f"pass --lm LM.arpa (or --words words.txt) as well, or drop {option}")


def check_beam_applies(method: str, beam_size: Optional[int]) -> None:
    """Refuse ``--beam-size`` for a greedy decode (``method`` as resolved, the exp config's default
    included)."""
    if beam_size is not None and method == "greedy":
        raise AsrError(f"--beam-size {beam_size} is for --method beam or the lexicon search; this decode is "
                       "greedy", fix="pass --method beam (or --lm LM.arpa) as well, or drop --beam-size")


def check_oov_penalty(value: Optional[float], option: str = "--oov-penalty") -> None:
    """Refuse a non-finite or positive OOV penalty (None is the closed search). It is a cost an
    out-of-vocabulary spelling pays once (:mod:`asrtrain.decode.lexicon`); a positive one would reward
    leaving the vocabulary, the opposite of what it is for."""
    if value is None:
        return
    if not math.isfinite(value):
        raise AsrError(f"{option} {value} is not finite", fix="give a finite log score, e.g. -8")
    if value > 0:
        raise AsrError(f"{option} {value:g} is positive: an OOV penalty is a log score <= 0 that an "
                       "out-of-vocabulary word pays", fix=f"give e.g. {-value:g}, or 0 for no penalty")


def resolve_threads(threads: int) -> int:
    """The thread count for ``--threads`` (0: every core); a negative one, or one far above the cores
    (:func:`asrtrain.limits.check_threads`), is an error."""
    check_threads(threads, "--threads")
    return threads if threads > 0 else usable_cores()


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[int]:
    """Run the block with torch's intra-op thread count set to ``threads`` (0: every core), and put the
    previous count back afterwards (a library caller's process keeps its own setting)."""
    import torch

    n = resolve_threads(threads)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(before)


def check_search(beam: Optional[int] = None, lm_weight: Optional[float] = None,
                 word_bonus: Optional[float] = None) -> None:
    """Refuse a beam below 1 (the searches would find nothing, or never end) and a non-finite LM weight or
    word bonus (every hypothesis would score NaN or infinity); None is not given. One line each, whether
    the value came from an option, --params or the exp config's decode section."""
    if beam is not None and (isinstance(beam, bool) or int(beam) != beam or not 1 <= beam <= MAX_BEAM):
        raise AsrError(f"beam size {beam} must be an integer >= 1 and <= {MAX_BEAM}",
                       fix="pass --beam-size 1 or more, e.g. 8")
    for what, option, value in (("LM weight", "--lm-weight", lm_weight),
                                ("word bonus", "--word-bonus", word_bonus)):
        if value is not None and not math.isfinite(value):
            raise AsrError(f"{what} {value} is not finite", fix=f"give a finite {option}, e.g. {option} 1.0")
