"""The :class:`Transcriber`: an exp dir's model over raw audio, features and CMVN as training made them.

CMVN follows ``features.cmvn`` of the exp's config: ``global`` uses the training set's stats, which
transcription needs as a file (``EXP/cmvn_global.ark``, or ``cmvn_stats=`` naming the training feature
dir's ``cmvn_global.ark``); ``speaker`` uses the file's own stats (or a speaker's, ``speaker_stats`` in
:meth:`Transcriber.transcribe_many`); ``none`` nothing. Search is decode's own
(:mod:`asrtrain.decode.ctc`, :func:`asrtrain.decode.lexicon_search.lexicon_search`), with decode's
attention rescoring of its n-best (:func:`asrtrain.decode.rescore.rescored_best`) when tune-lm's
``params`` choose it for a joint model; word times are decode's
(:func:`asrtrain.decode.word_times.words_with_times`) shifted by each segment's start.

A long file is cut into segments (:mod:`asrtrain.transcribe.segment`) on multiples of the frame shift, and
each frame of the file is computed once: a segment's fbank frames are the slice of the whole file's
frames that start inside it (:meth:`Transcriber.segment_features`), so a speaker-CMVN file's stats are
its whole-file stats without a second fbank pass. Segments of many files are run through the model in
batches sorted by length (:mod:`asrtrain.transcribe.batching`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from asrtrain.config import DecodeConfig
from asrtrain.errors import AsrError
from asrtrain.transcribe.result import Result, Word  # noqa: F401 - part of this module's API

log = logging.getLogger("asrtrain.transcribe")

Audio = Union[str, Path, np.ndarray]


@dataclass
class Prepared:
    """One file ready for the model: its ``name``, segment sample ranges and their CMVN'd features [T, D]."""
    name: Optional[str]
    pieces: List[Tuple[int, int]]
    feats: List[np.ndarray]


class Transcriber:
    """Load once, transcribe many: ``Transcriber.load("exp/blstm").transcribe("a.wav").text``."""

    def __init__(self, cfg, model, tok, stats: Optional[np.ndarray], search=None, max_segment_s: float = 30.0,
                 att_rescore: float = 0.0, batch_frames: int = DecodeConfig.batch_frames):
        self.cfg, self.model, self.tok, self.stats, self.search = cfg, model, tok, stats, search
        if not (isinstance(max_segment_s, (int, float)) and math.isfinite(max_segment_s)
                and max_segment_s >= 1):
            raise AsrError(f"--max-segment {max_segment_s} must be at least 1 second",
                           fix="give e.g. --max-segment 30")
        self.max_segment_s = max_segment_s
        self.att_rescore = att_rescore  # > 0: rescore the search's n-best with the attention decoder
        self.batch_frames = batch_frames  # padded frames a batch holds unless asked otherwise
        self.rate = cfg.features.sample_rate
        self.frame_s = cfg.features.frame_shift / 1000.0 * cfg.model.subsample
        # samples per frame shift and per window, truncated as Kaldi and torchaudio do
        self.shift = int(self.rate * cfg.features.frame_shift / 1000.0)
        self.window = int(self.rate * cfg.features.frame_length / 1000.0)

    @classmethod
    def load(cls, model: Union[str, Path], lm: Optional[Union[str, Path]] = None, device: str = "cpu",
             checkpoint: Optional[Path] = None, cmvn_stats: Optional[Path] = None,
             params: Optional[Path] = None, max_segment_s: float = 30.0) -> "Transcriber":
        """``model``: an exp dir (config.yaml, tokenizer.model, final.pt) or a pack (model.safetensors).
        ``lm``: an ARPA word LM for decode's lexicon search; ``params``: tune-lm's best.yaml for its
        weights, beam, OOV penalty and, for a joint CTC/attention model, attention rescoring."""
        from asrtrain.decode.run import check_ctc, load_model
        from asrtrain.features.cmvn import training_stats
        from asrtrain.text.tokenizer import Tokenizer

        from asrtrain.transcribe.manifest import verify

        model = Path(model)
        verify(model)
        if lm is None and (model / "lm.arpa").is_file():
            lm = model / "lm.arpa"
            params = params or ((model / "params.yaml") if (model / "params.yaml").is_file() else None)
        check_params_have_lm(lm, params)
        cfg, net = load_model(model, checkpoint, device)
        check_ctc(cfg, model, "transcribe needs a CTC model")
        tok = Tokenizer(model / "tokenizer.model")
        stats = training_stats(model, cfg.features.cmvn, cmvn_stats)
        search, att = lexicon_for(cfg, net, tok, model, lm, params)
        return cls(cfg, net, tok, stats, search, max_segment_s, att, cfg.decode.batch_frames)

    def raw_features(self, wave: np.ndarray) -> np.ndarray:
        """Mono float32 [n] at the model's rate -> fbank [T, D] before CMVN."""
        from asrtrain.features.fbank import fbank
        return fbank(wave, self.rate, self.cfg.features, seed="transcribe")

    def segment_features(self, wave: np.ndarray, pieces: Sequence[Tuple[int, int]]) -> List[np.ndarray]:
        """The whole file's fbank frames [T, D] (before CMVN), split among ``pieces`` (sample ranges that
        tile ``wave``): each piece gets the frames that start inside it, each frame computed once.

        With ``snip_edges`` (Kaldi's default) frame t covers samples [t x shift, t x shift + window), so the
        frames of a piece [lo, hi) whose ends are multiples of the shift are the fbank of
        ``wave[lo : hi + window - shift]``: each piece is computed on its own, sharing the window's overlap
        with the next. Without ``snip_edges`` (frames centred, edges reflected) the whole file is computed
        and sliced. The dither, when ``features.dither`` > 0, is drawn per piece (seeded alike)."""
        n = len(wave)
        if not self.cfg.features.snip_edges:
            whole = self.raw_features(wave)
            at = [min(len(whole), lo // self.shift) for lo, _ in pieces[1:]]
            return np.split(whole, at) if at else [whole]
        ends = [hi + self.window - self.shift for _, hi in pieces[:-1]] + [n]
        return [self.raw_features(wave[lo:end]) for (lo, _), end in zip(pieces, ends)]

    def features(self, wave: np.ndarray, speaker_stats: Optional[np.ndarray] = None) -> np.ndarray:
        """Mono float32 [n] at the model's rate -> CMVN'd features [T, D] as training computed them;
        a speaker-CMVN model uses ``speaker_stats`` ([2, D+1]) when given, else the audio's own."""
        feats = self.raw_features(wave)
        if feats.shape[0] == 0:
            raise AsrError(f"shorter than one frame ({len(wave)} samples)", fix="give longer audio")
        return self._cmvn([feats], speaker_stats)[0]

    def _cmvn(self, raw: List[np.ndarray], speaker_stats: Optional[np.ndarray]) -> List[np.ndarray]:
        """CMVN of one file's feature pieces as the model's ``features.cmvn`` says: speaker CMVN with
        ``speaker_stats``, else the stats of all the pieces together (the whole file's)."""
        from asrtrain.features import cmvn

        conf = self.cfg.features
        if conf.cmvn == "global":
            stats = self.stats
        elif conf.cmvn == "speaker":
            stats = speaker_stats
            if stats is None:
                for f in raw:
                    stats = cmvn.accumulate(f, stats) if len(f) else stats
        else:
            return raw
        return [cmvn.apply(f, stats, conf.cmvn_norm_vars) for f in raw]

    def log_probs(self, feats: Sequence[np.ndarray], with_enc: bool = False) -> List:
        """Features [T, D] each -> log-probs [T', V] each, as one padded batch; with ``with_enc``,
        ``(log-probs, encoder states [T', E] on the model's device)`` each (attention rescoring)."""
        import torch
        device = next(self.model.parameters()).device
        lens = torch.tensor([f.shape[0] for f in feats], dtype=torch.long)
        x = torch.zeros(len(feats), int(lens.max()), feats[0].shape[1])
        for i, f in enumerate(feats):
            x[i, : f.shape[0]] = torch.from_numpy(f)
        with torch.no_grad():
            enc, out_lens, _ = self.model.encode(x.to(device), lens)
            lp = self.model.log_probs(enc).float().cpu()
        lps = [lp[i, : int(out_lens[i])].numpy() for i in range(len(feats))]
        return [(lps[i], enc[i, : int(out_lens[i])]) for i in range(len(feats))] if with_enc else lps

    def decode(self, lp: np.ndarray, offset_s: float = 0.0, enc=None) -> Tuple[str, List[Word]]:
        """Decode's search over log-probs [T', V] -> (text, words timed from ``offset_s``); with
        attention rescoring, ``enc`` is the same segment's encoder states [T', E]."""
        from asrtrain.decode.ctc import greedy
        from asrtrain.decode.word_times import words_with_times

        if lp.shape[0] == 0:
            return "", []
        if self.att_rescore > 0:
            if enc is None:
                raise ValueError("attention rescoring needs the encoder states (log_probs with_enc=True)")
            from asrtrain.decode.rescore import rescored_best
            tokens, frames, _ = rescored_best(self.model, self.search, lp, enc, self.att_rescore)
        else:
            tokens, frames, _ = self.search(lp) if self.search is not None else greedy(lp)
        sp = self.tok.sp
        pieces = [sp.id_to_piece(t) for t in tokens]
        words = [Word(w, round(offset_s + s, 3), round(offset_s + s + d, 3))
                 for w, s, d in words_with_times(pieces, frames, self.frame_s, sp.id_to_piece(sp.unk_id()))]
        return self.tok.decode(tokens), words

    def audio(self, audio: Audio, sample_rate: Optional[int] = None, channel: Optional[int] = None
              ) -> np.ndarray:
        """A path or samples -> mono float32 [n] at the model's rate (logs what was done to it); samples
        as :func:`asrtrain.transcribe.audio_in.from_python` takes them (integer PCM scaled, [channels, n]
        turned round)."""
        from asrtrain.transcribe.audio_in import python_input, to_model_input

        data, rate, name, done = python_input(audio, sample_rate)
        wave, more = to_model_input(data, rate, self.rate, channel, name)
        done += [more] if more else []
        if done:
            log.info("%s: %s", name, ", ".join(done))
        return wave

    def raw(self, audio: Audio, sample_rate: Optional[int] = None, channel: Optional[int] = None
            ) -> Prepared:
        """Read and cut one file, its pieces' fbank frames before CMVN (:meth:`prepare` without CMVN)."""
        from asrtrain.transcribe.segment import cut_points

        name = str(audio) if isinstance(audio, (str, Path)) else None
        wave = self.audio(audio, sample_rate, channel)
        pieces = cut_points(wave, self.rate, self.max_segment_s, align=self.shift)
        raw = self.segment_features(wave, pieces)
        if sum(len(f) for f in raw) == 0:
            raise AsrError(f"shorter than one frame ({len(wave)} samples)", name, fix="give longer audio")
        return Prepared(name, pieces, raw)

    def normalised(self, raw: Prepared, speaker_stats: Optional[np.ndarray] = None) -> Prepared:
        """:meth:`raw`'s pieces after the model's CMVN (``speaker_stats`` for a speaker-CMVN model)."""
        return Prepared(raw.name, raw.pieces, self._cmvn(raw.feats, speaker_stats))

    def prepare(self, audio: Audio, sample_rate: Optional[int] = None, channel: Optional[int] = None,
                speaker_stats: Optional[np.ndarray] = None) -> Prepared:
        """Read, cut and featurise one file (:meth:`transcribe` without the model)."""
        return self.normalised(self.raw(audio, sample_rate, channel), speaker_stats)

    def transcribe(self, audio: Audio, sample_rate: Optional[int] = None, channel: Optional[int] = None,
                   speaker_stats: Optional[np.ndarray] = None) -> Result:
        """A path (any file libsndfile reads, or a ``cmd |`` pipe) or samples ([n] or [n, channels] at
        ``sample_rate``) -> :class:`Result`. Long audio is cut at quiet points into segments; a
        speaker-CMVN model normalises with ``speaker_stats`` when given (:meth:`audio`, then
        :func:`asrtrain.features.cmvn.accumulate` over a speaker's files), else the whole file's stats."""
        from asrtrain.transcribe.batching import decode_prepared

        return decode_prepared(self, [self.prepare(audio, sample_rate, channel, speaker_stats)])[0]

    def transcribe_many(self, inputs: Iterable[Tuple[str, Audio]], channel: Optional[int] = None,
                        speaker_stats: Optional[Mapping[str, np.ndarray]] = None, batch_size: int = 16,
                        batch_frames: Optional[int] = None, utt2spk: Optional[Mapping[str, str]] = None
                        ) -> Iterator[Tuple[str, Union[Result, AsrError]]]:
        """``(key, path or samples at the model's rate)`` pairs -> ``(key, Result)`` in input order, or
        ``(key, AsrError)`` for a file that could not be read. Segments of many files go through the model
        together, sorted by length, at most ``batch_size`` segments and ``batch_frames`` padded frames a
        batch (default the model's ``decode.batch_frames``); ``speaker_stats`` maps a key to its speaker's
        stats. ``utt2spk`` (key -> speaker; a speaker-CMVN model) normalises each file with the stats of
        all its speaker's files, each file read and featurised once; results then come once every file
        has been decoded."""
        from asrtrain.transcribe.audio_in import check_channel
        from asrtrain.transcribe.batching import transcribe_by_speaker, transcribe_many

        channel = check_channel(channel)  # here, not per file: a bad channel fails the call, not each input
        if utt2spk is not None:
            return transcribe_by_speaker(self, inputs, channel, utt2spk, batch_size,
                                         batch_frames or self.batch_frames)
        return transcribe_many(self, inputs, channel, speaker_stats or {}, batch_size,
                               batch_frames or self.batch_frames)


def check_params_have_lm(lm: Optional[Path], params: Optional[Path]) -> None:
    """``params`` (tune-lm's best.yaml) weigh the lexicon search: refuse them without an LM."""
    if params is not None and lm is None:
        raise AsrError("--params is for the lexicon search", params, fix="pass --lm LM.arpa as well")


def lexicon_for(cfg, net, tok, model: Path, lm: Optional[Path], params: Optional[Path]):
    """``(search, att_rescore)`` as :meth:`Transcriber.load` makes them: ``(None, 0.0)`` without ``lm``,
    else decode's lexicon search over ``lm`` with the config's decode weights or ``params``' (tune-lm's
    best.yaml: weights, beam, OOV penalty and, for a joint model, attention rescoring of its n-best).
    ``asrtrain pack`` runs it on the LM and params it packs, so a pack that would not load is not written."""
    if lm is None:
        return None, 0.0
    from asrtrain.decode.lexicon_search import lexicon_search

    d = cfg.decode
    lw, wb, beam, oov, nbest, att = d.lm_weight, d.word_bonus, d.beam_size, None, 1, 0.0
    if params is not None:
        from asrtrain.decode.tune import read_params
        p = read_params(params)
        lw, wb, beam, oov = p["lm_weight"], p["word_bonus"], p["beam_size"], p["oov_penalty"]
        att, nbest = p["att_rescore"], p["nbest"]
    if att > 0:
        from asrtrain.decode.rescore import check_rescorable
        check_rescorable(net, model)
    search = lexicon_search(tok, Path(lm), None, beam, lw, wb, "ours", oov, nbest if att > 0 else 1)
    log.info("lexicon search (lm %s, lm_weight %g, word_bonus %g, beam %d)%s", lm, lw, wb, beam,
             f", attention rescoring of the {nbest}-best (weight {att:g})" if att > 0 else "")
    return search, att
