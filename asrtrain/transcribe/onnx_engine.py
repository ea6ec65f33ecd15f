"""Transcribe with an ONNX export (``asrtrain export --format onnx``) and no torch: ``asrtrain transcribe
--engine onnx EXPORT_DIR AUDIO...``, or ``OnnxTranscriber.load(EXPORT_DIR).transcribe("a.wav")``.

Everything but the model and the features is the torch engine's own (:class:`Transcriber`: audio reading,
segmentation, CMVN, greedy CTC, word times, sentencepiece): this class only swaps in

- features from kaldi-native-fbank with ``fbank.json``'s options (torchaudio's Kaldi fbank in the torch
  engine; the two agree to about 1e-3, tests/features/test_fbank_parity.py). Dither (``features.dither``
  > 0, as the AN4 recipe trains): the torch engine adds ``dither`` x N(0, 1) to every sample of every frame
  from torch's generator seeded by the key "transcribe"; knf's own dither draws from a process-wide
  generator (its noise would depend on how many files came before), so here knf runs with dither 0 and
  the same noise level is added to the samples before framing, from numpy's generator seeded the same
  way. Each frame then holds i.i.d. noise of the same size as in training, but other values, shared by
  overlapping frames;
- the acoustic model through onnxruntime (``model.onnx``, over padded batches of segments sorted by
  length, as :mod:`asrtrain.transcribe.batching` makes them for both engines);
- audio at another rate than the model's is refused, not resampled (the resampler is torchaudio's).

The search is greedy, or with ``lm`` (or an ``lm.arpa`` in the export) decode's own lexicon search
(:func:`asrtrain.decode.lexicon_search.lexicon_search`, pure Python). Neither torch nor torchaudio is
imported (tests/export run this with both blocked); onnxruntime, kaldi-native-fbank, numpy, soundfile and
sentencepiece are (``pip install 'asrtrain[onnx]'``).
"""

from __future__ import annotations

import json
import logging
import zlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import List, Optional, Sequence, Union

import numpy as np

from asrtrain.config import FeatureConfig
from asrtrain.errors import AsrError
from asrtrain.export.arrays import padded_batch
from asrtrain.export.bundle import CMVN_JSON, FBANK_JSON, FORMATS, LAYOUT, META_JSON
from asrtrain.features.fbank import feature_dim  # torch-free at import (fbank() imports it)
from asrtrain.transcribe.model import Transcriber

log = logging.getLogger("asrtrain.transcribe")
DITHER_KEY = "transcribe"  # the seed key Transcriber.raw_features gives fbank's dither
NEEDS = "pip install onnxruntime kaldi-native-fbank (or pip install 'asrtrain[onnx]')"


@dataclass(frozen=True)
class ExportedModel:
    """What :class:`Transcriber` reads of a model config: its subsampling."""
    subsample: int


@dataclass(frozen=True)
class ExportedConfig:
    """An export's ``fbank.json`` and ``cmvn.json`` as the features config, and its subsampling."""
    features: FeatureConfig
    model: ExportedModel


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise AsrError("missing from the export", path, fix="export the model again (asrtrain export)")
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise AsrError(f"not readable json ({err})", path, fix="export the model again (asrtrain export)") from None


def knf_options(features: FeatureConfig):
    """``kaldi_native_fbank.FbankOptions`` set one to one from the features config, dither 0 (the engine
    adds its own, seeded: module docstring)."""
    import kaldi_native_fbank as knf

    o = knf.FbankOptions()
    f = o.frame_opts
    f.samp_freq = float(features.sample_rate)
    f.frame_length_ms = features.frame_length
    f.frame_shift_ms = features.frame_shift
    f.dither = 0.0
    f.preemph_coeff = features.preemphasis_coefficient
    f.remove_dc_offset = features.remove_dc_offset
    f.window_type = features.window_type
    f.round_to_power_of_two = features.round_to_power_of_two
    f.snip_edges = features.snip_edges
    o.mel_opts.num_bins = features.num_mel_bins
    o.mel_opts.low_freq = features.low_freq
    o.mel_opts.high_freq = features.high_freq
    o.use_energy = features.use_energy
    o.energy_floor = 0.0
    o.use_log_fbank = features.use_log_fbank
    return o


class OnnxTranscriber(Transcriber):
    """``OnnxTranscriber.load("exported_dir").transcribe("a.wav").text``: :class:`Transcriber` over an
    ONNX export, without torch."""

    def __init__(self, cfg: ExportedConfig, session, tok, stats, search=None, max_segment_s: float = 30.0,
                 input_scale: float = 32768.0):
        super().__init__(cfg, session, tok, stats, search, max_segment_s)
        self.session, self.input_scale = session, input_scale
        self._knf = knf_options(cfg.features)
        self.dim = feature_dim(cfg.features)

    @classmethod
    def load(cls, model: Union[str, Path], lm: Optional[Union[str, Path]] = None,
             params: Optional[Path] = None, max_segment_s: float = 30.0, threads: int = 1) -> "OnnxTranscriber":
        """``model``: a directory written by ``asrtrain export --format onnx``, checked against its manifest.
        ``lm``: an ARPA word LM for the lexicon search (``params``: tune-lm's best.yaml)."""
        from asrtrain.decode.options import resolve_threads
        from asrtrain.text.tokenizer import Tokenizer
        from asrtrain.transcribe.manifest import kind, verify

        model = Path(model)
        if not model.is_dir():
            raise AsrError("not a directory", model, fix="give the directory asrtrain export --format onnx wrote")
        if not (model / META_JSON).is_file() and (kind(model) == "pack" or (model / "final.pt").is_file()):
            what = "a pack" if kind(model) == "pack" else "an exp dir"
            raise AsrError(f"is {what}, not an ONNX export (the onnx engine runs the model.onnx of asrtrain "
                           "export)", model, fix=f"asrtrain export {model} OUT --format onnx, then transcribe "
                           "--engine onnx OUT; or drop --engine onnx (the torch engine reads it)")
        verify(model)  # first: every file read below is the one exported
        meta = _read_json(model / META_JSON)
        if meta.get("layout") != LAYOUT:
            raise AsrError("not an asrtrain export", model / META_JSON, fix="asrtrain export MODEL OUT --format onnx")
        if meta.get("format") != "onnx":
            raise AsrError(f"is a {meta.get('format')} export; the onnx engine runs {FORMATS['onnx']}", model,
                           fix="export with --format onnx, or transcribe with the torch engine")
        graph = model / FORMATS["onnx"]
        if not graph.is_file():
            raise AsrError("missing from the export", graph, fix="export the model again (asrtrain export)")
        try:
            import kaldi_native_fbank  # noqa: F401  (named here, before any audio is read)
            import onnxruntime as ort
        except ImportError as err:
            raise AsrError(f"the onnx engine needs {err.name}", fix=NEEDS) from None
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = resolve_threads(threads)
        opts.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(str(graph), opts, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime's Fail / InvalidProtobuf / ... on a damaged file
            why = " ".join(str(err).split())[:200]
            raise AsrError(f"onnxruntime cannot load it ({why})", graph,
                           fix="export the model again (asrtrain export)") from None
        fb, cm = _read_json(model / FBANK_JSON), _read_json(model / CMVN_JSON)
        names = {f.name for f in fields(FeatureConfig)}
        features = FeatureConfig(**{k: v for k, v in fb.items() if k in names},
                                 cmvn=cm["kind"], cmvn_norm_vars=bool(cm.get("norm_vars", True)))
        stats = np.asarray(cm["stats"], dtype=np.float64) if cm["kind"] == "global" else None
        tok = Tokenizer(model / "tokenizer.model")
        if lm is None and (model / "lm.arpa").is_file():
            lm = model / "lm.arpa"
            params = params or ((model / "params.yaml") if (model / "params.yaml").is_file() else None)
        search = _search(tok, Path(lm), params, meta["decode"]) if lm is not None else None
        cfg = ExportedConfig(features, ExportedModel(int(meta["subsample"])))
        return cls(cfg, session, tok, stats, search, max_segment_s, float(fb.get("input_scale", 32768.0)))

    def raw_features(self, wave: np.ndarray) -> np.ndarray:
        """Mono float32 [n] at the model's rate -> kaldi-native-fbank features [T, D] before CMVN."""
        import kaldi_native_fbank as knf

        samples = np.asarray(wave, dtype=np.float32) * self.input_scale
        if self.cfg.features.dither > 0:
            noise = np.random.default_rng(zlib.crc32(DITHER_KEY.encode("utf-8"))).standard_normal(len(samples))
            samples = samples + (self.cfg.features.dither * noise).astype(np.float32)
        fb = knf.OnlineFbank(self._knf)
        fb.accept_waveform(float(self.rate), np.ascontiguousarray(samples, dtype=np.float32))
        fb.input_finished()
        if fb.num_frames_ready == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([fb.get_frame(i) for i in range(fb.num_frames_ready)]).astype(np.float32, copy=False)

    def log_probs(self, feats: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Features [T, D] each -> log-probs [T', V] each, through onnxruntime as one padded batch."""
        x, lengths = padded_batch(feats)
        lp, out_lengths = self.session.run(["log_probs", "out_lengths"], {"feats": x, "lengths": lengths})
        return [lp[i, : int(out_lengths[i])] for i in range(len(feats))]

    def audio(self, audio: Union[str, Path, np.ndarray], sample_rate: Optional[int] = None,
              channel: Optional[int] = None) -> np.ndarray:
        """A path or samples -> mono float32 [n]; audio at another rate than the model's is refused."""
        from asrtrain.transcribe.audio_in import python_input, to_model_input

        data, rate, name, done = python_input(audio, sample_rate)
        if rate != self.rate:
            raise AsrError(f"audio at {rate} Hz; the model takes {self.rate} Hz and the onnx engine does "
                           "not resample", name,
                           fix=f"resample it first (sox IN -r {self.rate} OUT), or use --engine torch")
        wave, more = to_model_input(data, rate, self.rate, channel, name)
        done += [more] if more else []
        if done:
            log.info("%s: %s", name, ", ".join(done))
        return wave


def _search(tok, lm: Path, params: Optional[Path], decode: dict):
    """Decode's lexicon search (ours) over ``lm``, with the training config's ``decode`` weights (from
    meta.json) or tune-lm's from ``params``."""
    from asrtrain.decode.lexicon_search import lexicon_search

    lw, wb, beam, oov = decode["lm_weight"], decode["word_bonus"], decode["beam_size"], None
    if params is not None:
        from asrtrain.decode.tune import read_params
        p = read_params(params)
        lw, wb, beam, oov = p["lm_weight"], p["word_bonus"], p["beam_size"], p["oov_penalty"]
        if p.get("att_rescore"):  # the export holds the CTC path only: say what is not done
            log.warning("%s: attention rescoring (att_rescore %s) is not done by the onnx engine (the export "
                        "has no attention decoder); the torch engine does it", params, p["att_rescore"])
    return lexicon_search(tok, lm, None, beam, lw, wb, "ours", oov, 1)
