"""``asrtrain prepare synth OUT_DIR``: synthesise the embedded espeak-ng corpus."""

from __future__ import annotations

import click


@click.command("synth")
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--hours", type=float, default=1.0, show_default=True,
              help="Hours of training speech (dev and test sizes are set by utterance counts).")
@click.option("--seed", type=int, default=1, show_default=True,
              help="Random seed: the same seed writes byte-identical files.")
@click.option("--dev-utts", type=int, default=200, show_default=True,
              help="Dev utterances (held-out speakers and sentences).")
@click.option("--test-utts", type=int, default=400, show_default=True,
              help="Test utterances (voice variants never heard in training).")
@click.option("--nj", type=int, default=1, show_default=True,
              help="Parallel synthesis processes (the output does not depend on it).")
def synth(out_dir: str, hours: float, seed: int, dev_utts: int, test_utts: int, nj: int) -> None:
    """Synthesise speech with espeak-ng into Kaldi data dirs OUT_DIR/{train,dev,test}.

    Also writes OUT_DIR/words.txt (the vocabulary), OUT_DIR/speakers.txt (each speaker's espeak
    voice, rate and pitch) and OUT_DIR/.done; re-running with the same parameters does nothing.
    """
    from asrtrain.corpora.synth.prepare import prepare_synth

    s = prepare_synth(out_dir, hours=hours, seed=seed, dev_utts=dev_utts, test_utts=test_utts,
                      nj=nj)
    for split, info in s["splits"].items():
        click.echo(f"{split}: {info['utterances']} utterances, {info['speakers']} speakers, "
                   f"{info['hours']:.2f} h, {info['words']} words")
    click.echo(f"vocabulary {s['vocabulary']} words; {s['bytes'] / 1e6:.1f} MB; "
               f"synthesis {s['x_real_time']}x real time")
