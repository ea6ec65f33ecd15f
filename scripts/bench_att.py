#!/usr/bin/env python
"""What joint CTC/attention training (``model.att_weight``) costs a training step on the CPU.

    python scripts/bench_att.py [--rounds 5] [--threads 1] [--config recipes/an4/conf/train.yaml]

One training step = forward, loss, backward of the recipe's model (``asrtrain.model.blstm``) on one batch
shaped like the recipe's (``--utts`` utterances of ``--frames`` frames, ``--pieces`` target pieces each):
CTC alone against ``(1 - w) CTC + w CE`` with the attention decoder (``--att-dim``). Two models of the
same encoder, the same batch; rounds alternate which runs first, and each round times one step of each
after a warm-up step.

Last line: ``att_step_over_ctc_step: <ratio>`` (median over rounds of the joint step's time over the CTC
step's: 1.5 means the decoder adds half a step).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=ROOT / "recipes" / "an4" / "conf" / "train.yaml")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--utts", type=int, default=20)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--pieces", type=int, default=35)
    ap.add_argument("--vocab", type=int, default=30)
    ap.add_argument("--att-weight", type=float, default=0.3)
    ap.add_argument("--att-dim", type=int, default=320)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    from asrtrain.config import load_config
    from asrtrain.model.blstm import build_model

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = replace(load_config(args.config).model, input_dim=80, num_targets=args.vocab)
    x = torch.randn(args.utts, args.frames, 80)
    lens = torch.full((args.utts,), args.frames)
    targets = torch.randint(1, args.vocab, (args.utts, args.pieces))
    tlens = torch.full((args.utts,), args.pieces)
    models = {w: build_model(replace(base, att_weight=w, att_dim=args.att_dim)).train()
              for w in (0.0, args.att_weight)}

    def step(w: float) -> float:
        model = models[w]
        t0 = time.perf_counter()
        out = model(x, lens, att=(targets, tlens) if w else None)
        loss = F.ctc_loss(out[0].transpose(0, 1), targets, out[1], tlens, reduction="sum", zero_infinity=True)
        if w:
            loss = (1 - w) * loss + w * out[-1]
        model.zero_grad()
        loss.backward()
        return time.perf_counter() - t0

    for w in models:
        step(w)  # warm-up
    times: dict = {w: [] for w in models}
    for r in range(args.rounds):
        for w in (list(models) if r % 2 == 0 else list(models)[::-1]):
            times[w].append(step(w))
    ctc, joint = times[0.0], times[args.att_weight]
    ratios = [b / a for a, b in zip(ctc, joint)]
    print(f"model {base.num_layers}x{base.hidden}, stack {base.stack}, {args.utts} utterances of {args.frames} "
          f"frames, {args.pieces} pieces each, att_dim {args.att_dim}, {args.threads} thread(s): CTC step "
          f"{statistics.median(ctc):.3f} s, joint step {statistics.median(joint):.3f} s (medians of "
          f"{args.rounds}); per-round ratios {', '.join(f'{r:.2f}' for r in ratios)}")
    print(f"att_step_over_ctc_step: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
