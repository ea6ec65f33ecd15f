"""The lexicon search on flashlight's C++ CTC decoder (torchaudio's ``ctc_decoder``, flashlight-text wheel).

An opt-in engine (``decode.engine: flashlight``) for the search of
:func:`asrtrain.decode.lexicon.lexicon_beam_search`, which stays the default and the test oracle; same
result, ``(tokens, frames, score)``. It is not faster at equal WER (``scripts/bench_decode.py``, 30k
words, 4-gram: at the same beam it is 2-2.5x faster but less accurate, 4.4% vs 1.8% WER at beam 16;
at beam 64 it reaches 2.6% at RTF 0.028, ours 2.0% at beam 8, RTF 0.006), so its use is an LM too large
to load into Python: KenLM reads the ARPA file itself. What differs, and how it is matched:

* Spellings: flashlight's lexicon holds the spellings it is given, here the tokenizer's own segmentation
  of each word (``sp.encode(word)``); ours accepts any piece sequence that spells a vocabulary word.
* LM: KenLM scores in log10, so ``lm_weight`` (a weight of the natural log, as ours) is passed as
  ``lm_weight * ln 10``; ``word_bonus`` is flashlight's ``word_score``. KenLM cannot load a unigram ARPA.
* Flashlight scores a word when its last piece is emitted (ours: when the next word starts) and adds a
  unigram look-ahead while a word is spelled; hypotheses are merged with log-add, as ours sums paths.
* The end is the same: only hypotheses at a word's end compete unless none is (``decodeEnd``); then the
  winner's unfinished word, which flashlight leaves out of its words but not of its tokens, is left out
  of the tokens too, as ours does.
* Silence: flashlight needs a silence token, sentencepiece has none; it gets an extra emission column
  that is never likely (``-1e4``). Flashlight holds a finished word on that silence token only, so a
  word's last piece peaking over two frames must pay blank (or a spurious word) for the second frame.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import tempfile
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from asrtrain.errors import AsrError

NEVER = -1e4  # log-prob of the silence column
#: Share of a model's non-blank best-path emissions that repeat the frame before's piece above which the
#: search warns: flashlight cannot hold a finished word's last piece (see the module docstring), so each
#: such frame costs blank or a spurious word. A tone model with one piece per word held ~60% and came out
#: with runs of repeated words on every utterance (ours: none wrong).
HELD_WARN = 0.1

log = logging.getLogger("asrtrain.decode")


class FlashlightUnsupported(AsrError):
    """This LM or vocabulary cannot be decoded with flashlight (the caller may use ours instead)."""


def available() -> bool:
    """True when torchaudio's flashlight decoder and its KenLM binding can be imported."""
    try:
        from torchaudio.models.decoder import _ctc_decoder  # noqa: F401
        from flashlight.lib.text.decoder.kenlm import KenLM  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


@contextlib.contextmanager
def _quiet_stderr():
    """KenLM prints a progress bar on fd 2 while it reads an ARPA file; its errors come as exceptions."""
    try:
        fd = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(fd, 2)
        os.close(fd)


class FlashlightSearch:
    """Callable on one utterance's ``(T, V)`` log-probs, like ``lexicon_beam_search``.

    ``pieces``: the tokenizer's pieces by id (id ``blank`` is the CTC blank); ``spell(word)``: the piece
    ids of a word; ``lm``: an ARPA file of order >= 2, or ``None`` (vocabulary and word bonus only).
    Words whose spelling holds ``unk`` are left out of the lexicon (they could never be recognised).
    """

    def __init__(self, pieces: Sequence[str], words: Sequence[str], spell: Callable[[str], List[int]],
                 lm: Optional[Path] = None, beam: int = 16, lm_weight: float = 0.5,
                 word_bonus: float = 0.0, blank: int = 0, unk: Optional[int] = None, token_beam: int = 10,
                 beam_threshold: float = 50.0):
        from torchaudio.models.decoder import ctc_decoder

        self.blank = blank
        self.sil = len(pieces)
        self.word_start = [p.startswith("\u2581") for p in pieces]
        self.pieces = list(pieces)
        self.unfinished: List[str] = []  # unfinished last words left out, one per utterance (callers count)
        self.held = self.emitted = 0  # best-path emissions repeating the frame before's piece, of all
        self.warned = False
        sil_name = "<sil>"
        while sil_name in pieces:
            sil_name = "<" + sil_name + ">"
        lines = []
        for w in words:
            ids = spell(w)
            if ids and unk not in ids:
                lines.append(w + " " + " ".join(pieces[i] for i in ids) + "\n")
        if not lines:
            raise AsrError("no vocabulary word can be spelled with the tokenizer's pieces", lm,
                           fix="check that the vocabulary matches the transcripts")
        with tempfile.TemporaryDirectory(prefix="asrtrain-fl-") as tmp:
            lexicon = Path(tmp) / "lexicon.txt"
            lexicon.write_text("".join(lines), encoding="utf-8")
            try:
                with _quiet_stderr():
                    self.decoder = ctc_decoder(
                        lexicon=str(lexicon), tokens=list(pieces) + [sil_name],
                        lm=str(lm) if lm is not None else None, beam_size=beam,
                        beam_size_token=min(token_beam, len(pieces) + 1), beam_threshold=beam_threshold,
                        lm_weight=lm_weight * math.log(10.0), word_score=word_bonus, log_add=True,
                        blank_token=pieces[blank], sil_token=sil_name, unk_word="<unk>")
            except Exception as err:  # KenLM's own exceptions (e.g. a unigram LM, a malformed file)
                msg = str(err).split(" threw ", 1)[-1]  # drop KenLM's source path and signature
                msg = " ".join(msg.split())[:200]
                raise FlashlightUnsupported(f"flashlight's KenLM cannot load this LM ({msg})", lm,
                                            fix="use --engine ours, or an LM of order 2 to 6 (KenLM's "
                                                "default build reads up to 6)") from None

    def __call__(self, log_probs: np.ndarray) -> Tuple[List[int], List[int], float]:
        import torch

        T, V = log_probs.shape
        if T == 0:
            return [], [], 0.0
        self._count_held(log_probs)
        em = np.empty((1, T, V + 1), dtype=np.float32)
        em[0, :, :V] = log_probs
        em[0, :, V] = NEVER
        hyps = self.decoder(torch.from_numpy(em))[0]
        if not hyps:
            return [], [], -math.inf
        h = hyps[0]
        # flashlight's path starts with its initial silence node: timestep i is frame i - 1
        pairs = [(int(k), int(t) - 1) for k, t in zip(h.tokens.tolist(), h.timesteps.tolist())
                 if k != self.sil]
        starts = [i for i, (k, _) in enumerate(pairs) if self.word_start[k]]
        if len(starts) > len(h.words):  # it ends inside a word (every spelling starts with a ▁ piece)
            self.unfinished.append("".join(self.pieces[k] for k, _ in pairs[starts[-1]:]).lstrip("\u2581"))
            pairs = pairs[:starts[-1]]
        return [k for k, _ in pairs], [t for _, t in pairs], float(h.score)

    def _count_held(self, log_probs: np.ndarray) -> None:
        """Warn once when this model's best path holds pieces over frames (:data:`HELD_WARN`)."""
        best = log_probs.argmax(axis=1)
        emit = best != self.blank
        self.held += int((emit[1:] & (best[1:] == best[:-1])).sum())
        self.emitted += int(emit.sum())
        if not self.warned and self.emitted >= 50 and self.held > HELD_WARN * self.emitted:
            self.warned = True
            log.warning("flashlight: this model holds a piece over consecutive frames in %.0f%% of its emissions; "
                        "flashlight's lexicon decoder cannot hold a word's last piece, so expect repeated or "
                        "dropped words (use --engine ours, the default)", 100.0 * self.held / self.emitted)
