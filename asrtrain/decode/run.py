"""``asrtrain decode``: an exp dir's final model over a feature dir -> Kaldi ``text`` (and a ctm).

The exp dir describes itself (config.yaml with the feature config, tokenizer.model, final.pt), so the
only inputs are the directories; a feature dir computed with other options is refused.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np
import torch

from asrtrain.config import Config
from asrtrain.config.file import load_config
from asrtrain.decode.lexicon_search import lexicon_search as _lexicon_search
from asrtrain.decode.options import NBEST, check_search
from asrtrain.data.table import read_table, write_table
from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_write_text, check_out_is_not_input

log = logging.getLogger("asrtrain.decode")


def load_model(exp_dir: Path, checkpoint: Optional[Path] = None, device: str = "cpu"):
    """(Config, model in eval mode on ``device``) from an exp dir; ``final.pt`` (a packed model's
    ``model.safetensors``) unless ``checkpoint`` is given (a final model, or a training checkpoint: its
    learner-averaged model if it has one). Tensors are mapped to ``device`` whatever device wrote them; a
    torch file is loaded with ``weights_only=True``, a safetensors file runs no code at all."""
    from asrtrain.device import resolve_device
    from asrtrain.model.blstm import build_model
    from asrtrain.model.files import SAFETENSORS, load_with_payload
    from asrtrain.model.stamp import check_stamp

    exp_dir = Path(exp_dir)
    cfg_path = exp_dir / "config.yaml"
    if not exp_dir.exists():
        raise AsrError("no such directory", exp_dir, fix="give an exp dir or a pack")
    if not cfg_path.is_file():
        raise AsrError("not an exp dir (no config.yaml)", exp_dir, fix="train with asrtrain train --exp-dir")
    cfg = load_config(cfg_path)
    path = Path(checkpoint) if checkpoint else exp_dir / "final.pt"
    if checkpoint is None and not path.is_file() and (exp_dir / SAFETENSORS).is_file():
        path = exp_dir / SAFETENSORS  # a packed model
    if path.is_dir():
        raise AsrError("is a directory, not a model file", path,
                       fix="pass a model file, e.g. EXP/final.pt or EXP/checkpoints/epoch-0003.rank0.pt")
    if not path.is_file():
        _refuse_export(exp_dir, checkpoint)
        raise AsrError("model file not found", path, fix="finish training, or run asrtrain average EXP")
    where = resolve_device(device)
    state, payload = load_with_payload(path, where)
    bad = [n for n, t in state.items() if torch.is_tensor(t) and t.is_floating_point()
           and not bool(torch.isfinite(t).all())]
    if bad:
        raise AsrError(f"the model has non-finite weights ({', '.join(bad[:3])}): its hypotheses would be "
                       "meaningless", path, fix="decode an earlier checkpoint (--checkpoint), or retrain with "
                       "a lower train.lr")
    check_stamp(payload, cfg, cfg_path, path)
    model = build_model(cfg.model).to(where)
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise AsrError(f"the model file does not fit the exp dir's config ({' '.join(str(err).split())[:160]})",
                       path, fix="decode with the exp dir the model was trained in") from None
    model.eval()
    return cfg, model


def _refuse_export(model_dir: Path, checkpoint: Optional[Path]) -> None:
    """An ``asrtrain export`` dir holds a graph, not the weights torch loads: say so (and what runs it)
    rather than that ``final.pt`` is missing."""
    from asrtrain.transcribe.manifest import kind

    if checkpoint is not None or kind(model_dir) != "export":
        return
    if (model_dir / "model.ts").is_file():
        raise AsrError("is a TorchScript export (asrtrain export), not a model dir asrtrain loads", model_dir,
                       fix="give the pack or exp dir it was exported from (load model.ts with torch.jit.load)")
    raise AsrError("is an ONNX export (asrtrain export), not a model dir the torch engine loads", model_dir,
                   fix="transcribe it with --engine onnx, or give the pack or exp dir it was exported from")


def check_ctc(cfg, model_dir: Path, what: str) -> None:
    """Refuse a CE-trained (hybrid) model where a CTC one is needed: ``what`` says what needs it (decode,
    transcribe, pack, export); the fix is Kaldi's route, which ``asrtrain forward`` feeds."""
    if cfg.model.loss != "ctc":
        raise AsrError(f"this model was trained with CE targets (a hybrid model); {what}",
                       Path(model_dir) / "config.yaml",
                       fix="decode it with Kaldi: asrtrain forward EXP DATA loglikes.ark, then latgen-faster-mapped")


def check_out_ark(data_dir: Path, out_ark: Path) -> None:
    """Refuse an OUT_ARK (or its .scp) that is a directory, lies inside DATA_DIR, or is a file that
    DATA_DIR's feats.scp or cmvn.scp points into: writing it would destroy the features being read."""
    out_ark = Path(out_ark)
    scp = out_ark.with_suffix(".scp")
    for p in (out_ark, scp):
        if p.is_dir():
            raise AsrError("is a directory; OUT_ARK (and its .scp) must be file names", p,
                           fix="give a file name, e.g. DIR/loglikes.ark")
    data = Path(data_dir).resolve()
    inputs = set()
    for name in ("feats.scp", "cmvn.scp"):
        try:
            lines = (data / name).read_text(errors="replace").splitlines()
        except OSError:
            continue  # a missing or unreadable table is named by the feature reader
        for ln in lines:
            fields = ln.split(None, 1)
            if len(fields) == 2:
                target = fields[1].strip()
                head, sep, tail = target.rpartition(":")
                inputs.add(Path(head if sep and tail.isdigit() else target).resolve())
    for p in (out_ark, scp):
        r = p.resolve()
        if r in inputs or r == data or data in r.parents:
            raise AsrError(f"OUT_ARK must not overwrite DATA_DIR's features ({r} is "
                           f"{'read by its scp' if r in inputs else 'inside DATA_DIR'})", p,
                           fix="write the log-likelihoods outside DATA_DIR, e.g. EXP/loglikes.ark")
    if scp == out_ark:
        raise AsrError("OUT_ARK ends in .scp, the name of its index", out_ark,
                       fix="give an archive name, e.g. loglikes.ark")


#: What decoding into DATA_DIR itself would destroy.
REFERENCES_LOST = "its text would replace the reference transcripts"


def check_features(cfg: Config, data_dir: Path) -> None:
    """Refuse a feature dir computed with options other than the model's."""
    from asrtrain.config.file import feature_differences
    from asrtrain.features.reader import FeatureReader

    diff = feature_differences(FeatureReader(data_dir).config, cfg.features)
    if diff:
        raise AsrError(f"features differ from the model's ({', '.join(diff)})", Path(data_dir) / "features.yaml",
                       fix="recompute features with the exp dir's features section (config.yaml)")


@torch.no_grad()
def log_probs_by_utt(model, cfg: Config, data_dir: Path, batch_frames: int, with_enc: bool = False,
                     progress: Optional[str] = None):
    """Yield ``(utt, (T', V) numpy log-probs)`` in sorted utterance order, batched by length; with
    ``with_enc``, ``(utt, log-probs, (T', E) encoder states on the model's device)`` (attention rescoring).

    With ``progress`` (a label), log ``LABEL: DONE/TOTAL utt (P%)`` every 10% or 30 s
    (:class:`asrtrain.progress.Progress`); an utterance counts as done when the caller asks for the next
    one, so the count includes the caller's own work on it (the search)."""
    from asrtrain.features.dataset import AsrDataset
    from asrtrain.progress import Progress

    data = AsrDataset(data_dir, cfg.model.subsample, None, None)
    utts = sorted(data.lengths, key=lambda u: (data.lengths[u], u))
    shown = Progress(len(utts), progress, log) if progress else None
    try:
        i = 0
        while i < len(utts):
            j = i + 1
            while j < len(utts) and data.lengths[utts[j]] * (j - i + 1) <= batch_frames:
                j += 1
            device = next(model.parameters()).device
            batch = data.collate(utts[i:j]).to(device)
            enc, lens, _ = model.encode(batch.feats, batch.feat_lens)
            lp = model.log_probs(enc).float().cpu()
            for k, u in enumerate(batch.utts):
                n = int(lens[k])
                yield (u, lp[k, :n].numpy(), enc[k, :n]) if with_enc else (u, lp[k, :n].numpy())
                if shown is not None:
                    shown.update(1)
            i = j
    finally:
        if shown is not None:
            shown.close()


def decode(exp_dir: Path, data_dir: Path, out_dir: Path, method: Optional[str] = None,
           beam_size: Optional[int] = None, checkpoint: Optional[Path] = None, lm: Optional[Path] = None,
           words: Optional[Path] = None, lm_weight: Optional[float] = None,
           word_bonus: Optional[float] = None, device: str = "cpu",
           engine: Optional[str] = None, oov_penalty: Optional[float] = None, att_rescore: float = 0.0,
           nbest: int = NBEST) -> Dict[str, int]:
    """Decode every utterance of ``data_dir``; writes ``out_dir/text`` and, when the data dir has
    ``segments`` (and optionally ``reco2file_and_channel``), ``out_dir/ctm``.

    ``lm`` (an ARPA word n-gram) or ``words`` (a vocabulary) select the lexicon search
    (:mod:`asrtrain.decode.lexicon`); its vocabulary is ``words``, or else the LM's. ``engine`` (default
    ``decode.engine``) runs it on flashlight's C++ decoder (:mod:`asrtrain.decode.flashlight`) or ours.
    ``oov_penalty`` opens ours to words outside the vocabulary (:mod:`asrtrain.decode.lexicon`).
    ``att_rescore`` > 0 rescores our search's ``nbest`` best with a joint model's attention decoder
    (:mod:`asrtrain.decode.rescore`). Options the chosen search cannot use are errors
    (:mod:`asrtrain.decode.options`).
    """
    from asrtrain.decode.ctc import greedy, prefix_beam_search
    from asrtrain.decode.word_times import ctm_lines, words_with_times
    from asrtrain.decode.options import check_beam_applies, check_decode_options, check_oov_penalty
    from asrtrain.text.tokenizer import Tokenizer

    check_out_is_not_input(data_dir, out_dir, REFERENCES_LOST)
    check_search(beam_size, lm_weight, word_bonus)  # the exp config's decode section is checked on load
    check_decode_options(method, lm, words, None, None, engine)  # --params may set the LM weight and bonus
    check_oov_penalty(oov_penalty)
    cfg, model = load_model(exp_dir, checkpoint, device)
    check_ctc(cfg, exp_dir, "decode searches CTC outputs")
    check_features(cfg, data_dir)
    method = "lexicon" if (lm or words) else (method or cfg.decode.method)
    check_beam_applies(method, beam_size)
    beam = cfg.decode.beam_size if beam_size is None else beam_size
    lm_weight = cfg.decode.lm_weight if lm_weight is None else lm_weight
    word_bonus = cfg.decode.word_bonus if word_bonus is None else word_bonus
    tok = Tokenizer(Path(exp_dir) / "tokenizer.model")
    engine = engine or cfg.decode.engine
    if oov_penalty is not None and method != "lexicon":
        raise AsrError("an OOV penalty is for the lexicon search",
                       fix="pass --lm LM.arpa (or --words) as well")
    rescore = att_rescore > 0
    if rescore:
        from asrtrain.decode.rescore import check_rescorable, rescored_best
        check_rescorable(model, exp_dir)
        if method != "lexicon" or engine != "ours" or nbest < 1:
            raise AsrError("attention rescoring takes the n-best of our lexicon search",
                           fix="pass --lm LM.arpa (or --words), --engine ours and --nbest >= 1")
    search = _lexicon_search(tok, lm, words, beam, lm_weight, word_bonus, engine, oov_penalty,
                             nbest if rescore else 1) if method == "lexicon" else None
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    segments = _segments(data_dir)
    reco2fc = _reco2fc(data_dir)
    unk_piece = tok.sp.id_to_piece(tok.sp.unk_id())
    frame_s = cfg.features.frame_shift / 1000.0 * cfg.model.subsample
    hyps: Dict[str, str] = {}
    ctm = []
    t0 = time.time()
    audio_s = 0.0
    for utt, lp, *enc in log_probs_by_utt(model, cfg, data_dir, cfg.decode.batch_frames, with_enc=rescore,
                                          progress="decode"):
        audio_s += lp.shape[0] * frame_s
        if rescore:
            tokens, frames, _ = rescored_best(model, search, lp, enc[0], att_rescore)
        elif search is not None:
            tokens, frames, _ = search(lp)
        elif method == "beam":
            tokens, frames, _ = prefix_beam_search(lp, beam=beam)
        else:
            tokens, frames, _ = greedy(lp)
        hyps[utt] = tok.decode(tokens)
        if segments is not None:
            pieces = [tok.sp.id_to_piece(t) for t in tokens]
            ctm += ctm_lines(utt, words_with_times(pieces, frames, frame_s, unk_piece), segments, reco2fc)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_table(out_dir / "text", hyps)
    if segments is not None:
        ctm.sort(key=lambda line: (line.split()[0], line.split()[1], float(line.split()[2])))
        atomic_write_text(out_dir / "ctm", "".join(line + "\n" for line in ctm))
    elapsed = time.time() - t0
    how = method if method == "greedy" else f"{method}, beam {beam}"
    if method == "lexicon":
        how += f", lm {lm or 'none'}, lm_weight {lm_weight:g}, word_bonus {word_bonus:g}, {search.engine}"
        how += ", closed vocabulary" if oov_penalty is None else \
            f", open vocabulary (oov_penalty {oov_penalty:g})"
        how += f", attention rescoring of the {nbest}-best (weight {att_rescore:g})" if rescore else ""
    log.info("decoded %d utterances (%s) in %.1f s, %.1fx real time -> %s", len(hyps), how, elapsed,
             audio_s / max(elapsed, 1e-9), out_dir)
    unfinished = search.unfinished if search is not None else []
    if unfinished:
        log.warning("%d of %d utterances ended inside a word (e.g. '%s'); the search left that unfinished "
                    "word out, as only vocabulary words are output (a larger --beam-size may keep a "
                    "hypothesis that ends at a word's end)", len(unfinished), len(hyps), unfinished[0])
    return {"utterances": len(hyps), "ctm_words": len(ctm)}


def _segments(data_dir: Path) -> Optional[Dict[str, Tuple[str, float, float]]]:
    path = data_dir / "segments"
    if not path.is_file():
        return None
    from asrtrain.data.datadir import parse_segment

    out = {}
    for utt, rest in read_table(path).items():
        try:
            seg = parse_segment(rest)
        except ValueError as err:  # nan, inf, negative or missing times: one line, not a traceback
            raise AsrError(f"malformed segment of '{utt}': {err}", path,
                           fix="recompute the features dir") from None
        out[utt] = (seg.rec, seg.start, seg.end)
    return out


def _reco2fc(data_dir: Path) -> Dict[str, Tuple[str, str]]:
    path = data_dir / "reco2file_and_channel"
    if not path.is_file():
        return {}
    return {rec: tuple(rest.split()[:2]) for rec, rest in read_table(path).items()}


def forward(exp_dir: Path, data_dir: Path, out_ark: Path, checkpoint: Optional[Path] = None,
            device: str = "cpu") -> int:
    """Write log-likelihoods (log-posteriors minus log-priors) as a Kaldi ark+scp of float matrices,
    one row per output frame (at the model's subsampled rate: pass --frame-subsampling-factor to
    Kaldi's decoder when ``model.subsample`` > 1)."""
    import kaldiio

    from asrtrain.model.priors import read_priors

    check_out_ark(data_dir, out_ark)
    cfg, model = load_model(exp_dir, checkpoint, device)
    check_features(cfg, data_dir)
    log_priors = np.log(read_priors(Path(exp_dir) / "priors.txt")).astype(np.float32) \
        if cfg.model.loss == "ce" else None
    out_ark = Path(out_ark)
    out_ark.parent.mkdir(parents=True, exist_ok=True)
    tmp_ark = out_ark.with_name(out_ark.name + ".tmp")
    scp = out_ark.with_suffix(".scp")
    tmp_scp = scp.with_name(scp.name + ".tmp")
    n = 0
    try:
        with kaldiio.WriteHelper(f"ark,scp:{tmp_ark},{tmp_scp}") as writer:
            for utt, lp in log_probs_by_utt(model, cfg, data_dir, cfg.decode.batch_frames,
                                            progress="forward"):
                writer(utt, lp - log_priors if log_priors is not None else lp)
                n += 1
        # The scp names the temp ark; point it at the final name, then move both into place.
        text = tmp_scp.read_text().replace(str(tmp_ark), str(out_ark))
        tmp_ark.replace(out_ark)
        atomic_write_text(scp, text)
    finally:  # a failed write leaves no temp files behind
        for tmp in (tmp_ark, tmp_scp):
            if not tmp.is_dir():
                tmp.unlink(missing_ok=True)
    log.info("wrote %d utterances of log-likelihoods to %s", n, out_ark)
    return n
