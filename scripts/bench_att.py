#!/usr/bin/env python
"""What joint CTC/attention training (``model.att_weight``), or the conv front-end (``model.frontend``),
costs a training step on the CPU.

    python scripts/bench_att.py [--rounds 5] [--threads 1] [--config recipes/an4/conf/train.yaml]
    python scripts/bench_att.py --compare frontend     # conv front-end against stacking, both as configured

One training step = forward, loss, backward of the recipe's model (``asrtrain.model.blstm``) on one batch
shaped like the recipe's (``--utts`` utterances of ``--frames`` frames, ``--pieces`` target pieces each):
CTC alone against ``(1 - w) CTC + w CE`` with the attention decoder (``--att-dim``). Two models of the
same encoder, the same batch; rounds alternate which runs first, and each round times one step of each
after a warm-up step.

Last line: ``att_step_over_ctc_step: <ratio>`` (median over rounds of the joint step's time over the CTC
step's: 1.5 means the decoder adds half a step). With ``--compare frontend`` the two models are the
config's (its attention weight kept) with frame stacking and with ``model.frontend=conv`` (``model.stack=1``,
``--conv-channels``), and the last line is ``conv_step_over_stack_step: <ratio>``.
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
    ap.add_argument("--compare", choices=("att", "frontend"), default="att",
                    help="att: CTC alone against joint CTC/attention; frontend: stacking against conv")
    ap.add_argument("--conv-channels", type=int, default=32)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    from asrtrain.config.file import load_config
    from asrtrain.model.blstm import build_model

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = replace(load_config(args.config).model, input_dim=80, num_targets=args.vocab)
    x = torch.randn(args.utts, args.frames, 80)
    lens = torch.full((args.utts,), args.frames)
    targets = torch.randint(1, args.vocab, (args.utts, args.pieces))
    tlens = torch.full((args.utts,), args.pieces)
    if args.compare == "att":
        cfgs = {"ctc": replace(base, att_weight=0.0, att_dim=args.att_dim),
                "joint": replace(base, att_weight=args.att_weight, att_dim=args.att_dim)}
    else:
        cfgs = {"stack": replace(base, frontend="stack"),
                "conv": replace(base, frontend="conv", stack=1, conv_channels=args.conv_channels)}
    models = {k: build_model(c).train() for k, c in cfgs.items()}

    def step(name: str) -> float:
        model = models[name]
        w = model.cfg.att_weight
        t0 = time.perf_counter()
        out = model(x, lens, att=(targets, tlens) if w else None)
        loss = F.ctc_loss(out[0].transpose(0, 1), targets, out[1], tlens, reduction="sum", zero_infinity=True)
        if w:
            loss = (1 - w) * loss + w * out[-1]
        model.zero_grad()
        loss.backward()
        return time.perf_counter() - t0

    for name in models:
        step(name)  # warm-up
    times: dict = {name: [] for name in models}
    for r in range(args.rounds):
        for name in (list(models) if r % 2 == 0 else list(models)[::-1]):
            times[name].append(step(name))
    ref, new = list(models)
    ratios = [b / a for a, b in zip(times[ref], times[new])]
    params = {k: sum(p.numel() for p in m.parameters()) / 1e6 for k, m in models.items()}
    print(f"model {base.num_layers}x{base.hidden}, {args.utts} utterances of {args.frames} frames, "
          f"{args.pieces} pieces each, {args.threads} thread(s): "
          + ", ".join(f"{k} step {statistics.median(times[k]):.3f} s ({params[k]:.2f} M parameters, "
                      f"att_weight {cfgs[k].att_weight}, frontend {cfgs[k].frontend})" for k in models)
          + f" (medians of {args.rounds}); per-round ratios {', '.join(f'{r:.2f}' for r in ratios)}")
    print(f"{'att_step_over_ctc_step' if args.compare == 'att' else 'conv_step_over_stack_step'}: "
          f"{statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
