"""A tiny training loop that calls a Strategy exactly as asrtrain/distributed/base.py prescribes.

Model: a linear layer (float64, so parity tests can be tight). Data: synthetic regression batches,
identical on every learner (generated from a seed), split by ``strategy.partition()``.
Each learner writes ``<out>/rank<r>.pt`` with what the test needs to check.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import torch
import torch.distributed as dist

from asrtrain.config import DistConfig
from asrtrain.distributed import collective
from asrtrain.distributed.factory import make_strategy
from asrtrain.distributed.runtime.beacon import note_progress

DIM = 6
SUM_HOOK = collective._sum_hook  # ddp_sum's own, put back for every job after one that broke it


@dataclass
class ToyArgs:
    out: str
    dist_cfg: DistConfig
    num_batches: int = 8  # global batches
    batch: int = 8  # samples per learner slice
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 3
    zero_grad: bool = False  # lr 0: weights change only by averaging
    distinct_init: bool = False  # every learner starts from different weights
    sync_initial: Optional[bool] = None  # setup's broadcast of rank 0's weights; default: not distinct_init
    sleep_s: float = 0.0  # per-step "compute" (multiplied by dist.slowdown for that rank)
    extra_batches: dict = field(default_factory=dict)  # rank -> batches more than the others
    kill_rank: Optional[int] = None
    kill_at_step: int = 3
    kill_signal: int = 9  # SIGKILL; SIGSTOP (19) hangs the learner instead; 0: its main thread sleeps forever
    check_group_identical: bool = False  # all_gather after every step (H-ADPSGD invariant)
    staged: bool = False  # gossip through DeviceWeights (the GPU path's staging and folds) even on the CPU
    device: str = "cpu"  # where the model and batches live (the gpu tests use cuda)
    record_steps: bool = False  # keep every step's weights (at the forward) and gradient (after the reduce)
    break_reduce: str = ""  # "mean" | "world": DDP's gradient all-reduce made wrong, to show a check fails


class Rows(tuple):
    """A toy batch ``(x, y)`` of row tensors that splits into one-row examples, as DP asks of a batch."""

    def examples(self):
        for i in range(len(self[0])):
            yield Rows(t[i:i + 1] for t in self)


def global_batches(num: int, size: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    w_true = torch.randn(DIM, 1, generator=g, dtype=torch.float64)
    out = []
    for _ in range(num):
        x = torch.randn(size, DIM, generator=g, dtype=torch.float64)
        out.append((x, x @ w_true + 0.1 * torch.randn(size, 1, generator=g, dtype=torch.float64)))
    return out


def make_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Linear(DIM, 1).double()


def my_batches(strategy, args: ToyArgs):
    """The batches this learner reads, per base.py: every num_groups-th global batch, member's slice."""
    part = strategy.partition()
    n = args.num_batches + args.extra_batches.get(strategy.rank, 0) * part.num_groups
    batches = global_batches(n * 1, args.batch * part.group_size, args.seed)
    mine = batches[part.group::part.num_groups]
    n_mine = args.num_batches // part.num_groups + args.extra_batches.get(strategy.rank, 0)
    return [Rows((x[part.member::part.group_size], y[part.member::part.group_size])) for x, y in mine[:n_mine]]


def train(rank: int, world_size: int, jobs: List[ToyArgs]) -> None:
    """Run several toy jobs one after the other in the same learners (spawning costs seconds)."""
    for args in jobs:
        train_one(rank, world_size, args, args.dist_cfg, Path(args.out))


def train_one(rank: int, world_size: int, args: ToyArgs, cfg: DistConfig, out: Path) -> None:
    from asrtrain.distributed import gossip as comm, gossip_weights as weights

    comm.make_weights = weights.DeviceWeights if args.staged else weights.make_weights
    collective._sum_hook = _broken_reduce(args.break_reduce) if args.break_reduce else SUM_HOOK  # per job
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    strategy = make_strategy(cfg, rank, world_size, seed=args.seed,
                             sync_initial_weights=not args.distinct_init if args.sync_initial is None
                             else args.sync_initial)
    model = make_model(args.seed + (100 * rank if args.distinct_init else 0)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0 if args.zero_grad else args.lr,
                                momentum=args.momentum)
    t_start = time.perf_counter()
    strategy.setup(model, optimizer)
    net = strategy.wrap(model)
    timeouts = {name: group_timeout_s(g) for name in ("group", "host_group", "count_group")
                if (g := getattr(strategy, name, None)) is not None}
    initial = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()
    identical_ok = True
    steps_w, steps_g = [], []
    slow = strategy.slowdown
    t_loop = time.perf_counter()
    for step, (x, y) in enumerate(my_batches(strategy, args)):
        x, y = x.to(device), y.to(device)
        if args.kill_rank == rank and step == args.kill_at_step:
            if args.kill_signal:
                os.kill(os.getpid(), args.kill_signal)
            time.sleep(3600)  # a stuck main thread: the heartbeat thread goes on
        strategy.before_step(step)
        optimizer.zero_grad()
        if args.record_steps:
            steps_w.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu())
        loss = ((net(x) - y) ** 2).sum() / strategy.global_count(len(x))
        loss.backward()
        if args.sleep_s:
            time.sleep(args.sleep_s)  # the "compute"; slowdown multiplies it in reduce_gradients
        strategy.reduce_gradients()
        if args.record_steps:
            steps_g.append(torch.cat([p.grad.detach().reshape(-1) for p in model.parameters()]).cpu())
        strategy.apply_step(optimizer)
        strategy.after_step(step)
        note_progress()
        if args.check_group_identical:
            identical_ok &= group_identical(model, strategy)
    loop_s = time.perf_counter() - t_loop
    strategy.end_epoch(0)
    before_final = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()
    metrics = strategy.metrics()
    t0 = time.perf_counter()
    final = strategy.finalize(model)
    after = torch.cat([p.detach().reshape(-1) for p in final.parameters()]).cpu()
    for key, value in strategy.metrics().items():  # counters add up; samples are replaced
        counter = key in ("exchanges", "comm_s", "comm_cpu_s", "lock_wait_s")
        metrics[key] = metrics.get(key, 0.0) + value if counter else value
    metrics["finalize_s"] = time.perf_counter() - t0
    metrics["train_s"] = t0 - t_start
    metrics["loop_s"] = loop_s
    strategy.close()
    torch.save({"initial": initial, "before_final": before_final, "final": after, "metrics": metrics,
                "identical_ok": identical_ok, "slowdown": slow, "state": strategy.state_dict(),
                "group_timeouts": timeouts, "foreign_gpus": foreign_gpu_contexts(device),
                "steps_w": steps_w, "steps_g": steps_g, "backend": dist.get_backend()},
               out / f"rank{rank}.pt")


def _broken_reduce(how: str):
    """A wrong DDP comm hook for :func:`asrtrain.distributed.collective.ddp_sum`: ``mean`` averages instead
    of summing, ``world`` sums over the whole job instead of the strategy's group (H-ADPSGD's group of M)."""
    def hook(group, bucket):
        buf = bucket.buffer()
        fut = dist.all_reduce(buf, group=None if how == "world" else group, async_op=True).get_future()
        size = dist.get_world_size(group)
        return fut.then(lambda f: f.value()[0] / size if how == "mean" else f.value()[0])

    return hook


def foreign_gpu_contexts(device: torch.device) -> List[int]:
    """The GPUs other than this learner's on which this process holds a CUDA context (a helper thread that
    touched CUDA without binding its device opens one on GPU 0)."""
    if device.type != "cuda":
        return []
    mine = device.index if device.index is not None else torch.cuda.current_device()
    return [i for i in range(torch.cuda.device_count())
            if i != mine and torch._C._cuda_hasPrimaryContext(i)]


def group_timeout_s(group) -> float:
    """The collective timeout of a process group, in seconds (torch keeps it in its backend's options). An
    NCCL group (H-ADPSGD's sync group on GPUs) has a backend for CUDA tensors only: asking it for the CPU's
    raises "No backend type associated with device type cpu"."""
    device = torch.device("cuda" if dist.get_backend(group) == "nccl" else "cpu")
    return group._get_backend(device).options._timeout.total_seconds()


def group_identical(model, strategy) -> bool:
    """All-gather every learner's weights; members of one group must hold the same bits."""
    vec = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()
    got = [torch.empty_like(vec) for _ in range(strategy.world_size)]
    dist.all_gather(got, vec, group=strategy.host_group)
    part = strategy.partition()
    first = part.group * part.group_size
    return all(torch.equal(got[first + m], got[first]) for m in range(part.group_size))


def single_reference(args: ToyArgs):
    """One learner on the whole global batches, in this process, with the base Strategy."""
    from asrtrain.distributed.base import Strategy
    strategy = Strategy()
    model = make_model(args.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    strategy.setup(model, optimizer)
    net = strategy.wrap(model)
    timeouts = {name: group_timeout_s(g) for name in ("group", "host_group", "count_group")
                if (g := getattr(strategy, name, None)) is not None}
    for step, (x, y) in enumerate(my_batches(strategy, args)):
        strategy.before_step(step)
        optimizer.zero_grad()
        loss = ((net(x) - y) ** 2).sum() / strategy.global_count(len(x))
        loss.backward()
        strategy.reduce_gradients()
        strategy.apply_step(optimizer)
        strategy.after_step(step)
    return torch.cat([p.detach().reshape(-1) for p in strategy.finalize(model).parameters()])


def load(out, world_size: int):
    return [torch.load(Path(out) / f"rank{r}.pt", weights_only=True) for r in range(world_size)]
