"""Decode's lexicon search as a function of one utterance's log-probs (ours, or flashlight's), and the
checks on its vocabulary. Pure Python and numpy (no torch): the onnx transcribe engine uses it too."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional

from asrtrain.errors import AsrError

log = logging.getLogger("asrtrain.decode")


def lexicon_search(tok, lm_path: Optional[Path], words_path: Optional[Path], beam: int, lm_weight: float,
                   word_bonus: float, engine: str = "ours", oov_penalty: Optional[float] = None,
                   nbest: int = 1):
    """The lexicon search as a function of one utterance's log-probs; its ``engine`` attribute says
    which ran it, and (ours) its ``nbest`` attribute gives the ``nbest`` best hypotheses instead."""
    from asrtrain.decode import flashlight
    from asrtrain.decode.lexicon import Lexicon, lexicon_nbest, read_words
    from asrtrain.lm.ngram import arpa_order_and_vocab, read_arpa

    if lm_path is None and words_path is None:
        raise AsrError("the lexicon search needs a vocabulary",
                       fix="pass --lm lm.arpa (asrtrain lm train) or --words words.txt")
    if engine == "flashlight" and oov_penalty is not None:
        raise AsrError("flashlight's lexicon search is closed-vocabulary; --oov-penalty needs ours",
                       fix="pass --engine ours, or drop the OOV penalty")
    if engine == "flashlight":
        _check_flashlight(lm_path, flashlight, arpa_order_and_vocab, read_arpa)
    lm = read_arpa(Path(lm_path)) if lm_path and engine == "ours" else None  # KenLM reads it for flashlight
    if words_path:
        vocab = read_words(words_path)
    else:
        vocab = lm.vocab if lm else arpa_order_and_vocab(Path(lm_path))[1]
    pieces = [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)]
    unk = tok.sp.unk_id()
    check_spellable(tok, vocab, Path(words_path or lm_path))
    if engine == "flashlight":
        lm_file = Path(lm_path) if lm_path else None
        try:
            search = flashlight.FlashlightSearch(pieces, vocab, tok.sp.encode, lm_file, beam=beam,
                                                 lm_weight=lm_weight, word_bonus=word_bonus, unk=unk)
        except flashlight.FlashlightUnsupported:
            read_arpa(lm_file)  # KenLM refused the file: our parser names the line when it is malformed
            raise
    else:
        lexicon = Lexicon(vocab, pieces)
        unfinished: List[str] = []  # the unfinished last words left out, one per utterance that had one

        def best(lp):
            return lexicon_nbest(lp, lexicon, lm, beam=beam, lm_weight=lm_weight, word_bonus=word_bonus,
                                 oov_penalty=oov_penalty, nbest=nbest, unfinished=unfinished)

        def search(lp):  # the head of the n-best list is the 1-best search's answer
            return best(lp)[0]

        search.nbest = best
        search.unfinished = unfinished
    search.engine = engine
    return search


def check_spellable(tok, vocab, source: Path) -> None:
    """Refuse a vocabulary (from ``source``) none of whose words the tokenizer can spell; warn about the
    words it cannot spell, which the lexicon search will never output."""
    unk = tok.sp.unk_id()
    unspellable = [w for w in vocab if unk in tok.sp.encode(w)]
    if len(unspellable) == len(vocab):
        raise AsrError("no vocabulary word can be spelled with the tokenizer's pieces", source,
                       fix="check that the vocabulary matches the transcripts")
    if unspellable:
        log.warning("%d of %d vocabulary words cannot be spelled with the tokenizer's pieces (e.g. %s); "
                    "they will never be recognised", len(unspellable), len(vocab), unspellable[0])


def _check_flashlight(lm_path: Optional[Path], flashlight, arpa_order_and_vocab, read_arpa) -> None:
    """One-line errors for what flashlight cannot do: not installed, or a unigram LM (KenLM refuses it)."""
    if not flashlight.available():
        raise AsrError("decode.engine=flashlight needs flashlight-text (torchaudio's CTC decoder)",
                       fix="pip install flashlight-text==0.0.7, or use --engine ours")
    if lm_path is None:
        return
    try:
        order = arpa_order_and_vocab(Path(lm_path))[0]
    except AsrError:
        read_arpa(Path(lm_path))  # the precise error for a malformed file
        raise
    if order < 2:
        raise AsrError("decode.engine=flashlight: KenLM cannot load a unigram LM", lm_path,
                       fix="train an LM of order >= 2 (asrtrain lm train --order 2), or use --engine ours")
