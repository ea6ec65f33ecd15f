#!/usr/bin/env python
"""The BLSTM's training step on the CPU: padded batches (what the model runs there) against packed ones.

    python scripts/bench_rnn.py [--rounds 6] [--threads 2] [--config recipes/an4/conf/train.yaml]

One training step = forward, CTC loss, backward and a fused Adam step of the recipe's model
(``asrtrain.model.blstm``), on a batch shaped like the recipe's: ``--utts`` utterances of
``--frames`` frames give or take 15% (length-bucketed batches are that even). The two paths share the
model, the optimizer and the batches; they differ only in how each bidirectional layer runs
(``blstm_padded``: oneDNN's fused RNN over the padded batch, the backward direction over each utterance
reversed in place; ``blstm_packed``: torch's packed sequence, what cuDNN gets on a GPU). Rounds alternate
which path runs first; each round times ``--steps`` steps per path after two warm-up steps.

Last line: ``rnn_padded_over_packed: <ratio>`` (median over rounds of packed step time / padded step time:
above 1 means the padded path is faster).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent


def step_fn(model, optimizer, layer_fn, x, lengths, targets, target_lens):
    """One training step of ``model`` with each bidirectional layer run by ``layer_fn``."""
    from asrtrain.model.blstm import stack_frames

    if model.frontend is not None:  # the recipe's conv front-end (model.frontend: conv), as BLSTM.forward
        h, out_lens = model.frontend(x, lengths)
    else:
        h, out_lens = stack_frames(x, lengths, model.cfg.stack, model.cfg.subsample)
    for layer in model.layers:
        h = model.dropout(layer_fn(layer, h, out_lens))
    log_probs = F.log_softmax(model.head(h), dim=-1)
    loss = F.ctc_loss(log_probs.transpose(0, 1), targets, out_lens, target_lens, reduction="sum",
                      zero_infinity=True)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=ROOT / "recipes" / "an4" / "conf" / "train.yaml")
    ap.add_argument("--utts", type=int, default=18, help="utterances per batch (the AN4 recipe's mean)")
    ap.add_argument("--frames", type=int, default=270, help="mean input frames per utterance")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from asrtrain.config import Config
    from asrtrain.config.file import load_config
    from asrtrain.model.blstm import build_model
    from asrtrain.model.rnn_stack import blstm_packed, blstm_padded
    from dataclasses import replace

    cfg = load_config(args.config) if args.config else Config()
    mcfg = replace(cfg.model, input_dim=80, num_targets=61)
    torch.manual_seed(0)
    model = build_model(mcfg).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    lengths = (args.frames * (0.85 + 0.3 * torch.rand(args.utts))).long()
    x = torch.randn(args.utts, int(lengths.max()), 80)
    target_lens = torch.full((args.utts,), max(1, args.frames // (4 * mcfg.subsample)))
    targets = torch.randint(1, 61, (args.utts, int(target_lens.max())))
    paths = {"padded": lambda layer, h, lens: blstm_padded(layer, h, lens),
             "packed": lambda layer, h, lens: blstm_packed(layer, h, lens)}
    print(f"model {mcfg.num_layers}x{mcfg.hidden} BLSTM, stack {mcfg.stack}/subsample {mcfg.subsample}; "
          f"batch {args.utts} utts x {int(lengths.min())}-{int(lengths.max())} frames; {args.threads} threads")
    ratios = []
    for r in range(args.rounds):
        order = ["padded", "packed"] if r % 2 == 0 else ["packed", "padded"]
        times = {}
        for name in order:
            for _ in range(2):
                step_fn(model, optimizer, paths[name], x, lengths, targets, target_lens)
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step_fn(model, optimizer, paths[name], x, lengths, targets, target_lens)
            times[name] = (time.perf_counter() - t0) / args.steps
        ratios.append(times["packed"] / times["padded"])
        print(f"round {r + 1}: padded {times['padded'] * 1000:.0f} ms/step, packed {times['packed'] * 1000:.0f} "
              f"ms/step, packed/padded {ratios[-1]:.2f}", flush=True)
    print(f"rnn_padded_over_packed: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
