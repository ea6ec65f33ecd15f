"""A tiny untrained exp dir (any model and CMVN variant) and a speech-like test signal, for tests that
need a model over raw audio without training one (tests/export)."""

from dataclasses import replace
from pathlib import Path

import numpy as np


def write_tiny_exp(root: Path, cmvn: str = "speaker", seed: int = 0, dither: float = 0.0, **model) -> Path:
    """An exp dir in ``root``: config.yaml (23 fbank bins, ``cmvn``, ``dither``), a char tokenizer, an untrained
    BLSTM of 2 layers x 8 (``model`` overrides ModelConfig fields), and for global CMVN the stats of
    a few random feature frames (``cmvn_global.ark``)."""
    import torch

    from asrtrain.config import Config, TokenizerConfig
    from asrtrain.config.file import save_config
    from asrtrain.features.cmvn import accumulate, write_global
    from asrtrain.model.blstm import build_model
    from asrtrain.model.files import save_checked
    from asrtrain.text.tokenizer import Tokenizer, train_tokenizer

    root = Path(root)
    root.mkdir(parents=True)
    (root / "text").write_text("u1 yes no\nu2 one two three\nu3 go stop\n")
    tok = Tokenizer(train_tokenizer(root / "text", root / "tok", TokenizerConfig(model_type="char", vocab_size=20)))
    cfg = Config()
    cfg = replace(cfg, features=replace(cfg.features, num_mel_bins=23, cmvn=cmvn, dither=dither),
                  model=replace(cfg.model, **{"input_dim": 23, "num_targets": tok.vocab_size, "num_layers": 2,
                                              "hidden": 8, **model}))
    save_config(cfg, root / "config.yaml")
    (root / "tokenizer.model").write_bytes((root / "tok" / "tokenizer.model").read_bytes())
    if cmvn == "global":
        rng = np.random.default_rng(seed)
        write_global(root / "cmvn_global.ark", accumulate(rng.normal(12.0, 3.0, (500, 23))))
    torch.manual_seed(seed)
    save_checked({"model": build_model(cfg.model).state_dict()}, root / "final.pt")
    return root


def speechy(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    """A 440 Hz tone switched on and off at 0.7 Hz, over faint noise: float32 [seconds * rate]."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 440 * t) * (np.sin(2 * np.pi * 0.7 * t) > 0)
            + 0.01 * rng.standard_normal(len(t))).astype(np.float32)
