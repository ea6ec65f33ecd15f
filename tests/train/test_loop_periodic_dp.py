"""The real training loop with --strategy periodic (--period adaptive) and with --dp (ADPSGD and SSGD):
spawned gloo learners on CPU, tiny BLSTM; logs say the period, bytes and epsilon per learner."""

import re

import pytest
import torch

from asrtrain.train.checkpoint import load_checked

from tests.helpers.strategy_runs import data, final, train  # noqa: F401 - the module-scoped feature fixture


@pytest.mark.slow
def test_periodic_adaptive_trains_logs_and_resumes(data, tmp_path):  # noqa: F811
    exp = tmp_path / "periodic"
    opts = ["--strategy", "periodic", "--learners", "2", "--period", "adaptive"]
    r = train(data, exp, ["train.max_frames=600", "train.epochs=3"], *opts, "--stop-after-steps", "5")
    assert r.exit_code == 0, r.output
    r = train(data, exp, ["train.max_frames=600", "train.epochs=3"], *opts, "--resume")
    assert r.exit_code == 0, r.output
    log = (exp / "train.log").read_text()
    assert re.search(r"\[learner 1\] epoch 3 periodic: period \d+, \d+ averagings in \d+ steps", log)
    states = [load_checked(exp / "checkpoints" / f"epoch-0003.rank{k}.pt")["strategy"]
              for k in (0, 1)]
    assert states[0]["rule"] == states[1]["rule"] and states[0]["averagings"] > 0
    assert (exp / "final.pt").is_file()


@pytest.mark.slow
def test_adpsgd_and_ssgd_with_dp_log_epsilon_per_learner(data, tmp_path):  # noqa: F811
    from asrtrain.distributed.dp import epsilon_spent

    sets = ["train.max_frames=800", "dp.epsilon=8", "dp.delta=1e-3", "dp.clip=1.0"]
    for strategy in ("adpsgd", "ssgd"):
        exp = tmp_path / strategy
        opts = ["--strategy", strategy, "--learners", "2", "--dp"]
        if strategy == "ssgd":  # killed after 3 steps and resumed: the accounting goes on from there
            r = train(data, exp, sets, *opts, "--stop-after-steps", "3")
            assert r.exit_code == 0, r.output
            opts.append("--resume")
        r = train(data, exp, sets, *opts)
        assert r.exit_code == 0, r.output
        log = (exp / "train.log").read_text()
        for rank in (0, 1):
            eps = [float(x) for x in re.findall(rf"\[learner {rank}\] epoch \d dp: epsilon ([\d.e+-]+)", log)]
            assert len(eps) == 2 and 0 < eps[0] < eps[1] <= 8.0, (strategy, eps)
        ck = load_checked(exp / "checkpoints" / "epoch-0002.rank1.pt")["strategy"]
        steps, sigma = ck["dp"]["steps"], ck["dp"]["sigma"]
        q = ck["dp"]["history"][0][1]
        assert ck["dp"]["history"] == [(sigma, q, steps)] and steps == round(2 / q)  # every step counted
        assert eps[-1] == pytest.approx(epsilon_spent([(sigma, q, steps)], 1e-3), rel=1e-3)
        assert all(torch.isfinite(t).all() for t in final(exp).values())
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        tb = EventAccumulator(str(exp / "tensorboard" / "rank1")).Reload()
        curve = [e.value for e in tb.Scalars("train/dp_epsilon")]  # TensorBoard shows the same spending
        assert curve and curve == sorted(curve) and 0 < curve[-1] <= eps[-1] + 1e-6, curve


def test_dp_with_a_delta_above_one_over_n_is_refused_in_one_line(data, tmp_path):  # noqa: F811
    r = train(data, tmp_path / "bad", ["dp.noise_multiplier=1.0", "dp.delta=0.1"], "--dp")
    assert r.exit_code != 0
    assert "dp.delta = 0.1 >= 1/n" in r.output
