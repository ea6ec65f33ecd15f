"""Sentencepiece tokenizer: train on a Kaldi ``text`` file, encode/decode transcripts.

Token id 0 is reserved for the CTC blank (sentencepiece's ``<blk>``, a user-defined piece at id 0 would
collide with <unk>, so we put <unk> at 1 and let id 0 be a control symbol named ``<blank>``).
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Dict, Iterable, List, Sequence

from asrtrain.config import TokenizerConfig
from asrtrain.data.table import iter_lines
from asrtrain.data.textcheck import PLAIN_TEXT_FIX, repeated_id, text_line_problem
from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_open

log = logging.getLogger(__name__)

BLANK = 0
UNK_WORD = "<unk>"  # what an unknown piece decodes to (Kaldi's unknown word)


def read_transcripts(text_path: Path) -> List[str]:
    """Transcripts of a Kaldi ``text`` file (the key dropped); empty ones, lines data validate refuses
    (``<s>``, ``</s>``, ``#0``, odd whitespace) and repeated ids (plain text without ids) are errors."""
    out = []
    seen: Dict[str, int] = {}
    for no, line in iter_lines(text_path):
        bad = text_line_problem(line)
        if bad:
            raise AsrError(bad, text_path, no, fix="correct the transcript (asrtrain data validate checks a "
                                                   "data dir's text), or drop the line")
        parts = line.split(maxsplit=1)
        again = repeated_id(seen, parts[0], no)
        if again:
            raise AsrError(again, text_path, no, fix=PLAIN_TEXT_FIX)
        if len(parts) < 2 or not parts[1].strip():
            raise AsrError(f"empty transcript for '{parts[0]}'", text_path, no,
                           fix="remove the utterance or give it words (asrtrain data fix drops it)")
        out.append(parts[1].strip())
    return out


def train_tokenizer(text_path: Path, out_dir: Path, cfg: TokenizerConfig) -> Path:
    """Train sentencepiece on the transcripts of ``text_path``; writes ``out_dir/tokenizer.model``.

    Returns the model path. ``cfg.vocab_size`` is lowered to what the text can support for ``char``.
    """
    import sentencepiece as spm

    sentences = read_transcripts(Path(text_path))
    if not sentences:
        raise AsrError("no transcripts to train a tokenizer on", text_path)
    out_dir = Path(out_dir)
    model = io.BytesIO()
    kwargs = dict(
        sentence_iterator=iter(sentences), model_writer=model, model_type=cfg.model_type,
        character_coverage=cfg.character_coverage, bos_id=-1, eos_id=-1, unk_id=1, pad_id=0,
        pad_piece="<blank>", hard_vocab_limit=False, num_threads=1, minloglevel=2,
        input_sentence_size=2_000_000, shuffle_input_sentence=True, seed_sentencepiece_size=1_000_000,
    )
    if cfg.model_type != "char" and cfg.model_type != "word":
        kwargs["vocab_size"] = cfg.vocab_size
    elif cfg.model_type == "word":
        kwargs["vocab_size"] = min(cfg.vocab_size, len({w for s in sentences for w in s.split()}) + 2)
    try:
        spm.SentencePieceTrainer.train(**kwargs)
    except RuntimeError as err:
        raise _training_error(err, cfg, text_path) from None
    out_dir.mkdir(parents=True, exist_ok=True)  # after training: a failed one leaves no empty OUT_DIR
    path = out_dir / "tokenizer.model"
    with atomic_open(path, "wb") as fh:
        fh.write(model.getvalue())
    got = Tokenizer(path).vocab_size
    log.info("tokenizer: %s, %d pieces, trained on %d transcripts -> %s", cfg.model_type, got,
             len(sentences), path)
    if cfg.model_type != "char" and got < cfg.vocab_size:
        log.warning("tokenizer: asked for %d pieces (--vocab-size), got %d: the text (%d transcripts) "
                    "supports no more", cfg.vocab_size, got, len(sentences))
    return path


def _training_error(err: RuntimeError, cfg: TokenizerConfig, text_path: Path) -> AsrError:
    """One line for sentencepiece's training failure: a vocabulary smaller than the text's characters
    (sentencepiece's ``required_chars``) names the size needed; anything else its first line."""
    import re

    text = " ".join(str(err).split())
    need = re.search(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", text)
    if need:
        return AsrError(f"--vocab-size {need.group(1)} is smaller than the {need.group(2)} pieces this text "
                        "needs (each character kept by tokenizer.character_coverage "
                        f"{cfg.character_coverage}, and the special pieces)", text_path,
                        fix=f"give --vocab-size {need.group(2)} or more, or --model-type char")
    return AsrError(f"sentencepiece training failed: {text[:300]}", text_path,
                    fix="check the text ('<utt-id> <words...>' lines) and --vocab-size")


class Tokenizer:
    """A trained sentencepiece model; id 0 is the CTC blank."""

    def __init__(self, path: Path):
        import sentencepiece as spm

        self.path = Path(path)
        if self.path.is_dir():
            raise AsrError("is a directory, not a tokenizer model", self.path,
                           fix="give the tokenizer.model file in it (asrtrain tokenizer train writes "
                               "DIR/tokenizer.model)")
        if not self.path.is_file():
            raise AsrError("tokenizer model not found", self.path,
                           fix="train one with: asrtrain tokenizer train --text data/train/text --out DIR")
        try:
            self.sp = spm.SentencePieceProcessor(model_file=str(self.path))
        except (RuntimeError, OSError, ValueError) as err:
            raise AsrError(f"not a sentencepiece model (corrupt or truncated: {' '.join(str(err).split())})",
                           self.path, fix="retrain it with asrtrain tokenizer train, or copy it again"
                           ) from None
        if self.sp.get_piece_size() <= BLANK or self.sp.id_to_piece(BLANK) != "<blank>":
            raise AsrError("not an asrtrain tokenizer (id 0 must be <blank>)", self.path,
                           fix="retrain it with asrtrain tokenizer train")

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def settings(self) -> TokenizerConfig:
        """What this model was trained with (its sentencepiece trainer spec), as the ``tokenizer`` section
        of a config: training records it in the exp's ``config.yaml``, whatever the config file said.
        ``vocab_size`` is the model's size (a ``char`` model's is what its text supported)."""
        from sentencepiece import sentencepiece_model_pb2 as pb

        proto = pb.ModelProto()
        proto.ParseFromString(self.sp.serialized_model_proto())
        spec = proto.trainer_spec
        kind = pb.TrainerSpec.ModelType.Name(spec.model_type).lower()
        return TokenizerConfig(model_type=kind, vocab_size=self.vocab_size,
                               character_coverage=round(spec.character_coverage, 6))

    def encode(self, text: str) -> List[int]:
        return self.sp.encode(text, out_type=int)

    def encode_pieces(self, text: str) -> List[str]:
        """Text -> pieces; a character the tokenizer has no piece for is the unknown piece (``<unk>``),
        as :meth:`encode` gives its id (sentencepiece would print the character itself, which
        :meth:`decode_pieces` then could not take back)."""
        return [self.sp.id_to_piece(i) for i in self.encode(text)]

    def decode(self, ids: Sequence[int]) -> str:
        """Ids -> text; the blank is dropped, and each unknown piece is the word ``<unk>`` (Kaldi's
        convention; sentencepiece writes its unk_surface `` ⁇ ``, which is a word too, but one no
        reference, LM or scoring tool knows). An id outside [0, vocab_size) is an AsrError."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise AsrError(f"token id {bad[0]} is outside this tokenizer's range 0..{self.vocab_size - 1}",
                           self.path, fix="decode ids made with this tokenizer.model")
        unk = self.sp.unk_id()
        if unk not in ids:
            return self.sp.decode([i for i in ids if i != BLANK])
        runs: List[List[int]] = [[]]  # the ids between unknown pieces, each decoded as sentencepiece does
        for i in ids:
            if i == unk:
                runs.append([])
            elif i != BLANK:
                runs[-1].append(i)
        return " ".join(f" {UNK_WORD} ".join(self.sp.decode(run) for run in runs).split())

    def decode_pieces(self, pieces: Iterable[str]) -> str:
        """Pieces -> text. A piece this tokenizer does not have is an AsrError (sentencepiece would pass
        it through as text)."""
        pieces = list(pieces)
        unk = self.sp.unk_id()
        for p in pieces:
            if self.sp.piece_to_id(p) == unk and p != self.sp.id_to_piece(unk):
                raise AsrError(f"piece '{p[:40]}' is not in this tokenizer", self.path,
                               fix="decode pieces made with this tokenizer.model")
        return self.decode([self.sp.piece_to_id(p) for p in pieces])
