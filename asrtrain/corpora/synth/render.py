"""Rendering the embedded corpus: one :class:`Utterance` (text, voice, prosody, padding, gain, noise) into
one 16 kHz WAV, by :class:`Renderer`, in-process or over a pool of spawned processes (:class:`RenderPool`).

An utterance is a pure function of its fields: espeak's samples depend only on the text, voice and seed
(the engine is reloaded per utterance, :mod:`.espeak`), and resampling runs on one torch thread so every
process gives the same bits. :mod:`.prepare` plans the utterances and writes the data dirs.
"""

from __future__ import annotations

import math
import multiprocessing
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

from asrtrain.corpora.synth.espeak import Espeak
from asrtrain.errors import AsrError

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class Utterance:
    """Everything needed to render one utterance; the worker needs nothing else."""
    utt: str
    spk: str
    text: str
    spoken: str
    voice: str
    rate: int
    pitch: int
    pitch_range: int
    word_gap: int
    seed: int
    lead_s: float
    trail_s: float
    peak_dbfs: float
    snr_db: float
    noise_color: float  # spectral slope: 0 white, 1 pink, 2 brown
    wav: str


class Renderer:
    """Speaks, checks, resamples, pads, scales, adds noise and writes one utterance.

    One per process (it owns the process's espeak engine). Torch runs single-threaded inside so
    that resampling gives the same bits in every process.
    """

    def __init__(self):
        import torch
        import torchaudio
        self.engine = Espeak()
        self.engine.check_fresh()
        self.resample = torchaudio.transforms.Resample(self.engine.sample_rate, SAMPLE_RATE)
        self._torch = torch

    def __call__(self, u: Utterance) -> Tuple[str, int]:
        """Render ``u`` into ``u.wav``. Returns ``(utt, num_samples)`` at 16 kHz."""
        import soundfile as sf
        torch = self._torch
        raw = self.engine.speak(u.spoken, u.voice, rate=u.rate, pitch=u.pitch,
                                pitch_range=u.pitch_range, word_gap=u.word_gap, seed=u.seed)
        raw = _trim(raw)
        n_words = len(u.text.split())
        seconds = raw.size / self.engine.sample_rate
        rms = float(np.sqrt(np.mean(raw.astype(np.float64) ** 2))) if raw.size else 0.0
        # A plausible utterance: audible, and 0.12-1.2 s per word.
        if rms < 100 or not 0.12 * n_words <= seconds <= 1.2 * n_words + 1.0:
            raise AsrError(f"espeak gave implausible audio for {u.utt} (voice {u.voice}): "
                           f"{seconds:.2f} s, rms {rms:.0f} for {n_words} words {u.text!r}",
                           fix="drop this voice variant from TRAIN_VARIANTS/TEST_VARIANTS")
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            speech = self.resample(torch.from_numpy(raw.astype(np.float32) / 32768.0)).numpy()
        finally:
            torch.set_num_threads(threads)
        speech = speech.astype(np.float64)
        speech *= 10 ** (u.peak_dbfs / 20) / max(np.abs(speech).max(), 1e-9)
        lead, trail = int(u.lead_s * SAMPLE_RATE), int(u.trail_s * SAMPLE_RATE)
        signal = np.concatenate([np.zeros(lead), speech, np.zeros(trail)])
        noise = _colored_noise(np.random.default_rng(u.seed), signal.size, u.noise_color)
        noise *= math.sqrt(np.mean(speech ** 2) / 10 ** (u.snr_db / 10))
        pcm = np.round(np.clip(signal + noise, -1.0, 32767 / 32768) * 32768).astype(np.int16)
        Path(u.wav).parent.mkdir(parents=True, exist_ok=True)
        sf.write(u.wav, pcm, SAMPLE_RATE, subtype="PCM_16", format="WAV")
        return u.utt, int(pcm.size)


def _trim(raw: np.ndarray) -> np.ndarray:
    """Cut espeak's leading and trailing near-silence (we add our own, random, padding)."""
    if raw.size == 0:
        return raw
    mag = np.abs(raw.astype(np.int32))
    loud = np.flatnonzero(mag > 0.002 * mag.max())  # espeak pads with exact zeros; keep echo tails
    return raw[loud[0]:loud[-1] + 1] if loud.size else raw[:0]


def _colored_noise(rng: np.random.Generator, n: int, slope: float) -> np.ndarray:
    """Unit-RMS noise of ``n`` samples whose power falls as 1/f^slope."""
    size = 1 << max(n - 1, 1).bit_length()  # FFTs of a power of two: odd lengths are slow
    white = rng.standard_normal(size)
    if slope:
        spec = np.fft.rfft(white)
        f = np.arange(spec.size, dtype=np.float64)
        f[0] = 1.0
        white = np.fft.irfft(spec / f ** (slope / 2), size)
    white = white[:n]
    return white / max(float(np.sqrt(np.mean(white ** 2))), 1e-12)


_RENDERER: Optional[Renderer] = None  # one per worker process, made by _init_worker


def _init_worker() -> None:
    global _RENDERER
    _RENDERER = Renderer()


def _render(u: Utterance) -> Tuple[str, int]:
    return _RENDERER(u)


class RenderPool:
    """Renders batches in order, in-process (nj=1) or over ``nj`` spawned processes."""

    def __init__(self, nj: int, progress):
        self.progress = progress
        if nj > 1:
            # spawn, not fork: the parent may hold torch threads and a loaded espeak.
            ctx = multiprocessing.get_context("spawn")
            self.pool = ctx.Pool(nj, initializer=_init_worker)
            self.renderer = None
        else:
            self.pool = None
            self.renderer = Renderer()

    def render(self, utts: List[Utterance]) -> List[int]:
        it = self.pool.imap(_render, utts, chunksize=4) if self.pool else map(self.renderer, utts)
        sizes = []
        for utt, n in it:
            sizes.append(n)
            self.progress.update(1)
        return sizes

    def close(self) -> None:
        if self.pool:
            self.pool.close()
            self.pool.join()

    def terminate(self) -> None:
        if self.pool:
            self.pool.terminate()
            self.pool.join()
