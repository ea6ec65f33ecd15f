"""``asrtrain lm train``."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def lm() -> None:
    """Word n-gram language models for the lexicon search (asrtrain decode --lm)."""


@lm.command("train")
@click.option("--text", "text_path", required=True, type=click.Path(path_type=Path),
              help="Kaldi text file (<utt-id> <words...>) to count.")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path),
              help="Output directory; writes lm.arpa and words.txt there.")
@click.option("--order", type=int, default=3, show_default=True, help="N-gram order.")
def train_cmd(text_path: Path, out_dir: Path, order: int) -> None:
    """Train an interpolated modified Kneser-Ney n-gram LM (ARPA, readable by SRILM, KenLM, Kaldi)."""
    from asrtrain.atomic import atomic_write_text
    from asrtrain.lm.ngram import read_sentences, train_ngram

    out_dir.mkdir(parents=True, exist_ok=True)  # a bad --out fails before the counting, not after
    model = train_ngram(read_sentences(text_path), order, source=text_path)
    model.write_arpa(out_dir / "lm.arpa")
    atomic_write_text(out_dir / "words.txt", "".join(w + "\n" for w in model.vocab))
    click.echo(out_dir / "lm.arpa")
