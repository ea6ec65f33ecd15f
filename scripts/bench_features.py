#!/usr/bin/env python3
"""Feature extraction speed as x real time (audio seconds per wall second).

Three figures on the same synthetic 16 kHz data dir (utterances of 3-8 s):
- ``fbank_only``: torchaudio Kaldi fbank on in-memory audio, one thread (the compute ceiling);
- ``nj1``: the whole ``asrtrain features`` stage in one process (validate, read wav, fbank, write ark, CMVN);
- ``nj2``: the same with two worker processes (process start-up included).

The last line, ``fbank_x_realtime: N``, is the best whole-stage figure (nj1 or nj2), i.e. what the
recipe's features stage achieves on this machine.

    python scripts/bench_features.py [--minutes 10] [--nj 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import soundfile as sf  # noqa: E402


def make_corpus(root: Path, minutes: float, rate: int = 16000, seed: int = 0) -> Path:
    """A data dir of noisy harmonic 'speech' totalling ``minutes`` minutes."""
    rng = np.random.default_rng(seed)
    data, audio = root / "data", root / "audio"
    data.mkdir(parents=True)
    audio.mkdir()
    total, i, rows = 0.0, 0, []
    while total < minutes * 60:
        secs = float(rng.uniform(3, 8))
        n = int(secs * rate)
        t = np.arange(n) / rate
        f0 = rng.uniform(90, 220)
        x = sum(np.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 8)) * 3000 + rng.normal(0, 300, n)
        utt = f"spk{i % 10:02d}-utt{i:05d}"
        path = audio / f"{utt}.wav"
        sf.write(path, np.clip(x, -32768, 32767).astype(np.int16), rate, subtype="PCM_16")
        rows.append((utt, f"spk{i % 10:02d}", str(path)))
        total += n / rate
        i += 1
    rows.sort()
    (data / "wav.scp").write_text("".join(f"{u} {p}\n" for u, _, p in rows))
    (data / "text").write_text("".join(f"{u} a b c\n" for u, _, _ in rows))
    (data / "utt2spk").write_text("".join(f"{u} {s}\n" for u, s, _ in rows))
    spk: dict = {}
    for u, s, _ in rows:
        spk.setdefault(s, []).append(u)
    (data / "spk2utt").write_text("".join(f"{s} {' '.join(v)}\n" for s, v in sorted(spk.items())))
    return data


def fbank_only(data: Path, conf) -> float:
    import torch
    from asrtrain.data.audio import load_audio
    from asrtrain.features.fbank import fbank
    torch.set_num_threads(1)
    waves = [load_audio(line.split()[1])[0] for line in (data / "wav.scp").read_text().splitlines()]
    fbank(waves[0], conf.sample_rate, conf)  # warm-up
    t0 = time.perf_counter()
    for w in waves:
        fbank(w, conf.sample_rate, conf)
    return sum(len(w) for w in waves) / conf.sample_rate / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="minutes of synthetic audio")
    ap.add_argument("--nj", type=int, default=2, help="jobs for the parallel run")
    args = ap.parse_args()
    from asrtrain.config import FeatureConfig
    from asrtrain.features.archive import compute_features
    conf = FeatureConfig()
    with tempfile.TemporaryDirectory() as tmp:
        data = make_corpus(Path(tmp), args.minutes)
        n_utts = len((data / "wav.scp").read_text().splitlines())
        print(f"corpus: {args.minutes:g} min of 16 kHz audio, {n_utts} utterances; {os.cpu_count()} cores")
        only = fbank_only(data, conf)
        print(f"fbank_only_x_realtime: {only:.0f}")
        s1 = compute_features(data, Path(tmp) / "f1", conf, nj=1)
        print(f"features_nj1_x_realtime: {s1.x_realtime:.0f}  ({s1.wall_seconds:.1f} s wall)")
        s2 = compute_features(data, Path(tmp) / "f2", conf, nj=args.nj)
        print(f"features_nj{args.nj}_x_realtime: {s2.x_realtime:.0f}  ({s2.wall_seconds:.1f} s wall)")
    print(f"fbank_x_realtime: {max(s1.x_realtime, s2.x_realtime):.0f}")


if __name__ == "__main__":
    main()
