"""A toy loop for periodic averaging and DP: dist_toyloop's model and data, steps taken through
``strategy.compute_gradients`` as asrtrain/train/loop.py takes them, and an optional mid-run resume
(state through torch.save / torch.load(weights_only=True), as a checkpoint carries it)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import torch

from tests.helpers import dist_toyloop as toyloop
from asrtrain.config import DistConfig, DPConfig
from asrtrain.distributed.factory import make_strategy


@dataclass
class PArgs:
    out: str
    dist_cfg: DistConfig
    dp: Optional[DPConfig] = None
    num_batches: int = 8  # global batches
    batch: int = 4  # samples per learner slice
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 3
    resume_at: int = 0  # > 0: checkpoint at this step, rebuild everything from it, go on


def toy_loss(model, batch):
    x, y = batch
    return ((model(x) - y) ** 2).sum(), len(x)


def batches_for(strategy, args: PArgs):
    return toyloop.my_batches(strategy, toyloop.ToyArgs("", args.dist_cfg, num_batches=args.num_batches,
                                                        batch=args.batch, seed=args.seed))


def build(args: PArgs, rank: int, world_size: int, steps: int, state=None):
    strategy = make_strategy(args.dist_cfg, rank, world_size, seed=args.seed,
                             sync_initial_weights=state is None, dp=args.dp)
    model = toyloop.make_model(args.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        strategy.load_state_dict(state["strategy"])
    strategy.setup(model, optimizer)
    strategy.plan(steps, 1, args.num_batches * args.batch * world_size)
    strategy.net = strategy.wrap(model)
    return strategy, model, optimizer


def checkpoint(strategy, model, optimizer):
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "strategy": strategy.state_dict()}, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def period_of(strategy) -> int:
    inner = getattr(strategy, "inner", strategy)
    return inner.rule.period if hasattr(inner, "rule") else 0


def train(rank: int, world_size: int, jobs: List[PArgs]) -> None:
    for args in jobs:
        train_one(rank, world_size, args)


def train_one(rank: int, world_size: int, args: PArgs) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe = make_strategy(args.dist_cfg, rank, world_size, seed=args.seed)
    batches = batches_for(probe, args)
    strategy, model, optimizer = build(args, rank, world_size, len(batches))
    periods, resumed_state = [], None
    for step, batch in enumerate(batches):
        if args.resume_at and step == args.resume_at:
            resumed_state = checkpoint(strategy, model, optimizer)
            strategy.close()
            strategy, model, optimizer = build(args, rank, world_size, len(batches), resumed_state)
        strategy.before_step(step)
        strategy.compute_gradients(strategy.net, batch, toy_loss, len(batch[0]))
        strategy.reduce_gradients()
        strategy.apply_step(optimizer)
        strategy.after_step(step)
        periods.append(period_of(strategy))
    strategy.end_epoch(0)
    metrics = strategy.metrics()
    state = strategy.state_dict()
    eps = strategy.epsilon() if hasattr(strategy, "epsilon") else None
    sigma = getattr(strategy, "sigma", None)
    final = torch.cat([p.detach().reshape(-1) for p in strategy.finalize(model).parameters()]).clone()
    strategy.close()
    torch.save({"final": final, "periods": periods, "metrics": metrics, "state": state, "epsilon": eps,
                "sigma": sigma, "steps": len(batches)}, out / f"rank{rank}.pt")


def reference(args: PArgs, world_size: int, period: int) -> torch.Tensor:
    """In this process: ``world_size`` independent SGD learners on their slices (own momentum), their
    weights replaced by the mean every ``period`` steps and at the end."""
    models = [toyloop.make_model(args.seed) for _ in range(world_size)]
    opts = [torch.optim.SGD(m.parameters(), lr=args.lr, momentum=args.momentum) for m in models]
    data = toyloop.global_batches(args.num_batches, args.batch * world_size, args.seed)

    def average():
        with torch.no_grad():
            for ps in zip(*(m.parameters() for m in models)):
                mean = torch.stack([p.detach() for p in ps]).sum(0) / world_size
                for p in ps:
                    p.copy_(mean)

    for step, (x, y) in enumerate(data):
        for r, (m, o) in enumerate(zip(models, opts)):
            o.zero_grad()
            loss, count = toy_loss(m, (x[r::world_size], y[r::world_size]))
            (loss / count).backward()
            o.step()
        if (step + 1) % period == 0:
            average()
    average()
    return torch.cat([p.detach().reshape(-1) for p in models[0].parameters()])
