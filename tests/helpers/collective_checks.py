"""Checks of the strategies' real collectives against single-learner references, one body for every
backend: tests/gpu runs them over NCCL (a GPU per learner), tests/distributed over gloo on the CPU, where
they are also shown to fail with DDP's all-reduce made wrong (``ToyArgs.break_reduce``).

The toy loop (:mod:`tests.helpers.dist_toyloop`) trains a float64 ``Linear(6, 1)`` with a nonzero learning
rate and SGD momentum and records, on every learner, each step's weights at the forward pass and its
gradient after the strategy's reduce. The references are computed here, in the test process:

- the gradient a learner holds after the reduce equals one learner's gradient over the whole data of its
  group at the same weights (SSGD: the global batch; H-ADPSGD: the group's batch; ADPSGD: its own);
- SSGD's final weights equal one learner trained on the whole global batches;
- gossip (ADPSGD between learners, H-ADPSGD between groups) conserves the sum of the weights, so the final
  average is the initial one minus ``lr`` times the sum of every learner's (group's) momentum steps.
"""

from __future__ import annotations

from typing import List

import torch

from tests.helpers import dist_toyloop as toyloop

ATOL = 1e-8  # float64: what differs is only the order of the sums


def ssgd_job(out, learners: int, device: str, **kw) -> toyloop.ToyArgs:
    from asrtrain.config import DistConfig
    return toyloop.ToyArgs(str(out), DistConfig(strategy="ssgd", learners=learners), batch=8 // learners,
                           num_batches=8, device=device, record_steps=True, **kw)


def adpsgd_job(out, learners: int, device: str, **kw) -> toyloop.ToyArgs:
    """Learners start apart (distinct_init) and setup's broadcast (the default group's) makes them equal."""
    from asrtrain.config import DistConfig
    return toyloop.ToyArgs(str(out), DistConfig(strategy="adpsgd", learners=learners), batch=2,
                           num_batches=learners * 10, distinct_init=True, sync_initial=True, device=device,
                           record_steps=True, **kw)


def hadpsgd_job(out, device: str, **kw) -> toyloop.ToyArgs:
    """Four learners in two groups of two; a group's members start apart and its leader's broadcast (the
    group's own group: NCCL on GPUs) makes them equal."""
    from asrtrain.config import DistConfig
    cfg = DistConfig(strategy="h-adpsgd", learners=4, learners_per_node=2, averaging="random",
                     delay_by_one=True)
    return toyloop.ToyArgs(str(out), cfg, batch=2, num_batches=2 * 10, check_group_identical=True,
                           distinct_init=True, device=device, record_steps=True, **kw)


def reference_gradient(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One learner's gradient of the toy loss ``sum((model(x) - y)^2) / len(x)`` at flat weights ``w``."""
    from asrtrain.distributed.collective import set_flat_
    model = toyloop.make_model(0)
    set_flat_(list(model.parameters()), w)
    (((model(x) - y) ** 2).sum() / len(x)).backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def group_batches(args: toyloop.ToyArgs, group: int, num_groups: int, group_size: int) -> list:
    """The whole batches of one group, in its step order (the union of its members' slices)."""
    batches = toyloop.global_batches(args.num_batches, args.batch * group_size, args.seed)
    return batches[group::num_groups][:args.num_batches // num_groups]


def momentum_steps(grads: List[torch.Tensor], momentum: float) -> torch.Tensor:
    """The sum of torch SGD's steps ``b_k`` (``b_1 = g_1``, ``b_k = momentum b_(k-1) + g_k``): the weights
    move by ``-lr`` times it."""
    b, total = None, torch.zeros_like(grads[0])
    for g in grads:
        b = g.clone() if b is None else momentum * b + g
        total += b
    return total


def check_gradients_are_the_groups(args: toyloop.ToyArgs, res: list, group_size: int) -> None:
    """Every learner's reduced gradient, every step, equals one learner's over its group's whole batch."""
    world = len(res)
    num_groups = world // group_size
    for rank, r in enumerate(res):
        g, member = divmod(rank, group_size)
        batches = group_batches(args, g, num_groups, group_size)
        assert len(r["steps_g"]) == len(batches) > 0, (rank, len(r["steps_g"]))
        for k, ((x, y), w, got) in enumerate(zip(batches, r["steps_w"], r["steps_g"])):
            want = reference_gradient(w, x, y)
            assert torch.allclose(got, want, rtol=0, atol=ATOL), (
                f"rank {rank} step {k}: reduced gradient {got.tolist()} != the group's {want.tolist()}")


def check_ssgd(args: toyloop.ToyArgs) -> None:
    res = toyloop.load(args.out, args.dist_cfg.learners)
    check_gradients_are_the_groups(args, res, len(res))
    single = toyloop.single_reference(toyloop.ToyArgs("", None, batch=8, num_batches=8, lr=args.lr,
                                                      momentum=args.momentum, seed=args.seed))
    for r in res:
        assert torch.allclose(r["final"], single, rtol=0, atol=ATOL), (r["final"], single)


def check_gossip_conserves_the_sum(args: toyloop.ToyArgs, res: list, group_size: int) -> None:
    """The final average (over learners) = the initial one - lr * (sum of each group's momentum steps) / G."""
    num_groups = len(res) // group_size
    leaders = res[::group_size]
    start = torch.stack([r["initial"] for r in leaders]).mean(0)
    moved = sum(momentum_steps(r["steps_g"], args.momentum) for r in leaders) / num_groups
    want = start - args.lr * moved
    for r in res:
        assert torch.allclose(r["final"], want, rtol=0, atol=1e-7), (r["final"], want)


def check_adpsgd(args: toyloop.ToyArgs) -> None:
    """Setup's broadcast moved rank 0's weights to every learner (they were made apart); each gradient is
    the learner's own; the gossip conserves the sum while the weights move."""
    res = toyloop.load(args.out, args.dist_cfg.learners)
    own = torch.cat([p.detach().reshape(-1) for p in toyloop.make_model(args.seed + 100).parameters()])
    assert not torch.equal(own, res[0]["initial"])
    for r in res:
        assert torch.equal(r["initial"], res[0]["initial"]), "the initial broadcast missed a learner"
        assert r["metrics"]["exchanges"] > 0
    check_gradients_are_the_groups(args, res, 1)
    check_gossip_conserves_the_sum(args, res, 1)


def check_hadpsgd(args: toyloop.ToyArgs) -> None:
    res = toyloop.load(args.out, 4)
    assert torch.equal(res[0]["initial"], res[1]["initial"]), "the leader's broadcast missed its member"
    assert torch.equal(res[2]["initial"], res[3]["initial"]), "the leader's broadcast missed its member"
    assert not torch.equal(res[0]["initial"], res[2]["initial"])  # the groups start apart
    for r in res:
        assert r["identical_ok"], "a group's members held different weights after a step"
    check_gradients_are_the_groups(args, res, 2)
    check_gossip_conserves_the_sum(args, res, 2)
    assert res[0]["metrics"]["exchanges"] > 0 and "exchanges" not in res[1]["metrics"]
