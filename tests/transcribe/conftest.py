"""The tiny exp dirs the transcribe tests share, and a speech-like test signal."""

import pytest

from tests.helpers.tiny_exp import make_exp
from tests.helpers.tiny_exp import speechy as make_speechy


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


@pytest.fixture
def speechy():
    return make_speechy
