"""``asrtrain decode EXP_DIR DATA_DIR OUT_DIR``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import click

from asrtrain.decode.options import DEFAULT_THREADS
from asrtrain.decode.options import NBEST


@click.command()
@click.argument("exp_dir", type=click.Path(path_type=Path))
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--method", type=click.Choice(["greedy", "beam", "lexicon"]),
              help="Search (default: the exp config's; --lm or --words imply lexicon).")
@click.option("--beam-size", type=int,
              help="Beam width for --method beam or lexicon (default: decode.beam_size; not for greedy).")
@click.option("--checkpoint", type=click.Path(path_type=Path), help="Model file instead of EXP_DIR/final.pt.")
@click.option("--lm", type=click.Path(path_type=Path),
              help="Word n-gram LM (ARPA, e.g. from asrtrain lm train) fused into the lexicon search.")
@click.option("--words", type=click.Path(path_type=Path),
              help="Vocabulary for the lexicon search, one word per line (default: the LM's words).")
@click.option("--lm-weight", type=float,
              help="LM weight, with --lm (default: the exp config's decode.lm_weight).")
@click.option("--word-bonus", type=float,
              help="Per-word bonus of the lexicon search, with --lm or --words (default: decode.word_bonus).")
@click.option("--oov-penalty", type=float,
              help="Open the lexicon search's vocabulary: a word spelled outside it pays this log score "
                   "(<= 0) once and is scored by the LM as <unk> (default: closed vocabulary).")
@click.option("--params", type=click.Path(path_type=Path),
              help="best.yaml of asrtrain tune-lm: its lm_weight, word_bonus, beam_size, oov_penalty, "
                   "att_rescore and nbest (chosen on dev).")
@click.option("--att-rescore", type=float,
              help="Rescore the lexicon search's n-best with a joint CTC/attention model's attention decoder "
                   "at this weight (model.att_weight > 0; default 0: no rescoring).")
@click.option("--nbest", type=int, help=f"Hypotheses kept for --att-rescore [default: {NBEST}].")
@click.option("--engine", type=click.Choice(["ours", "flashlight"]),
              help="Lexicon search, with --lm or --words: ours (Python) or flashlight (C++, needs "
                   "flashlight-text). Default: decode.engine.")
@click.option("--device", default="auto", show_default=True,
              help="auto (the GPU when CUDA is available) | cpu | cuda | cuda:N.")
@click.option("--threads", type=int, default=DEFAULT_THREADS, show_default=True,
              help="Torch CPU threads (one per job, as Kaldi's decoding and features --nj; 0: every core).")
def decode(exp_dir: Path, data_dir: Path, out_dir: Path, method: Optional[str], beam_size: Optional[int],
           checkpoint: Optional[Path], lm: Optional[Path], words: Optional[Path], lm_weight: Optional[float],
           word_bonus: Optional[float], oov_penalty: Optional[float], params: Optional[Path],
           att_rescore: Optional[float], nbest: Optional[int], engine: Optional[str], device: str,
           threads: int) -> None:
    """Decode the feature dir DATA_DIR into OUT_DIR/text (and OUT_DIR/ctm when DATA_DIR has segments).

    With --lm (or --words), hypotheses are restricted to the vocabulary's words and scored with the
    word LM: a CTC prefix beam search with shallow fusion."""
    from asrtrain.decode.options import check_decode_options, check_oov_penalty, resolve_threads
    from asrtrain.decode.options import torch_threads
    from asrtrain.decode.run import decode as run
    from asrtrain.device import check_device_spec
    from asrtrain.errors import AsrError

    check_device_spec(device, "--device")
    resolve_threads(threads)
    check_decode_options(method, lm, words, lm_weight, word_bonus, engine)
    if nbest is not None and not att_rescore:
        raise AsrError("--nbest is the n-best of attention rescoring", fix="pass --att-rescore W as well")
    if params is not None:
        if any(v is not None for v in (lm_weight, word_bonus, beam_size, oov_penalty, att_rescore, nbest)):
            raise AsrError("--params sets the LM weight, word bonus, beam, OOV penalty and rescoring; "
                           "do not also give them", params,
                           fix="drop --lm-weight/--word-bonus/--beam-size/--oov-penalty/--att-rescore/"
                               "--nbest, or drop --params")
        if lm is None and words is None:
            raise AsrError("--params is for the lexicon search", params, fix="pass --lm LM.arpa as well")
        from asrtrain.decode.tune import read_params
        chosen = read_params(params)
        lm_weight, word_bonus, beam_size = chosen["lm_weight"], chosen["word_bonus"], chosen["beam_size"]
        oov_penalty, att_rescore, nbest = chosen["oov_penalty"], chosen["att_rescore"], chosen["nbest"]
    check_oov_penalty(oov_penalty)
    att_rescore = 0.0 if att_rescore is None else att_rescore
    if not math.isfinite(att_rescore) or att_rescore < 0 or (nbest is not None and nbest < 1):
        raise AsrError(f"--att-rescore {att_rescore} / --nbest {nbest}: give a finite weight >= 0 and "
                       "nbest >= 1", fix="e.g. --att-rescore 0.5 --nbest 10")

    with torch_threads(threads):
        run(exp_dir, data_dir, out_dir, method, beam_size, checkpoint, lm, words, lm_weight, word_bonus,
            device, engine=engine, oov_penalty=oov_penalty, att_rescore=att_rescore, nbest=nbest or NBEST)
