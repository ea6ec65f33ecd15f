"""DP pieces in one process: the noise scale, per-example clipping, the accountant against opacus' own
RDP functions, sigma from a target epsilon, resume of the accounting, and the one-line refusals."""

from __future__ import annotations

import pytest
import torch

from asrtrain.config import DistConfig, DPConfig
from tests.helpers.dist_toyloop import Rows
from asrtrain.config.file import load_config
from asrtrain.distributed.base import Strategy
from asrtrain.distributed.dp import DPStrategy, epsilon_spent, noise_multiplier_for
from asrtrain.distributed.factory import make_strategy
from asrtrain.errors import AsrError


def linear_loss(model, batch):
    x, y = batch
    return ((model(x) - y) ** 2).sum(), len(x)


def dp_strategy(clip=1.0, sigma=1.0, steps_per_epoch=1, epochs=1, examples=1, seed=5, model=None):
    s = DPStrategy(Strategy(), DPConfig(enabled=True, clip=clip, noise_multiplier=sigma, delta=1e-6), seed)
    model = model or torch.nn.Linear(4, 1).double()
    s.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    s.plan(steps_per_epoch, epochs, examples)
    return s, model


def grad_vec(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def test_noise_has_the_configured_scale():
    """Zero per-example gradients: what remains is the noise, N(0, (sigma C)^2) per coordinate."""
    model = torch.nn.Linear(20000, 10, bias=False).double()
    s, _ = dp_strategy(clip=2.0, sigma=1.5, model=model)  # 1 example per step: normaliser 1
    batch = Rows((torch.zeros(3, 20000, dtype=torch.float64), torch.zeros(3, 10, dtype=torch.float64)))
    s.compute_gradients(model, batch, lambda m, b: (((m(b[0]) - b[1]) ** 2).sum() * 0.0, 0), 0)
    noise = grad_vec(model)
    assert noise.numel() == 200000
    assert float(noise.std()) == pytest.approx(3.0, abs=0.03)  # std of the std: 3/sqrt(4e5) ~ 0.005
    assert abs(float(noise.mean())) < 0.03
    # a different step draws different noise; the same step the same (resume)
    s.apply_step(s.optimizer)
    s.compute_gradients(model, batch, lambda m, b: (((m(b[0]) - b[1]) ** 2).sum() * 0.0, 0), 0)
    assert not torch.equal(grad_vec(model), noise)
    s.steps = 0
    s.compute_gradients(model, batch, lambda m, b: (((m(b[0]) - b[1]) ** 2).sum() * 0.0, 0), 0)
    assert torch.equal(grad_vec(model), noise)


def test_clipping_bounds_every_examples_contribution():
    """G(batch) - G(batch without u), same step and noise, is u's clipped gradient: norm <= C exactly
    when u's gradient is large, and u's own gradient when it is small."""
    torch.manual_seed(0)
    clip = 0.5
    x = torch.randn(6, 4, dtype=torch.float64)
    y = torch.randn(6, 1, dtype=torch.float64)
    x[0] *= 100  # a huge gradient
    x[1] *= 1e-3
    y[1] = 0.0  # a tiny gradient
    s, model = dp_strategy(clip=clip, sigma=1.0)
    s.compute_gradients(model, Rows((x, y)), linear_loss, 0)
    full = grad_vec(model).clone()
    contributions = []
    for u in range(6):
        keep = [i for i in range(6) if i != u]
        s.compute_gradients(model, Rows((x[keep], y[keep])), linear_loss, 0)
        contributions.append(full - grad_vec(model))
    for c in contributions:
        assert float(c.norm()) <= clip * (1 + 1e-9)
    assert float(contributions[0].norm()) == pytest.approx(clip, rel=1e-6)
    model.zero_grad()
    loss, _ = linear_loss(model, (x[1:2], y[1:2]))
    loss.backward()
    own = grad_vec(model)
    assert float(own.norm()) < clip
    torch.testing.assert_close(contributions[1], own, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("q,sigma,steps,delta", [(0.01, 1.0, 1000, 1e-5), (0.1, 2.0, 300, 1e-6),
                                                 (1 / 64, 0.8, 640, 1e-4)])
def test_epsilon_matches_opacus_rdp(q, sigma, steps, delta):
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent
    from opacus.accountants.rdp import RDPAccountant

    orders = RDPAccountant.DEFAULT_ALPHAS
    expected, _ = get_privacy_spent(orders=orders, rdp=compute_rdp(q=q, noise_multiplier=sigma, steps=steps,
                                                                    orders=orders), delta=delta)
    assert epsilon_spent([(sigma, q, steps)], delta) == pytest.approx(expected, rel=1e-12)
    # the strategy's own history, step by step, gives the same
    s, model = dp_strategy(sigma=sigma, steps_per_epoch=round(1 / q), examples=round(1 / q))
    for _ in range(steps):
        s.apply_step(s.optimizer)
    s.cfg = DPConfig(enabled=True, clip=1.0, noise_multiplier=sigma, delta=delta)
    assert s.epsilon() == pytest.approx(expected, rel=1e-12)


def test_sigma_from_target_epsilon_spends_at_most_the_target():
    sigma = noise_multiplier_for(8.0, 1e-5, 0.01, 2000)
    eps = epsilon_spent([(sigma, 0.01, 2000)], 1e-5)
    assert 7.9 < eps <= 8.0
    assert noise_multiplier_for(2.0, 1e-5, 0.01, 2000) > sigma  # less privacy budget, more noise


def test_target_epsilon_sets_sigma_at_plan_and_resume_keeps_the_accounting():
    cfg = DPConfig(enabled=True, clip=1.0, epsilon=4.0, delta=1e-4)
    s = DPStrategy(Strategy(), cfg)
    model = torch.nn.Linear(2, 1)
    s.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    s.plan(10, 3, 500)
    assert s.sigma == pytest.approx(noise_multiplier_for(4.0, 1e-4, 0.1, 30))
    for _ in range(17):
        s.apply_step(s.optimizer)
    state = s.state_dict()
    t = DPStrategy(Strategy(), cfg)
    t.load_state_dict(state)
    t.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    t.plan(10, 3, 500)
    assert (t.sigma, t.steps, t.history) == (s.sigma, 17, s.history)
    for _ in range(13):
        s.apply_step(s.optimizer)
        t.apply_step(t.optimizer)
    assert t.epsilon() == s.epsilon() == pytest.approx(4.0, abs=0.02)


@pytest.mark.parametrize("cfg,strategy,words", [
    (DPConfig(enabled=True, clip=0.0, noise_multiplier=1.0), "ssgd", "without per-example clipping"),
    (DPConfig(enabled=True, clip=1.0), "ssgd", "exactly one of"),
    (DPConfig(enabled=True, clip=1.0, noise_multiplier=1.0, epsilon=3.0), "ssgd", "exactly one of"),
    (DPConfig(enabled=True, clip=1.0, noise_multiplier=1.0, delta=1.0), "ssgd", "dp.delta"),
    (DPConfig(enabled=True, clip=1.0, noise_multiplier=1.0), "h-adpsgd", "not supported"),
    (DPConfig(enabled=True, clip=1.0, noise_multiplier=1.0), "periodic", "not supported"),
])
def test_refusals_are_one_line(cfg, strategy, words):
    with pytest.raises(AsrError) as err:
        make_strategy(DistConfig(strategy=strategy, learners=4, learners_per_node=2), 0, 4, dp=cfg)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_delta_not_below_one_over_n_is_refused():
    with pytest.raises(AsrError, match=r"dp.delta = 0.01 >= 1/n for n = 200 utterances per learner"):
        s = DPStrategy(Strategy(), DPConfig(enabled=True, clip=1.0, noise_multiplier=1.0, delta=0.01))
        s.plan(10, 1, 200)


def test_config_and_overrides_for_period_and_dp(tmp_path):
    cfg = load_config(None, ["dist.strategy=periodic", "dist.period=adaptive", "dp.enabled=true",
                             "dp.epsilon=8"])
    assert (cfg.dist.period, cfg.dp.epsilon, cfg.dp.noise_multiplier) == ("adaptive", 8.0, 0.0)
    assert load_config(None, ["dist.period=4"]).dist.period == "4"
    for bad in ("0", "often", "-2"):
        with pytest.raises(AsrError, match="dist.period"):
            load_config(None, [f"dist.period={bad}"])


def test_dp_with_dynamic_balance_is_accepted_and_a_share_below_one_refused():
    cfg = load_config(None, ["dp.enabled=true", "dp.epsilon=8", "train.balance=dynamic",
                             "dp.max_step_share=1.5"])
    assert (cfg.train.balance, cfg.dp.max_step_share) == ("dynamic", 1.5)
    with pytest.raises(AsrError, match="dp.max_step_share = 0.5") as err:
        load_config(None, ["dp.enabled=true", "dp.epsilon=8", "dp.max_step_share=0.5"])
    assert "\n" not in str(err.value)


def test_sigma_is_planned_for_the_most_steps_a_fast_learner_may_take():
    """Private dynamic balance: q from the pass over the learner's own shard, T from its step cap, so
    a learner that uses its whole cap spends exactly the target and a slower one less."""
    cfg = DPConfig(enabled=True, clip=1.0, epsilon=4.0, delta=1e-4)
    s = DPStrategy(Strategy(), cfg)
    model = torch.nn.Linear(2, 1)
    s.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    s.plan(10, 3, 500, privacy=lambda: (12, 20))
    assert s.sample_rate == pytest.approx(1 / 12) and s.planned_steps == 60
    assert s.sigma == pytest.approx(noise_multiplier_for(4.0, 1e-4, 1 / 12, 60))
    assert s.sigma > noise_multiplier_for(4.0, 1e-4, 1 / 12, 30)  # more steps allowed, more noise
    for _ in range(30):
        s.apply_step(s.optimizer)
    half = s.epsilon()
    for _ in range(30):
        s.apply_step(s.optimizer)
    assert half < s.epsilon() == pytest.approx(4.0, abs=0.02)


def test_fp16_scale_multiplies_the_private_gradient_and_wrap_is_the_bare_model():
    torch.manual_seed(1)
    x, y = torch.randn(5, 4, dtype=torch.float64), torch.randn(5, 1, dtype=torch.float64)
    s, model = dp_strategy(clip=0.3, sigma=1.0)
    s.compute_gradients(model, Rows((x, y)), linear_loss, 0)
    plain = grad_vec(model).clone()
    s.compute_gradients(model, Rows((x, y)), linear_loss, 0, scale=lambda t: t * 1024.0)
    torch.testing.assert_close(grad_vec(model), plain * 1024.0)
    from asrtrain.distributed.ssgd import SSGD
    dp_ssgd = DPStrategy(SSGD(0, 2), DPConfig(enabled=True, clip=1.0, noise_multiplier=1.0))
    assert dp_ssgd.wrap(model) is model  # never DDP: per-utterance passes must not all-reduce


def test_fp16_per_example_backward_runs_on_the_scaled_loss():
    """An fp16 gradient that underflows unscaled survives the per-utterance backward under the scaler's
    scale (as in a scaled backward of the whole batch); the scale is divided out before clipping."""
    class Half(torch.nn.Module):  # a weight whose gradient passes through fp16 activations
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))

    def loss_fn(net, ex):
        x, _ = ex
        act = (net.w * x).half()  # 1e-3 in fp16; its gradient 2e-9 is below fp16's smallest subnormal
        return (act.float() ** 2).sum() * 1e-6, 1

    x = torch.full((3, 1), 1e-3)
    for scale, survives in ((None, False), (lambda t: t * 2.0 ** 16, True)):
        s, _ = dp_strategy(clip=1.0, sigma=1e-20)  # noise far below the 6e-12 gradient
        net = Half()
        s.compute_gradients(net, Rows((x, torch.zeros(3, 1))), loss_fn, 0, scale=scale)
        g = float(net.w.grad) / (2.0 ** 16 if scale else 1.0)
        assert (abs(g - 6e-12) < 1e-13) if survives else abs(g) < 1e-18, g  # the true gradient, or noise


def test_noise_to_signal_is_reported_and_a_hopeless_run_warned(caplog):
    """sigma C sqrt(d M) / normaliser per step, over sqrt(T) for the run; above 1 a warning names the
    knobs. Sigma 1, 5 utterances a step, 100 steps: 1,000 parameters give 6.3 per step and 0.63 over
    the run (no warning); 100,000 parameters give 6.3 over the run (warned)."""
    import logging
    import math
    cfg = DPConfig(enabled=True, clip=1.0, noise_multiplier=1.0, delta=1e-4)
    for d, warned in ((1000, False), (100_000, True)):
        s = DPStrategy(Strategy(), cfg)
        model = torch.nn.Linear(d, 1, bias=False)
        s.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="asrtrain.train"):
            s.plan(20, 5, 100)  # 5 utterances per step, 100 steps
        per_step, run = s.noise_to_signal()
        assert per_step == pytest.approx(math.sqrt(d) / 5)
        assert run == pytest.approx(math.sqrt(d) / 5 / 10)
        assert any("noise dominates" in r.getMessage() for r in caplog.records) == warned
        assert any("largest clipped mean gradient" in r.getMessage() for r in caplog.records)
    from asrtrain.distributed.ssgd import SSGD
    from asrtrain.distributed.adpsgd import ADPSGD
    two = DPStrategy(SSGD(0, 2), cfg)  # 2 learners: twice the utterances, sqrt(2) the noise
    model = torch.nn.Linear(1000, 1, bias=False)
    two.model, two.normaliser, two.planned_steps = model, 10.0, 100  # setup() needs a process group
    assert two.noise_to_signal()[0] == pytest.approx(math.sqrt(2000) / 10)
    ring = DPStrategy(ADPSGD(0, 2), cfg)  # gossip: each learner normalises by its own 5, the average by 10
    ring.model, ring.normaliser, ring.planned_steps = model, 5.0, 100
    assert ring.noise_to_signal()[0] == pytest.approx(math.sqrt(2000) / 10)
