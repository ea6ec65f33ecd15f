"""The :class:`Transcriber`: an exp dir's model over raw audio, features and CMVN as training made them.

CMVN follows ``features.cmvn`` of the exp's config: ``global`` uses the training set's stats, which
transcription needs as a file (``EXP/cmvn_global.ark``, or ``cmvn_stats=`` naming the training feature
dir's ``cmvn_global.ark``); ``speaker`` uses each utterance's own stats (or a speaker's, with ``utt2spk``
in :meth:`Transcriber.transcribe_many`); ``none`` nothing. Search is decode's own
(:mod:`asrtrain.decode.ctc`, :func:`asrtrain.decode.run._lexicon_search`); word times are decode's
(:func:`asrtrain.decode.word_times.words_with_times`) shifted by each segment's start.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from asrtrain.errors import AsrError

log = logging.getLogger("asrtrain.transcribe")


@dataclass
class Word:
    word: str
    start: float  # seconds from the start of the file
    end: float


@dataclass
class Result:
    """One file's transcript: ``text``, timed ``words``, the ``file`` and its ``segments`` (s, s)."""
    text: str
    words: List[Word] = field(default_factory=list)
    file: Optional[str] = None
    segments: List[Tuple[float, float]] = field(default_factory=list)


class Transcriber:
    """Load once, transcribe many: ``Transcriber.load("exp/blstm").transcribe("a.wav").text``."""

    def __init__(self, cfg, model, tok, stats: Optional[np.ndarray], search=None, max_segment_s: float = 30.0):
        self.cfg, self.model, self.tok, self.stats, self.search = cfg, model, tok, stats, search
        self.max_segment_s = max_segment_s
        self.rate = cfg.features.sample_rate
        self.frame_s = cfg.features.frame_shift / 1000.0 * cfg.model.subsample

    @classmethod
    def load(cls, model: Union[str, Path], lm: Optional[Union[str, Path]] = None, device: str = "cpu",
             checkpoint: Optional[Path] = None, cmvn_stats: Optional[Path] = None,
             params: Optional[Path] = None, max_segment_s: float = 30.0) -> "Transcriber":
        """``model``: an exp dir (config.yaml, tokenizer.model, final.pt). ``lm``: an ARPA word LM for
        decode's lexicon search (``params``: tune-lm's best.yaml for its weights)."""
        from asrtrain.decode.run import _lexicon_search, load_model
        from asrtrain.features.cmvn import read_stats
        from asrtrain.text.tokenizer import Tokenizer

        from asrtrain.transcribe.pack import verify

        model = Path(model)
        verify(model)
        if lm is None and (model / "lm.arpa").is_file():
            lm = model / "lm.arpa"
            params = params or ((model / "params.yaml") if (model / "params.yaml").is_file() else None)
        cfg, net = load_model(model, checkpoint, device)
        if cfg.model.loss != "ctc":
            raise AsrError("this model was trained with CE targets; transcribe needs a CTC model", model)
        tok = Tokenizer(model / "tokenizer.model")
        stats = None
        if cfg.features.cmvn == "global":
            path = Path(cmvn_stats) if cmvn_stats else model / "cmvn_global.ark"
            if not path.is_file():
                raise AsrError("the model uses global CMVN and its training stats are not here", path,
                               fix="pass --cmvn-stats TRAIN_FEATS/cmvn_global.ark (or copy it into the exp dir)")
            stats = read_stats(str(path))
        search = None
        if lm is not None:
            d = cfg.decode
            lw, wb, beam, oov = d.lm_weight, d.word_bonus, d.beam_size, None
            if params is not None:
                from asrtrain.decode.tune import read_params
                p = read_params(params)
                lw, wb, beam, oov = p["lm_weight"], p["word_bonus"], p["beam_size"], p["oov_penalty"]
            search = _lexicon_search(tok, Path(lm), None, beam, lw, wb, "ours", oov, 1)
        return cls(cfg, net, tok, stats, search, max_segment_s)

    def raw_features(self, wave: np.ndarray) -> np.ndarray:
        """Mono float32 [n] at the model's rate -> fbank [T, D] before CMVN."""
        from asrtrain.features.fbank import fbank
        return fbank(wave, self.rate, self.cfg.features, seed="transcribe")

    def features(self, wave: np.ndarray, speaker_stats: Optional[np.ndarray] = None) -> np.ndarray:
        """Mono float32 [n] at the model's rate -> CMVN'd features [T, D] as training computed them;
        a speaker-CMVN model uses ``speaker_stats`` ([2, D+1]) when given, else the audio's own."""
        from asrtrain.features import cmvn

        conf = self.cfg.features
        feats = self.raw_features(wave)
        if feats.shape[0] == 0:
            raise AsrError(f"shorter than one frame ({len(wave)} samples)", fix="give longer audio")
        if conf.cmvn == "global":
            return cmvn.apply(feats, self.stats, conf.cmvn_norm_vars)
        if conf.cmvn == "speaker":
            stats = speaker_stats if speaker_stats is not None else cmvn.accumulate(feats)
            return cmvn.apply(feats, stats, conf.cmvn_norm_vars)
        return feats

    def log_probs(self, feats: Sequence[np.ndarray]) -> List[np.ndarray]:
        """Features [T, D] each -> log-probs [T', V] each, as one padded batch."""
        import torch
        device = next(self.model.parameters()).device
        lens = torch.tensor([f.shape[0] for f in feats], dtype=torch.long)
        x = torch.zeros(len(feats), int(lens.max()), feats[0].shape[1])
        for i, f in enumerate(feats):
            x[i, : f.shape[0]] = torch.from_numpy(f)
        with torch.no_grad():
            enc, out_lens, _ = self.model.encode(x.to(device), lens)
            lp = self.model.log_probs(enc).float().cpu()
        return [lp[i, : int(out_lens[i])].numpy() for i in range(len(feats))]

    def decode(self, lp: np.ndarray, offset_s: float = 0.0) -> Tuple[str, List[Word]]:
        """Decode's search over log-probs [T', V] -> (text, words timed from ``offset_s``)."""
        from asrtrain.decode.ctc import greedy
        from asrtrain.decode.word_times import words_with_times

        tokens, frames, _ = self.search(lp) if self.search is not None else greedy(lp)
        sp = self.tok.sp
        pieces = [sp.id_to_piece(t) for t in tokens]
        words = [Word(w, round(offset_s + s, 3), round(offset_s + s + d, 3))
                 for w, s, d in words_with_times(pieces, frames, self.frame_s, sp.id_to_piece(sp.unk_id()))]
        return self.tok.decode(tokens), words

    def audio(self, audio: Union[str, Path, np.ndarray], sample_rate: Optional[int] = None,
              channel: Optional[int] = None) -> np.ndarray:
        """A path or samples -> mono float32 [n] at the model's rate (logs what was done to it)."""
        from asrtrain.transcribe.audio_in import read_any, to_model_input

        name = None
        if isinstance(audio, (str, Path)):
            name = str(audio)
            data, sample_rate = read_any(name)
        else:
            if sample_rate is None:
                raise AsrError("samples need their sample_rate", fix="transcribe(samples, sample_rate=16000)")
            data = audio
        wave, done = to_model_input(data, int(sample_rate), self.rate, channel, name or "samples")
        if done:
            log.info("%s: %s", name or "samples", done)
        return wave

    def transcribe(self, audio: Union[str, Path, np.ndarray], sample_rate: Optional[int] = None,
                   channel: Optional[int] = None, speaker_stats: Optional[np.ndarray] = None) -> Result:
        """A path (any file libsndfile reads, or a ``cmd |`` pipe) or samples ([n] or [n, channels] at
        ``sample_rate``) -> :class:`Result`. Long audio is cut at quiet points into segments; a
        speaker-CMVN model normalises with ``speaker_stats`` when given (:meth:`audio`, then
        :func:`asrtrain.features.cmvn.accumulate` over a speaker's files), else the whole file's stats."""
        from asrtrain.features import cmvn
        from asrtrain.transcribe.segment import cut_points

        name = str(audio) if isinstance(audio, (str, Path)) else None
        wave = self.audio(audio, sample_rate, channel)
        pieces = cut_points(wave, self.rate, self.max_segment_s)
        if speaker_stats is None and self.cfg.features.cmvn == "speaker" and len(pieces) > 1:
            speaker_stats = cmvn.accumulate(self.raw_features(wave))  # the file's stats, for every segment
        feats = [self.features(wave[lo:hi], speaker_stats) for lo, hi in pieces]
        texts, words = [], []
        for (lo, _), lp in zip(pieces, self.log_probs(feats)):
            t, w = self.decode(lp, lo / self.rate)
            texts.append(t)
            words += w
        return Result(" ".join(t for t in texts if t), words, name,
                      [(lo / self.rate, hi / self.rate) for lo, hi in pieces])
