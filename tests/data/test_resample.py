"""Resampling: the usual rates go by torchaudio's exact ratio; a coprime one (47999 Hz) by a close ratio."""

import logging

import numpy as np
import pytest
import torch
import torchaudio.functional as AF

from asrtrain.data.resample import resample_to, speed_perturb


def _noise(seconds, rate, seed=0):
    return np.random.default_rng(seed).uniform(-0.5, 0.5, int(seconds * rate)).astype(np.float32)


@pytest.mark.parametrize("rate,target", [(8000, 16000), (11025, 16000), (22050, 16000), (32000, 16000),
                                         (44100, 16000), (48000, 16000), (96000, 16000), (16000, 8000),
                                         (11025, 32000), (44100, 48000)])
def test_usual_rates_are_exactly_torchaudios_resampling(rate, target):
    x = _noise(0.3, rate)
    want = AF.resample(torch.from_numpy(x), rate, target).numpy()
    np.testing.assert_array_equal(resample_to(x, rate, target), want)


def test_speed_perturbation_is_exactly_torchaudios_resampling():
    x = _noise(0.3, 16000)
    for factor in (0.9, 1.1):
        want = AF.resample(torch.from_numpy(x), int(round(16000 * factor)), 16000).numpy()
        np.testing.assert_array_equal(speed_perturb(x, 16000, factor), want)


def test_a_coprime_rate_is_resampled_as_the_nearby_rate_and_says_so(caplog):
    """47999 -> 16000 Hz would need a 768-million-tap kernel (45 s, 13 GB for 1.3 s): it goes as 48000 Hz."""
    from asrtrain.data.resample import resample_ratio
    x = _noise(1.3, 47999)
    with caplog.at_level(logging.INFO):
        y = resample_to(x, 47999, 16000)
        resample_to(x[:1000], 47999, 16000)
    assert abs(len(y) - 1.3 * 16000) <= 1
    np.testing.assert_allclose(y, AF.resample(torch.from_numpy(x), 48000, 16000).numpy(), atol=1e-6)
    said = [r.getMessage() for r in caplog.records if "47999" in r.getMessage()]
    assert len(said) == 1 and "48000.00 Hz" in said[0] and "2.1e-05" in said[0], said  # once, rate and error
    o, n = resample_ratio(44101, 16000)  # another coprime one: close, and a small kernel
    assert abs(o / n / (44101 / 16000) - 1) < 1e-5 and n < 16000
