#!/usr/bin/env python
"""Export time, and onnxruntime against torch on one long utterance, for the recipe's model shape.

    python scripts/bench_export.py [--seconds 20] [--rounds 7] [--threads 1] [--config recipes/an4/conf/train.yaml]

Builds an untrained model of the config's shape (features.num_mel_bins inputs, 30 targets), writes it as
an exp dir in a temp dir and times ``asrtrain.export.bundle.export`` (trace, write, onnxruntime load and
the check against torch). Then times the acoustic model's forward over one ``--seconds`` utterance of
CMVN-like features, batch of one, in torch (eager, ``model.encode`` + ``log_probs``, the layout torch
picks on the CPU) and in onnxruntime (``model.onnx``), alternating which runs first each round, after
one warm-up each; both on ``--threads`` threads. Prints the medians and the ratio.

Last line: ``onnx_over_torch: <ratio>`` (median torch time / median onnxruntime time: above 1 means
onnxruntime is faster).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "recipes/an4/conf/train.yaml")
    ap.add_argument("--fbank", type=Path, default=ROOT / "recipes/an4/conf/fbank.yaml")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import onnxruntime as ort

    from asrtrain.config.file import load_config, save_config
    from asrtrain.config.yamlio import read_yaml
    from asrtrain.export.bundle import export
    from asrtrain.model.blstm import build_model
    from asrtrain.model.files import save_checked
    from asrtrain.text.tokenizer import TokenizerConfig, train_tokenizer

    torch.set_num_threads(args.threads)
    cfg = load_config(args.config)
    bins = int(read_yaml(args.fbank)[0].get("num_mel_bins", cfg.features.num_mel_bins))
    cfg = replace(cfg, features=replace(cfg.features, num_mel_bins=bins, cmvn="speaker"),
                  model=replace(cfg.model, input_dim=bins, num_targets=30))
    with tempfile.TemporaryDirectory() as tmp:
        exp = Path(tmp) / "exp"
        exp.mkdir()
        (exp / "text").write_text("u1 yes no\nu2 one two three\nu3 go stop please\n")
        train_tokenizer(exp / "text", exp, TokenizerConfig(model_type="char", vocab_size=30))
        save_config(cfg, exp / "config.yaml")
        torch.manual_seed(0)
        model = build_model(cfg.model).eval()
        save_checked({"model": model.state_dict()}, exp / "final.pt")
        t0 = time.perf_counter()
        out = export(exp, Path(tmp) / "onnx", "onnx", threads=args.threads)
        export_s = time.perf_counter() - t0
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = args.threads, 1
        session = ort.InferenceSession(str(out / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        frames = int(args.seconds * 1000 / cfg.features.frame_shift)
        x = np.random.default_rng(0).standard_normal((1, frames, bins)).astype(np.float32)
        lens = np.array([frames], dtype=np.int64)

        def run_torch():
            with torch.no_grad():
                h, _, _ = model.encode(torch.from_numpy(x), torch.from_numpy(lens))
                return model.log_probs(h).numpy()

        def run_onnx():
            return session.run(["log_probs"], {"feats": x, "lengths": lens})[0]

        diff = float(np.abs(run_torch() - run_onnx()).max())  # also the warm-up
        times = {"torch": [], "onnx": []}
        for r in range(args.rounds):
            order = (("torch", run_torch), ("onnx", run_onnx))
            for name, fn in (order if r % 2 == 0 else order[::-1]):
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
    exported = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("decoder."))
    med = {k: statistics.median(v) for k, v in times.items()}
    m = cfg.model
    print(f"model: {m.frontend} front-end, {m.num_layers}x{m.hidden} BLSTM, subsample {m.subsample}, "
          f"{bins} bins, {exported / 1e6:.2f} M parameters exported (the attention decoder is not)")
    print(f"export (trace, write, load, check): {export_s:.2f} s")
    print(f"{args.seconds:g} s utterance ({frames} frames), {args.threads} thread(s), median of {args.rounds}: "
          f"torch {med['torch'] * 1000:.1f} ms, onnxruntime {med['onnx'] * 1000:.1f} ms, "
          f"max abs log-prob diff {diff:.2g}")
    print(f"onnx_over_torch: {med['torch'] / med['onnx']:.2f}")


if __name__ == "__main__":
    main()
