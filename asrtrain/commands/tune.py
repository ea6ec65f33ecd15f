"""``asrtrain tune-lm EXP_DIR DEV_DIR OUT_DIR --lm LM``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from asrtrain.decode.options import DEFAULT_THREADS
from asrtrain.decode.options import NBEST


@click.command("tune-lm")
@click.argument("exp_dir", type=click.Path(path_type=Path))
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--lm", type=click.Path(path_type=Path), required=True, help="Word n-gram LM (ARPA).")
@click.option("--lm-weights", default="0.3,0.5,0.8,1.2", show_default=True,
              help="LM weights to try (comma-separated).")
@click.option("--word-bonuses", default="0,1,2,3", show_default=True,
              help="Per-word bonuses to try (comma-separated).")
@click.option("--oov-penalties", default="closed", show_default=True,
              help="Also try the open-vocabulary search at these penalties (comma-separated log scores "
                   "<= 0; 'closed' is the closed-vocabulary search), e.g. closed,-10,-6.")
@click.option("--att-weights", default="auto", show_default=True,
              help="Also rescore each point's n-best with a joint CTC/attention model's attention decoder at "
                   "these weights (comma-separated; 0 is no rescoring), e.g. 0,0.3,0.5,1. auto: 0,0.5,1,2 "
                   "for a model trained with an attention decoder (model.att_weight > 0), else 0.")
@click.option("--nbest", default=NBEST, show_default=True, help="Hypotheses kept for attention rescoring.")
@click.option("--beam-size", type=int, help="Beam width (default: the exp config's decode.beam_size).")
@click.option("--ref", type=click.Path(path_type=Path), help="Reference text (default: DATA_DIR/text).")
@click.option("--checkpoint", type=click.Path(path_type=Path), help="Model file instead of EXP_DIR/final.pt.")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda | cuda:N.")
@click.option("--threads", type=int, default=DEFAULT_THREADS, show_default=True,
              help="Torch CPU threads (one per job, as Kaldi's decoding and features --nj; 0: every core).")
def tune_lm(exp_dir: Path, data_dir: Path, out_dir: Path, lm: Path, lm_weights: str, word_bonuses: str,
            oov_penalties: str, att_weights: str, nbest: int, beam_size: Optional[int], ref: Optional[Path],
            checkpoint: Optional[Path], device: str, threads: int) -> None:
    """Choose the lexicon search's LM weight and word bonus by WER on a dev set (DATA_DIR).

    The model runs once; every grid point is searched over the cached log-probabilities. Writes
    OUT_DIR/best.yaml (pass it to `asrtrain decode --params` for test), grid.tsv and the best text.
    Tune on dev only: a grid searched on test reports a figure no user will get."""
    from asrtrain.decode.options import torch_threads
    from asrtrain.decode.tune import parse_att_grid, parse_grid, parse_oov_grid, tune_lm as run
    from asrtrain.device import check_device_spec

    check_device_spec(device, "--device")
    grids = (parse_grid(lm_weights, "--lm-weights"), parse_grid(word_bonuses, "--word-bonuses"))
    oovs, atts = parse_oov_grid(oov_penalties), parse_att_grid(att_weights)
    with torch_threads(threads):
        best = run(exp_dir, data_dir, out_dir, lm, *grids, beam_size, ref, checkpoint, device,
                   oov_penalties=oovs, att_weights=atts, nbest=nbest)
    click.echo(f"best on {data_dir}: lm_weight {best['lm_weight']:g} word_bonus {best['word_bonus']:g} "
               f"oov_penalty {best['oov_penalty']} att_rescore {best['att_rescore']:g} "
               f"beam {best['beam_size']}: %WER {best['dev_wer']:.2f} -> {Path(out_dir) / 'best.yaml'}")
