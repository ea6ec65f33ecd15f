"""``asrtrain tokenizer train|encode|decode``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click


@click.group()
def tokenizer() -> None:
    """Train or apply a sentencepiece tokenizer (id 0 is the CTC blank)."""


@tokenizer.command("train")
@click.option("--text", "text_path", required=True, type=click.Path(path_type=Path),
              help="Kaldi text file (<utt-id> <words...>) to train on.")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path),
              help="Output directory; writes tokenizer.model there.")
@click.option("--model-type", type=click.Choice(["bpe", "unigram", "char", "word"]), default="unigram",
              show_default=True, help="Sentencepiece model type.")
@click.option("--vocab-size", type=int,
              help="Number of pieces [default: 300]; not for char, whose pieces are the text's characters.")
def train_cmd(text_path: Path, out_dir: Path, model_type: str, vocab_size: Optional[int]) -> None:
    """Train sentencepiece on the transcripts of a Kaldi text file."""
    from asrtrain.config import TokenizerConfig
    from asrtrain.errors import AsrError
    from asrtrain.text.tokenizer import train_tokenizer

    if model_type == "char" and vocab_size is not None:
        raise AsrError(f"--vocab-size {vocab_size} cannot apply to --model-type char: a char model has one "
                       "piece per character of the text", fix="drop --vocab-size, or pick bpe/unigram/word")
    cfg = TokenizerConfig(model_type=model_type) if vocab_size is None else \
        TokenizerConfig(model_type=model_type, vocab_size=vocab_size)
    cfg.validate()
    click.echo(train_tokenizer(text_path, out_dir, cfg))


def _apply(model: Path, infile: str, fn) -> None:
    from asrtrain.data.table import iter_lines
    from asrtrain.errors import AsrError
    from asrtrain.text.tokenizer import Tokenizer

    tok = Tokenizer(model)
    path = Path("/dev/stdin") if infile == "-" else Path(infile)
    for no, line in (_stdin_lines() if infile == "-" else iter_lines(path)):
        parts = line.split(maxsplit=1)
        try:
            out = fn(tok, parts[1] if len(parts) > 1 else '')
        except AsrError as err:  # name the input line too
            raise AsrError(err.message, path, no, err.fix) from None
        click.echo(f"{parts[0]} {out}".rstrip())
    sys.stdout.flush()


@tokenizer.command("encode")
@click.option("--model", required=True, type=click.Path(path_type=Path), help="tokenizer.model")
@click.option("--ids", is_flag=True, help="Print token ids instead of pieces.")
@click.argument("text_file", default="-")
def encode_cmd(model: Path, ids: bool, text_file: str) -> None:
    """Encode a Kaldi text file (or stdin) into pieces or ids, keeping the utterance ids."""
    _apply(model, text_file, lambda t, s: " ".join(map(str, t.encode(s))) if ids else " ".join(t.encode_pieces(s)))


@tokenizer.command("decode")
@click.option("--model", required=True, type=click.Path(path_type=Path), help="tokenizer.model")
@click.option("--ids", is_flag=True, help="Input holds token ids instead of pieces.")
@click.argument("text_file", default="-")
def decode_cmd(model: Path, ids: bool, text_file: str) -> None:
    """Decode pieces (or ids) back into words, keeping the utterance ids."""
    _apply(model, text_file, lambda t, s: t.decode(_ints(s)) if ids else t.decode_pieces(s.split()))


def _stdin_lines():
    """``(line_no, line)`` of standard input (a pipe or a file), as :func:`iter_lines` gives a file's:
    UTF-8, blank lines skipped, an invalid byte named with its line."""
    from asrtrain.errors import AsrError
    for no, raw in enumerate(sys.stdin.buffer, 1):
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as err:
            raise AsrError(f"not valid UTF-8 (byte {err.start + 1} of the line)", "stdin", no,
                           fix="re-encode the input as UTF-8, e.g. iconv -f latin1 -t utf-8") from None
        if line.strip():
            yield no, line


def _ints(text: str):
    import re

    from asrtrain.errors import AsrError

    for x in text.split():
        if not re.fullmatch(r"-?[0-9]+", x):
            raise AsrError(f"'{x[:40]}' is not a token id (--ids expects integers)",
                           fix="drop --ids to decode pieces, or give integer ids")
    return [int(x) for x in text.split()]
