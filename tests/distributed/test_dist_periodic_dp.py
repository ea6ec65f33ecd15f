"""Periodic averaging (constant and adaptive period) and DP under real learners (2 processes, gloo):
H = 1 and H = 4 equal an in-process model-averaging reference, the adaptive period grows as learners
agree, and a mid-run resume continues the period, the weights and the epsilon exactly."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import dist_periodic_loop as ploop
from asrtrain.config import DistConfig, DPConfig
from asrtrain.distributed.dp import epsilon_spent
from asrtrain.distributed.runtime.launch import run_learners

pytestmark = pytest.mark.slow  # the module fixture runs spawned learners

ADAPTIVE = DistConfig(strategy="periodic", learners=2, period="adaptive", period_max=16)
DP = DPConfig(enabled=True, clip=0.5, noise_multiplier=1.0, delta=1e-3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("periodic")
    jobs = {
        "h1": ploop.PArgs(str(tmp / "h1"), DistConfig(strategy="periodic", learners=2, period="1")),
        "h4": ploop.PArgs(str(tmp / "h4"), DistConfig(strategy="periodic", learners=2, period="4"),
                          num_batches=10),
        "adaptive": ploop.PArgs(str(tmp / "adaptive"), ADAPTIVE, num_batches=120, momentum=0.0, lr=0.02),
        "adaptive_resumed": ploop.PArgs(str(tmp / "adaptive_resumed"), ADAPTIVE, num_batches=120,
                                        momentum=0.0, lr=0.02, resume_at=53),
        "ssgd_dp": ploop.PArgs(str(tmp / "ssgd_dp"), DistConfig(strategy="ssgd", learners=2), dp=DP,
                               num_batches=12),
        "ssgd_dp_resumed": ploop.PArgs(str(tmp / "ssgd_dp_resumed"), DistConfig(strategy="ssgd", learners=2),
                                       dp=DP, num_batches=12, resume_at=5),
        "adpsgd_dp": ploop.PArgs(str(tmp / "adpsgd_dp"), DistConfig(strategy="adpsgd", learners=2), dp=DP,
                                 num_batches=12),
    }
    run_learners(ploop.train, list(jobs.values()), learners=2, backend="gloo", timeout_s=30)
    out = {k: [torch.load(f"{j.out}/rank{r}.pt") for r in range(2)] for k, j in jobs.items()}
    out["args"] = jobs
    return out


@pytest.mark.parametrize("name,period", [("h1", 1), ("h4", 4)])
def test_periodic_equals_model_averaging_reference(runs, name, period):
    ref = ploop.reference(runs["args"][name], 2, period)
    start = torch.cat([p.detach().reshape(-1) for p in ploop.toyloop.make_model(3).parameters()])
    assert (ref - start).abs().max() > 0.1, "training must move the weights"
    for r in runs[name]:
        torch.testing.assert_close(r["final"], ref, rtol=0, atol=1e-12)
        assert r["state"]["averagings"] == r["steps"] // period
        assert set(r["periods"]) == {period}
    assert torch.equal(runs[name][0]["final"], runs[name][1]["final"])


def test_periodic_counts_bytes_of_a_ring_allreduce(runs):
    r = runs["h4"][0]
    params = 7  # Linear(6, 1): 6 weights + 1 bias, float64; + 2 float64 statistics
    assert r["state"]["bytes_sent"] == pytest.approx(r["state"]["averagings"] * 2 * 0.5 * (params + 2) * 8)


def test_adaptive_period_grows_as_learners_agree(runs):
    periods = runs["adaptive"][0]["periods"]
    assert periods[0] == 1
    assert periods[-1] >= 8, periods
    state = runs["adaptive"][0]["state"]
    assert state["averagings"] < len(periods) / 3  # far fewer than the 120 of H = 1
    assert periods == runs["adaptive"][1]["periods"]  # the rule sees the same global numbers everywhere


def test_adaptive_resume_continues_the_schedule_exactly(runs):
    for a, b in zip(runs["adaptive"], runs["adaptive_resumed"]):
        assert a["periods"] == b["periods"]
        assert torch.equal(a["final"], b["final"])
        assert a["state"] == b["state"]


def test_ssgd_dp_resume_continues_noise_and_epsilon_exactly(runs):
    for a, b in zip(runs["ssgd_dp"], runs["ssgd_dp_resumed"]):
        assert torch.equal(a["final"], b["final"])
        assert a["epsilon"] == b["epsilon"] > 0
        assert a["state"]["dp"] == b["state"]["dp"]
    assert torch.equal(runs["ssgd_dp"][0]["final"], runs["ssgd_dp"][1]["final"])  # SSGD stays in sync


@pytest.mark.parametrize("name", ["ssgd_dp", "adpsgd_dp"])
def test_dp_epsilon_per_learner_is_the_accountants(runs, name):
    for r in runs[name]:
        q = 1.0 / r["steps"]
        assert r["state"]["dp"]["history"] == [(1.0, q, r["steps"])]
        assert r["epsilon"] == pytest.approx(epsilon_spent([(1.0, q, r["steps"])], DP.delta), rel=1e-12)
