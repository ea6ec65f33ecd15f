"""A tiny learnable feature dir without audio, for tests and benchmarks: each word is a fixed random pattern
of frames (``(6 + len(word), dim)``) between noise gaps, written as a complete feature dir (feats.scp/ark,
text, utt2spk, spk2utt, utt2num_frames, global CMVN stats, features.yaml, feat_dim)."""

from pathlib import Path

import numpy as np
import yaml

WORDS = "one two three four five six seven eight nine ten red blue green go stop left right".split()


def make_feat_dir(root: Path, n_utts: int = 40, dim: int = 13, seed: int = 0, words=WORDS) -> Path:
    """Write ``n_utts`` utterances of 2-5 words (4 speakers) under ``root``; the patterns are the same in
    every dir made here (only ``seed`` changes which words are said), so a model trained on one dir
    recognises another. Returns ``root``."""
    import kaldiio

    from asrtrain.config import FeatureConfig
    from asrtrain.config.file import to_dict

    rng = np.random.default_rng(seed)
    pat_rng = np.random.default_rng(1234)  # patterns shared by every dir made here
    patterns = {w: pat_rng.normal(0, 1, (6 + len(w), dim)).astype(np.float32) for w in words}
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    text, utt2spk, frames = {}, {}, {}
    with kaldiio.WriteHelper(f"ark,scp:{root}/feats.ark,{root}/feats.scp") as w:
        for i in range(n_utts):
            spk = f"spk{i % 4}"
            utt = f"{spk}-{i:04d}"
            ws = list(rng.choice(words, size=int(rng.integers(2, 6))))
            parts = [rng.normal(0, 0.3, (3, dim)).astype(np.float32)]
            for wd in ws:
                parts.append(patterns[wd] + rng.normal(0, 0.3, patterns[wd].shape).astype(np.float32))
                parts.append(rng.normal(0, 0.3, (2, dim)).astype(np.float32))
            x = np.concatenate(parts) * 2.0 + 5.0
            w(utt, x)
            text[utt] = " ".join(ws)
            utt2spk[utt] = spk
            frames[utt] = len(x)
    for name, table in (("text", text), ("utt2spk", utt2spk), ("utt2num_frames", frames)):
        (root / name).write_text("".join(f"{k} {table[k]}\n" for k in sorted(table)))
    spk2utt = {}
    for u in sorted(utt2spk):
        spk2utt.setdefault(utt2spk[u], []).append(u)
    (root / "spk2utt").write_text("".join(f"{s} {' '.join(us)}\n" for s, us in sorted(spk2utt.items())))
    # global CMVN stats in Kaldi's layout: row 0 sums + count, row 1 sums of squares
    allx = np.concatenate(list(kaldiio.load_scp(str(root / "feats.scp")).values()))
    stats = np.zeros((2, dim + 1))
    stats[0, :dim] = allx.sum(0)
    stats[0, dim] = len(allx)
    stats[1, :dim] = (allx.astype(np.float64) ** 2).sum(0)
    kaldiio.save_mat(str(root / "cmvn_global.ark"), stats)
    cfg = to_dict(FeatureConfig(num_mel_bins=dim, cmvn="global"))
    (root / "features.yaml").write_text(yaml.safe_dump(cfg))
    (root / "feat_dim").write_text(f"{dim}\n")
    return root


def make_task(root: Path, n_train: int, n_dev: int):
    """A train and a dev toy feature dir under ``root``, and a word tokenizer of the training text:
    ``(train_dir, dev_dir, tokenizer.model)``."""
    from asrtrain.config import TokenizerConfig
    from asrtrain.text.tokenizer import train_tokenizer

    root = Path(root)
    train = make_feat_dir(root / "train", n_train)
    dev = make_feat_dir(root / "dev", n_dev, seed=1)
    return train, dev, Path(train_tokenizer(train / "text", root / "tok",
                                            TokenizerConfig(model_type="word", vocab_size=30)))
