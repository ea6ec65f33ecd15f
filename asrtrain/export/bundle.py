"""``asrtrain export MODEL OUT``: the acoustic model as ONNX or TorchScript, in a directory that holds
what a deployment needs besides the graph, readable without torch or asrtrain.

Layout of OUT:

- ``model.onnx`` (``--format onnx``) or ``model.ts`` (``--format torchscript``): the graph of
  :mod:`asrtrain.export.graph`, CMVN'd features ``feats`` float32 [B, T, D] and ``lengths`` int64 [B] ->
  ``log_probs`` float32 [B, T', V] and ``out_lengths`` int64 [B], checked against torch when written.
- ``fbank.json``: the Kaldi fbank options (Kaldi's names, as ``features`` in ``config.yaml``), with
  ``input_scale`` (samples in [-1, 1] times 32768, the int16 range Kaldi sees) and ``energy_floor``.
- ``cmvn.json``: ``kind`` (global, speaker, none) and ``norm_vars``; for ``global`` the training set's
  Kaldi stats ``stats`` [2][D+1] and, ready to apply, ``scale`` [D] and ``offset`` [D]
  (normalised = feats * scale + offset); ``speaker`` means each utterance's own stats.
- ``tokenizer.model`` (sentencepiece) and ``tokens.txt`` (``piece id`` lines; id 0 is the CTC blank).
- ``meta.json``: the graph's names and shapes, vocabulary size, blank id, subsampling, frame shift, the
  lexicon search's weights from the training config, the check's max difference, the asrtrain version; ``config.yaml``: the training config, for reference;
  ``lm.arpa`` and ``params.yaml`` when MODEL is a pack holding them.
- ``MANIFEST.sha256``: every file's sha256 (:func:`asrtrain.transcribe.manifest.verify` checks it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Optional, Sequence, Tuple

import numpy as np

from asrtrain.errors import AsrError

log = logging.getLogger("asrtrain.export")

FORMATS = {"onnx": "model.onnx", "torchscript": "model.ts"}
FBANK_JSON, CMVN_JSON, META_JSON, TOKENS = "fbank.json", "cmvn.json", "meta.json", "tokens.txt"
LAYOUT = "asrtrain-export"
LAYOUT_VERSION = 1
INPUT_SCALE = 32768.0  # asrtrain.features.fbank.INT16_SCALE, repeated so this module loads without torch
_NOT_FBANK = ("cmvn", "cmvn_norm_vars", "resample", "kind")


def fbank_options(features) -> dict:
    """The fbank part of a :class:`asrtrain.config.FeatureConfig` as ``fbank.json`` holds it."""
    opts = {k: v for k, v in dataclasses.asdict(features).items() if k not in _NOT_FBANK}
    return {**opts, "input_scale": INPUT_SCALE, "energy_floor": 0.0}


def cmvn_options(features, stats: Optional[np.ndarray]) -> dict:
    """``cmvn.json``: the kind, and for global CMVN the stats with the scale and offset they give."""
    out = {"kind": features.cmvn, "norm_vars": bool(features.cmvn_norm_vars)}
    if features.cmvn == "global":
        from asrtrain.features.cmvn import transform
        scale, offset = transform(stats, features.cmvn_norm_vars)
        out.update(stats=np.asarray(stats, np.float64).tolist(), scale=scale.tolist(), offset=offset.tolist())
    elif features.cmvn == "speaker":
        out["note"] = ("per utterance: Kaldi stats (sums, sums of squares, frame count) of the utterance's own "
                       "features, applied as apply-cmvn does")
    return out


def export(model: Path, out: Path, fmt: str = "onnx", checkpoint: Optional[Path] = None,
           cmvn_stats: Optional[Path] = None, threads: int = 1) -> Path:
    """Export ``model`` (an exp dir or a pack) into the new directory ``out`` (built in a staging dir and
    moved into place: a failed export leaves nothing). Refuses, in one line, a graph that does not match
    torch (:func:`asrtrain.export.graph.check`)."""
    from asrtrain import __version__
    from asrtrain.atomic import staging_dir, swap_dir
    from asrtrain.decode.run import check_ctc, load_model
    from asrtrain.export import graph
    from asrtrain.features.cmvn import training_stats
    from asrtrain.text.tokenizer import Tokenizer
    from asrtrain.transcribe.manifest import verify, write_manifest

    model, out = Path(model), Path(out)
    if fmt not in FORMATS:
        raise AsrError(f"unknown export format '{fmt}'", fix="give --format onnx or --format torchscript")
    if out.exists():
        raise AsrError("exists already", out, fix="give a new directory, or remove it")
    verify(model)
    cfg, net = load_model(model, checkpoint, "cpu")
    check_ctc(cfg, model, "export writes a CTC model's graph")
    if fmt == "onnx":
        graph.check_onnx_supported(cfg.model)
    stats = training_stats(model, cfg.features.cmvn, cmvn_stats)
    tok = Tokenizer(model / "tokenizer.model")
    stage = staging_dir(out)
    try:
        t0 = time.time()
        target = stage / FORMATS[fmt]
        if fmt == "onnx":
            diff = graph.export_onnx(net, target, threads)
        else:
            diff = graph.export_torchscript(net, target)
        seconds = time.time() - t0
        _write_json(stage / FBANK_JSON, fbank_options(cfg.features))
        _write_json(stage / CMVN_JSON, cmvn_options(cfg.features, stats))
        shutil.copy(model / "tokenizer.model", stage / "tokenizer.model")
        (stage / TOKENS).write_text("".join(f"{tok.sp.id_to_piece(i)} {i}\n" for i in range(tok.vocab_size)))
        shutil.copy(model / "config.yaml", stage / "config.yaml")
        for name in ("lm.arpa", "params.yaml"):
            if (model / name).is_file():
                shutil.copy(model / name, stage / name)
        _write_json(stage / META_JSON, {
            "layout": LAYOUT, "layout_version": LAYOUT_VERSION, "format": fmt, "graph": FORMATS[fmt],
            "asrtrain": __version__, "source": model.resolve().name,
            "checkpoint": Path(checkpoint).name if checkpoint else "final.pt",
            "inputs": {"feats": "float32 [batch, frames, feature_dim]", "lengths": "int64 [batch]"},
            "outputs": {"log_probs": "float32 [batch, out_frames, vocab_size]", "out_lengths": "int64 [batch]"},
            "feature_dim": cfg.model.input_dim, "vocab_size": cfg.model.num_targets, "blank": 0,
            "subsample": cfg.model.subsample, "frame_shift_ms": cfg.features.frame_shift,
            "decode": {"lm_weight": cfg.decode.lm_weight, "word_bonus": cfg.decode.word_bonus,
                       "beam_size": cfg.decode.beam_size},
            "opset": graph.OPSET if fmt == "onnx" else None,
            "check": {"lengths": list(graph.CHECK_LENGTHS), "max_abs_diff": diff, "tolerance": graph.TOLERANCE}})
        write_manifest(stage)
        swap_dir(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    log.info("exported %s as %s in %.1f s; log-probs within %.2g of torch on a batch of lengths %s",
             model, fmt, seconds, diff, list(graph.CHECK_LENGTHS))
    return out


def _write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=1) + "\n")
