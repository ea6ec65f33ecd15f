"""The tiny exp dir the transcribe tests share, and a speech-like test signal."""

import numpy as np
import pytest

from tests.helpers.tiny_exp import make_exp


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    """A tiny untrained exp dir (per-utterance CMVN, as a speaker-CMVN model transcribes)."""
    return make_exp(tmp_path_factory.mktemp("exp"))


@pytest.fixture(scope="session")
def tone_exp(tmp_path_factory):
    """``(exp dir, corpus)`` of a tiny model that recognises the tone words of its corpus
    (:mod:`tests.helpers.tone_model`; trains for seconds, once a session)."""
    from tests.helpers.tone_model import make_tone_exp
    exp, corpus, _ = make_tone_exp(tmp_path_factory.mktemp("tone_exp"))
    return exp, corpus


def make_speechy(seconds, rate, seed=0):
    """A 440 Hz tone switched on and off at 0.7 Hz, over faint noise: float32 [seconds * rate]."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 440 * t) * (np.sin(2 * np.pi * 0.7 * t) > 0)
            + 0.01 * rng.standard_normal(len(t))).astype(np.float32)




@pytest.fixture
def speechy():
    return make_speechy
