"""One training step of the loop (asrtrain/train/loop.py) on the CPU: threads per learner, bf16/fp16
autocast, non-finite steps skipped and counted, clipping, and a non-finite final model never written."""

import os

import pytest
import torch

from asrtrain.config.file import load_config
from asrtrain.device import ScaledStep
from asrtrain.errors import AsrError

from tests.helpers.train_runs import data, params, train  # noqa: F401 - the module-scoped feature fixture


def test_threads_come_from_the_learners_on_this_node(monkeypatch):
    from asrtrain.train.loop import threads_for

    cfg = load_config(None, [])
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert threads_for(cfg, 4) == 4
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")  # torchrun: 8 learners here, whatever dist.learners says
    assert threads_for(cfg, 1) == 2


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_on_the_cpu(data, tmp_path, precision):
    """Autocast runs on the CPU too; the loss stays fp32 and falls; fp16's scaler is checkpointed."""
    exp = tmp_path / precision
    r = train(data, exp, "--device", "cpu", "--precision", precision, "--set", "train.epochs=6",
              "--set", "train.lr=0.01")
    assert r.exit_code == 0, r.output
    ck = torch.load(exp / "checkpoints" / "epoch-0006.rank0.pt", weights_only=True)
    hist = ck["history"]
    assert hist[-1]["train_loss"] < 0.7 * hist[0]["train_loss"], hist
    assert all(t.dtype == torch.float32 for t in params(exp / "final.pt").values())  # fp32 master weights
    assert ("scaler" in ck) == (precision == "fp16")
    if precision == "fp16":
        assert ck["scaler"]["scale"] > 0


def test_non_finite_steps_are_skipped_counted_and_stop_training():
    from asrtrain.distributed.base import Strategy
    from asrtrain.train.loop import step_or_skip
    from asrtrain.train.state import Learner

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    learner = Learner(model, model, opt, ScaledStep(opt, None), torch.device("cpu"), "fp32")
    t = load_config(None, ["train.max_bad_steps=3"]).train
    before = model.weight.detach().clone()
    for k in range(2):
        model.weight.grad = torch.full_like(model.weight, float("nan"))
        model.bias.grad = torch.zeros_like(model.bias)
        assert step_or_skip(learner, Strategy(), torch.tensor(1.0), t, k) is None
    assert torch.equal(model.weight, before) and learner.bad_steps == 2  # nothing reached the weights
    model.weight.grad = torch.ones_like(model.weight)
    model.bias.grad = torch.zeros_like(model.bias)
    assert step_or_skip(learner, Strategy(), torch.tensor(2.0), t, 2) == 2.0
    assert learner.bad_steps == 0 and not torch.equal(model.weight, before)
    with pytest.raises(AsrError, match="3 steps in a row had a non-finite loss"):
        for k in range(3):
            step_or_skip(learner, Strategy(), torch.tensor(float("inf")), t, 3 + k)


def test_in_a_sync_group_the_reduced_gradients_alone_decide_the_skip():
    """SSGD / H-ADPSGD members hold the same all-reduced gradients: one member's own non-finite loss must
    not make it skip a step the others take (the replicas would part). Its loss is not counted."""
    from asrtrain.config import DistConfig
    from asrtrain.distributed.base import Strategy
    from asrtrain.distributed.factory import make_strategy
    from asrtrain.train.loop import step_or_skip
    from asrtrain.train.state import Learner

    def shares_of(name):
        return make_strategy(DistConfig(strategy=name, learners=4, learners_per_node=2), 0, 4).shares_gradients()

    shares = {name: shares_of(name) for name in ("ssgd", "h-adpsgd", "adpsgd", "periodic")}
    assert shares == {"ssgd": True, "h-adpsgd": True, "adpsgd": False, "periodic": False}

    class Member(Strategy):
        def shares_gradients(self):
            return True

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    learner = Learner(model, model, opt, ScaledStep(opt, None), torch.device("cpu"), "fp32")
    t = load_config(None, []).train
    for strategy, steps in ((Strategy(), False), (Member(), True)):
        before = model.weight.detach().clone()
        model.weight.grad = torch.ones_like(model.weight)
        model.bias.grad = torch.zeros_like(model.bias)
        assert step_or_skip(learner, strategy, torch.tensor(float("nan")), t, 0) is None
        assert (not torch.equal(model.weight, before)) == steps
    assert learner.bad_steps == 0
    model.weight.grad = torch.full_like(model.weight, float("inf"))  # the group's gradients: all skip
    before = model.weight.detach().clone()
    assert step_or_skip(learner, Member(), torch.tensor(1.0), t, 1) is None
    assert torch.equal(model.weight, before) and learner.bad_steps == 1


@pytest.mark.parametrize("scale", [0.01, 100.0])
def test_clipping_matches_torch_clip_grad_norm(scale):
    """step_or_skip scales the gradients only when their norm exceeds train.grad_clip; the update is
    torch's clip_grad_norm_ either way, to the bit."""
    from asrtrain.distributed.base import Strategy
    from asrtrain.train.loop import step_or_skip
    from asrtrain.train.state import Learner

    t = load_config(None, ["train.grad_clip=5.0"]).train
    g = torch.Generator().manual_seed(0)
    models = [torch.nn.Linear(4, 3) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    grads = [torch.randn(p.shape, generator=g) * scale for p in models[0].parameters()]
    for m in models:
        for p, gr in zip(m.parameters(), grads):
            p.grad = gr.clone()
    ref = torch.optim.SGD(models[1].parameters(), lr=0.1)
    torch.nn.utils.clip_grad_norm_(list(models[1].parameters()), 5.0)
    ref.step()
    opt = torch.optim.SGD(models[0].parameters(), lr=0.1)
    learner = Learner(models[0], models[0], opt, ScaledStep(opt, None), torch.device("cpu"), "fp32")
    assert step_or_skip(learner, Strategy(), torch.tensor(1.0), t, 0) == 1.0
    norm = torch.nn.utils.get_total_norm([p.grad for p in models[0].parameters()])
    assert float(norm) <= 5.0 + 1e-4
    if scale < 1:  # under the bound: the gradients are untouched
        assert all(torch.equal(p.grad, gr) for p, gr in zip(models[0].parameters(), grads))
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a, b)


def test_a_non_finite_final_model_is_never_written(tmp_path):
    from types import SimpleNamespace

    from asrtrain.train.loop import write_final

    job = SimpleNamespace(cfg=load_config(None, ["train.average_last=1"]), exp_dir=tmp_path)
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    with pytest.raises(AsrError, match="non-finite weights"):
        write_final(job, model)
    assert not (tmp_path / "final.pt").exists()
