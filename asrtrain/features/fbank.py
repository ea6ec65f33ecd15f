"""Kaldi log-mel filterbank features via ``torchaudio.compliance.kaldi.fbank``, with Kaldi's option names.

The waveform arrives as float32 in [-1, 1] (see :mod:`asrtrain.data.audio`) and is scaled by 32768 to
the int16 range Kaldi's ``compute-fbank-feats`` sees, so our features match Kaldi's and
kaldi-native-fbank's on the same audio and options (tests/features/test_fbank.py checks <= 1e-3).
"""

from __future__ import annotations

import zlib
from typing import Optional

import numpy as np

from asrtrain.config import FeatureConfig
from asrtrain.errors import AsrError

INT16_SCALE = 32768.0


def feature_dim(conf: FeatureConfig) -> int:
    """Feature dimension D: mel bins, plus one if the log energy is appended."""
    return conf.num_mel_bins + (1 if conf.use_energy else 0)


def fbank(wave, rate: int, conf: FeatureConfig, seed: Optional[str] = None) -> np.ndarray:
    """Compute fbank features of one utterance.

    Args:
        wave: float samples in [-1, 1], shape [samples] (torch tensor or numpy array).
        rate: sample rate of ``wave``; must equal ``conf.sample_rate`` (resample first).
        conf: the feature options (Kaldi names).
        seed: a key (the utterance id) seeding the dither noise, so features are reproducible; the
            global torch RNG is left as it was.

    Returns:
        float32 array [frames, D], D = :func:`feature_dim`. Zero frames if the audio is shorter than one
        frame (with ``snip_edges``).
    """
    import torch
    import torchaudio.compliance.kaldi as kaldi
    if rate != conf.sample_rate:
        raise AsrError(f"audio at {rate} Hz given to fbank configured for {conf.sample_rate} Hz",
                       fix="resample first (asrtrain.data.audio.load_audio target_rate=...)")
    x = torch.as_tensor(wave, dtype=torch.float32).reshape(1, -1) * INT16_SCALE
    if x.shape[1] < int(conf.sample_rate * conf.frame_length / 1000) and conf.snip_edges:
        return np.zeros((0, feature_dim(conf)), dtype=np.float32)
    kwargs = dict(
        sample_frequency=float(conf.sample_rate), num_mel_bins=conf.num_mel_bins,
        frame_length=conf.frame_length, frame_shift=conf.frame_shift, dither=conf.dither,
        preemphasis_coefficient=conf.preemphasis_coefficient, remove_dc_offset=conf.remove_dc_offset,
        window_type=conf.window_type, round_to_power_of_two=conf.round_to_power_of_two,
        low_freq=conf.low_freq, high_freq=conf.high_freq, use_energy=conf.use_energy,
        use_log_fbank=conf.use_log_fbank, snip_edges=conf.snip_edges,
        energy_floor=0.0,  # Kaldi's default (torchaudio's is 1.0)
    )
    if conf.dither > 0:
        # torchaudio draws the dither from the global RNG; fork it so the caller's stream is untouched.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(zlib.crc32((seed or "").encode("utf-8")))
            feats = kaldi.fbank(x, **kwargs)
    else:
        feats = kaldi.fbank(x, **kwargs)
    return feats.numpy().astype(np.float32, copy=False)
