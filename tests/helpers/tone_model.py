"""An exp dir whose model recognises audio: words are tones, and a tiny BLSTM-CTC is overfit on them.

Each word of ``TONES`` is a 0.25 s tone of its own frequency; an utterance is 2-4 words with short gaps,
over faint noise. :func:`make_tone_exp` trains a 1-layer BLSTM (global CMVN, a word tokenizer) on the fbank
of ``n`` such utterances until greedy decoding gets every one of them right, and writes a complete exp dir
(config.yaml, tokenizer.model, final.pt, cmvn_global.ark): transcribe tests that need words to come out,
such as the no-word-lost-at-a-cut test, use it.
"""

from dataclasses import replace
from pathlib import Path
from typing import List, Tuple

import numpy as np

RATE = 16000
TONES = {"yes": 300, "no": 550, "go": 900, "stop": 1400, "left": 2100, "right": 3000}  # Hz


def silence(seconds: float, rng) -> np.ndarray:
    """float32 [seconds x RATE] of the faint noise between the tones (never digital zeros, which no
    utterance holds)."""
    return (0.003 * rng.standard_normal(int(seconds * RATE))).astype(np.float32)


def tone_utterance(words: List[str], rng) -> np.ndarray:
    """float32 [n] at ``RATE``: each word's 0.25 s tone, after a gap of 0.05-0.3 s of faint noise, and
    0.05-0.3 s of it at the end."""
    t = np.arange(int(0.25 * RATE)) / RATE
    envelope = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.02)  # 20 ms ramps
    parts = []
    for w in words:
        parts.append(silence(rng.uniform(0.05, 0.3), rng))
        amp = rng.uniform(0.2, 0.4)
        tone = amp * envelope * np.sin(2 * np.pi * TONES[w] * t + rng.uniform(0, 6.28))
        parts.append((tone + 0.003 * rng.standard_normal(len(t))).astype(np.float32))
    parts.append(silence(rng.uniform(0.05, 0.3), rng))
    return np.concatenate(parts)


def tone_corpus(n: int, seed: int = 0) -> List[Tuple[str, np.ndarray]]:
    """``n`` (transcript, wave) pairs of 1-5 tone words."""
    rng = np.random.default_rng(seed)
    words = list(TONES)
    out = []
    for _ in range(n):
        ws = [words[i] for i in rng.integers(0, len(words), int(rng.integers(1, 6)))]
        out.append((" ".join(ws), tone_utterance(ws, rng)))
    return out


def make_tone_exp(root: Path, n: int = 16, att_weight: float = 0.0, batch: int = 8, max_steps: int = 600):
    """Train the tone model and write its exp dir under ``root``; returns ``(exp dir, corpus, steps)``.

    Every step trains on ``batch`` fresh random utterances (so the model learns the tones, not the
    utterances); training stops once greedy decoding of every utterance of ``tone_corpus(n)`` is right."""
    import torch

    from asrtrain.config import Config, TokenizerConfig
    from asrtrain.config.file import save_config
    from asrtrain.decode.options import torch_threads
    from asrtrain.features import cmvn
    from asrtrain.features.fbank import fbank
    from asrtrain.model.blstm import build_model
    from asrtrain.model.files import save_checked
    from asrtrain.text.tokenizer import Tokenizer, train_tokenizer

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    corpus = tone_corpus(n)
    (root / "text").write_text("".join(f"w{i} {w}\n" for i, w in enumerate(TONES)))
    tok = Tokenizer(train_tokenizer(root / "text", root / "tok",
                                    TokenizerConfig(model_type="word", vocab_size=len(TONES) + 2)))
    base = Config()
    cfg = replace(base, features=replace(base.features, num_mel_bins=23, cmvn="global"),
                  model=replace(base.model, input_dim=23, num_targets=tok.vocab_size, num_layers=1, hidden=24,
                                stack=2, subsample=2, dropout=0.0, att_weight=att_weight, att_dim=16))
    stats = None
    for _, w in tone_corpus(64, seed=99):
        stats = cmvn.accumulate(fbank(w, RATE, cfg.features), stats)
    cmvn.write_global(root / "cmvn_global.ark", stats)

    def tensors(utts):
        feats = [cmvn.apply(fbank(w, RATE, cfg.features), stats, True) for _, w in utts]
        lens = torch.tensor([len(f) for f in feats])
        x = torch.zeros(len(feats), int(lens.max()), 23)
        for i, f in enumerate(feats):
            x[i, : len(f)] = torch.from_numpy(f)
        ids = [tok.encode(t) for t, _ in utts]
        tlens = torch.tensor([len(t) for t in ids])
        targets = torch.zeros(len(ids), int(tlens.max()), dtype=torch.long)
        for i, t in enumerate(ids):
            targets[i, : len(t)] = torch.tensor(t)
        return x, lens, targets, tlens, ids

    torch.manual_seed(0)
    model = build_model(cfg.model)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    rng = np.random.default_rng(5)  # the check: the corpus, and its neighbours joined over longer pauses
    joined = [(f"{a} {b}", np.concatenate([silence(0.4, rng), wa, silence(0.4, rng), wb]))
              for (a, wa), (b, wb) in zip(corpus, corpus[1:] + corpus[:1])]
    check = tensors(corpus + joined)
    with torch_threads(1):  # more threads only contend on a small shared machine
        for step in range(max_steps):
            x, lens, targets, tlens, ids = tensors(tone_corpus(batch, seed=1000 + step))
            model.train()
            out = model(x, lens, att=(targets, tlens) if att_weight > 0 else None)
            loss = torch.nn.functional.ctc_loss(out[0].transpose(0, 1), targets, out[1], tlens,
                                                zero_infinity=True, reduction="sum") / batch
            if att_weight > 0:
                loss = (1 - att_weight) * loss + att_weight * out[2] / batch
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 9 and _all_right(model, check):
                break
        else:
            raise AssertionError(f"the tone model did not learn the tones in {max_steps} steps")
    save_config(cfg, root / "config.yaml")
    (root / "tokenizer.model").write_bytes((root / "tok" / "tokenizer.model").read_bytes())
    save_checked({"model": model.eval().state_dict()}, root / "final.pt")
    return root, corpus, step + 1


def _all_right(model, check) -> bool:
    """Whether greedy decoding of every utterance of ``check`` (``tensors``' tuple) gives its tokens."""
    import torch

    from asrtrain.decode.ctc import greedy

    x, lens, _, _, ids = check
    model.eval()
    with torch.no_grad():
        lp, out_lens = model(x, lens)[:2]
    return all(greedy(lp[i, : int(out_lens[i])].numpy())[0] == ids[i] for i in range(len(ids)))
