"""The tiny exp dir the transcribe tests share, and a speech-like test signal."""

from dataclasses import replace

import numpy as np
import pytest

from asrtrain.config import Config, TokenizerConfig


def make_exp(root, att_weight=0.0):
    """A tiny untrained exp dir under ``root`` (per-utterance CMVN, as a speaker-CMVN model transcribes);
    with ``att_weight`` > 0 a joint CTC/attention model."""
    import torch
    from asrtrain.config.file import save_config
    from asrtrain.model.blstm import build_model
    from asrtrain.model.files import save_checked
    from asrtrain.text.tokenizer import Tokenizer, train_tokenizer

    (root / "text").write_text("u1 yes no\nu2 one two three\nu3 go stop\n")
    tok = Tokenizer(train_tokenizer(root / "text", root / "tok", TokenizerConfig(model_type="char", vocab_size=20)))
    cfg = Config()
    cfg = replace(cfg, features=replace(cfg.features, num_mel_bins=23, cmvn="speaker"),
                  model=replace(cfg.model, input_dim=23, num_targets=tok.vocab_size, num_layers=1, hidden=8,
                                att_weight=att_weight, att_dim=8))
    save_config(cfg, root / "config.yaml")
    (root / "tokenizer.model").write_bytes((root / "tok" / "tokenizer.model").read_bytes())
    torch.manual_seed(0)
    save_checked({"model": build_model(cfg.model).state_dict()}, root / "final.pt")
    return root


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
