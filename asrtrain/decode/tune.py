"""``asrtrain tune-lm``: choose the LM weight and word bonus of the lexicon search on dev, once.

Kaldi's ``local/score.sh`` decodes every set over a grid of LM weights and word-insertion penalties and
reports each set's best, which quietly tunes on test. Here the grid is searched on a dev set only: the
acoustic model runs once, each grid point runs the lexicon search over the cached log-probabilities, and
the winner goes to ``OUT_DIR/best.yaml``, which ``asrtrain decode --params best.yaml`` reads when it
decodes test. ``OUT_DIR/grid.tsv`` keeps every point's dev WER (ties go to the smaller weight, then the
smaller bonus: the least LM-dependent setting), ``OUT_DIR/text`` the winner's dev hypotheses.
With ``--oov-penalties`` the grid also tries the open-vocabulary search at those penalties; the closed
search (``closed``) comes first, so a tie keeps the vocabulary closed. With ``--att-weights`` (a joint
CTC/attention model) each point's n-best is also rescored by the attention decoder at those weights
(:mod:`asrtrain.decode.rescore`); 0, no rescoring, comes first, so a tie keeps the plain search.
``--att-weights auto`` (the default) is 0, 0.5, 1, 2 for a model that has an attention decoder and 0 for
one that has not, decided from the loaded model itself.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_write_text
from asrtrain.decode.options import NBEST, check_oov_penalty, check_search

log = logging.getLogger("asrtrain.decode")

PARAMS_KEYS = ("lm_weight", "word_bonus", "beam_size")
RESCORE_KEYS = {"att_rescore": 0.0, "nbest": NBEST}  # optional in best.yaml (absent before rescoring existed)
CLOSED = "closed"  # the oov_penalty of the closed-vocabulary search, in grids and best.yaml
AUTO = "auto"  # --att-weights auto: AUTO_ATT for a model with an attention decoder, else no rescoring
AUTO_ATT = (0.0, 0.5, 1.0, 2.0)  # the AN4 recipe's grid (choice 11, recipes/an4/README.md)


def parse_grid(value: str, what: str) -> List[float]:
    """``"0.3,0.5,1"`` -> [0.3, 0.5, 1.0]; one line naming the option for anything else."""
    out = []
    for item in value.split(","):
        try:
            v = float(item)
        except ValueError:
            raise AsrError(f"{what}: '{item}' is not a number", fix=f"give {what} as comma-separated numbers, "
                           "e.g. 0.3,0.5,1.0") from None
        if v != v or v in (float("inf"), float("-inf")):
            raise AsrError(f"{what}: '{item}' is not finite", fix="give finite numbers")
        out.append(v)
    if not out or len(set(out)) != len(out):
        raise AsrError(f"{what}: give distinct values", fix="e.g. 0.3,0.5,1.0")
    return out


def parse_oov_grid(value: str) -> List[Optional[float]]:
    """``"closed,-8,-5"`` -> [None, -8.0, -5.0] (None: the closed-vocabulary search), closed first."""
    items = [v.strip() for v in value.split(",")]
    numbers = [v for v in items if v != CLOSED]
    out: List[Optional[float]] = [None] if CLOSED in items else []
    for v in numbers:  # a word that is not 'closed' or a number: say both forms
        try:
            float(v)
        except ValueError:
            raise AsrError(f"--oov-penalties: '{v}' is neither '{CLOSED}' nor a number",
                           fix="e.g. closed,-8,-5 (closed: the closed-vocabulary search)") from None
    if numbers:
        penalties = parse_grid(",".join(numbers), "--oov-penalties")
        for v in penalties:
            check_oov_penalty(v, "--oov-penalties")
        out += penalties
    if not out or len(out) != len(items):
        raise AsrError(f"--oov-penalties: give distinct values ('{CLOSED}' or numbers)",
                       fix="e.g. closed,-8,-5")
    return out


def parse_att_grid(value: str) -> Optional[List[float]]:
    """``"auto"`` -> None (decided by the model: :data:`AUTO_ATT` when it has an attention decoder, else
    no rescoring); otherwise the comma-separated weights, as :func:`parse_grid`."""
    return None if value.strip() == AUTO else parse_grid(value, "--att-weights")


def oov_text(penalty: Optional[float]) -> str:
    return CLOSED if penalty is None else f"{penalty:g}"


def tune_lm(exp_dir: Path, data_dir: Path, out_dir: Path, lm: Path, lm_weights: Sequence[float],
            word_bonuses: Sequence[float], beam_size: Optional[int] = None, ref: Optional[Path] = None,
            checkpoint: Optional[Path] = None, device: str = "cpu",
            oov_penalties: Sequence[Optional[float]] = (None,),
            att_weights: Optional[Sequence[float]] = (0.0,),
            nbest: int = NBEST) -> Dict[str, object]:
    """Grid-search ``oov_penalty`` x ``lm_weight`` x ``word_bonus`` x ``att_rescore`` by WER on
    ``data_dir`` (a dev set); returns the best point and writes ``best.yaml``, ``grid.tsv`` and ``text``
    into ``out_dir``. ``oov_penalties``: None is the closed-vocabulary search (the default grid has only
    it); ``att_weights``: attention rescoring of the ``nbest`` best (0: none, the default grid; None:
    :data:`AUTO_ATT` if the model has an attention decoder, else 0)."""
    from asrtrain.data.table import read_table, write_table
    from asrtrain.decode.lexicon import Lexicon, lexicon_nbest
    from asrtrain.decode.rescore import attention_scores, check_rescorable, has_decoder, pick
    from asrtrain.decode.lexicon_search import check_spellable
    from asrtrain.decode.run import check_features, load_model, log_probs_by_utt
    from asrtrain.lm.ngram import read_arpa
    from asrtrain.score.wer import Counts, count_words
    from asrtrain.text.tokenizer import Tokenizer

    from asrtrain.decode.run import REFERENCES_LOST
    from asrtrain.atomic import check_out_is_not_input

    data_dir, out_dir = Path(data_dir), Path(out_dir)
    check_out_is_not_input(data_dir, out_dir, REFERENCES_LOST)
    check_search(beam_size)  # the exp config's decode.beam_size is checked when it is loaded
    ref_path = Path(ref) if ref else data_dir / "text"
    if not ref_path.is_file():
        raise AsrError("no reference transcripts to tune on", ref_path,
                       fix="tune on a dev set with a text file, or pass --ref")
    refs = {u: t.split() for u, t in read_table(ref_path, min_fields=1).items()}
    cfg, model = load_model(exp_dir, checkpoint, device)
    if cfg.model.loss != "ctc":
        raise AsrError("tune-lm needs a CTC model", Path(exp_dir) / "config.yaml", fix="use Kaldi's scoring for CE models")
    check_features(cfg, data_dir)
    beam = cfg.decode.beam_size if beam_size is None else beam_size
    if att_weights is None:  # auto: the model says whether it has a decoder to rescore with
        att_weights = AUTO_ATT if has_decoder(model) else (0.0,)
    atts = sorted(att_weights)
    rescore = any(a > 0 for a in atts)
    if any(a < 0 for a in atts) or nbest < 1:
        raise AsrError("--att-weights must be >= 0 and --nbest >= 1", fix="e.g. --att-weights 0,0.3,0.5,1")
    if rescore:
        check_rescorable(model, exp_dir)
    tok = Tokenizer(Path(exp_dir) / "tokenizer.model")
    ngram = read_arpa(Path(lm))
    check_spellable(tok, ngram.vocab, Path(lm))
    lexicon = Lexicon(ngram.vocab, [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)])
    t0 = time.time()
    cached = [(u, lp, *(e.cpu() for e in enc)) for u, lp, *enc in
              log_probs_by_utt(model, cfg, data_dir, cfg.decode.batch_frames, with_enc=rescore,
                               progress="tune-lm forward")]
    missing = [u for u, *_ in cached if u not in refs]
    if missing:
        raise AsrError(f"utterance '{missing[0]}' has no reference transcript", ref_path,
                       fix="pass the text of the data dir being tuned on")
    oovs = sorted(oov_penalties, key=lambda o: (o is not None, o or 0.0))  # closed first: it wins ties
    log.info("tune-lm: %d utterances forwarded in %.1f s; %d grid points, beam %d", len(cached),
             time.time() - t0, len(oovs) * len(lm_weights) * len(word_bonuses) * len(atts), beam)
    rows: List[Tuple[Optional[float], float, float, float, Counts]] = []
    best_hyps: Dict[str, str] = {}
    best: Optional[Tuple[Optional[float], float, float, float, float]] = None
    for o in oovs:
        for w in sorted(lm_weights):
            for b in sorted(word_bonuses):
                totals, hyps = {a: Counts() for a in atts}, {a: {} for a in atts}
                for utt, lp, *enc in cached:
                    # one search and (rescoring) one decoder pass per utterance serve every weight
                    found = lexicon_nbest(lp, lexicon, ngram, beam=beam, lm_weight=w, word_bonus=b,
                                          oov_penalty=o, nbest=nbest if rescore else 1)
                    att = attention_scores(model, enc[0], [h[0] for h in found]) if rescore \
                        else [0.0] * len(found)
                    chosen = {a: pick(found, att, a)[0] for a in atts}
                    for a in atts:
                        hyps[a][utt] = tok.decode(chosen[a])
                        totals[a] = totals[a] + count_words(refs[utt], hyps[a][utt].split())
                for a in atts:
                    rows.append((o, w, b, a, totals[a]))
                    log.info("tune-lm: oov_penalty %s lm_weight %g word_bonus %g att_rescore %g: %s",
                             oov_text(o), w, b, a, totals[a].line(data_dir.name))
                    if best is None or totals[a].wer < best[4] - 1e-9:
                        best, best_hyps = (o, w, b, a, totals[a].wer), hyps[a]
    assert best is not None
    out_dir.mkdir(parents=True, exist_ok=True)
    header = "oov_penalty\tlm_weight\tword_bonus\tatt_rescore\twer\terrors\twords\n"
    atomic_write_text(out_dir / "grid.tsv", header + "".join(
        f"{oov_text(o)}\t{w:g}\t{b:g}\t{a:g}\t{c.wer:.2f}\t{c.err}\t{c.wrd}\n" for o, w, b, a, c in rows))
    write_table(out_dir / "text", best_hyps)
    result = {"lm_weight": best[1], "word_bonus": best[2], "beam_size": beam,
              "oov_penalty": oov_text(best[0]), "att_rescore": best[3], "nbest": nbest,
              "dev_wer": round(best[4], 2)}
    atomic_write_text(out_dir / "best.yaml", "".join(f"{k}: {v}\n" for k, v in result.items()) +
                      f"# chosen on {data_dir} (reference {ref_path}), lm {lm}\n")
    return result


def read_params(path: Path) -> Dict[str, Optional[float]]:
    """``lm_weight``, ``word_bonus``, ``beam_size``, ``oov_penalty`` (None: closed), ``att_rescore`` and
    ``nbest`` (the last three absent in files written before they existed) from a ``best.yaml`` written
    by :func:`tune_lm`."""
    from asrtrain.config.yamlio import read_yaml

    data, lines = read_yaml(Path(path))
    if not isinstance(data, dict):
        raise AsrError("not a mapping of decoding parameters", path, 1, fix="pass the best.yaml of asrtrain tune-lm")
    out: Dict[str, Optional[float]] = {}
    for key in PARAMS_KEYS:
        if key not in data:
            raise AsrError(f"no '{key}' in the decoding parameters", path, fix="pass the best.yaml of asrtrain tune-lm")
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise AsrError(f"'{key}' must be a finite number, not {value!r}", path, lines.get(key),
                           fix="pass the best.yaml of asrtrain tune-lm")
        out[key] = value
    if int(out["beam_size"]) != out["beam_size"] or out["beam_size"] < 1:
        raise AsrError(f"'beam_size' must be a positive integer, not {out['beam_size']}", path,
                       lines.get("beam_size"), fix="pass the best.yaml of asrtrain tune-lm")
    out["beam_size"] = int(out["beam_size"])
    oov = data.get("oov_penalty", CLOSED)
    number = isinstance(oov, (int, float)) and not isinstance(oov, bool)
    if oov != CLOSED and not (number and math.isfinite(oov) and oov <= 0):
        raise AsrError(f"'oov_penalty' must be '{CLOSED}' or a finite number <= 0, not {oov!r}", path,
                       lines.get("oov_penalty"), fix="pass the best.yaml of asrtrain tune-lm")
    out["oov_penalty"] = None if oov == CLOSED else float(oov)
    for key, default in RESCORE_KEYS.items():
        value = data.get(key, default)
        bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (key == "nbest" and (int(value) != value or value < 1))
        if bad:
            want = "a positive integer" if key == "nbest" else "a number >= 0"
            raise AsrError(f"'{key}' must be {want}, not {value!r}", path, lines.get(key),
                           fix="pass the best.yaml of asrtrain tune-lm")
        out[key] = type(default)(value)
    return out
