"""The GPU tests' bodies (tests/helpers/collective_checks.py) over gloo on the CPU, where they run in CI:
SSGD, ADPSGD and H-ADPSGD with a nonzero learning rate against single-learner references, and the same
checks shown to fail when DDP's gradient all-reduce is made wrong (a mean for the sum; H-ADPSGD's group
reduce over the whole job). Four learners run every job one after the other (spawning costs seconds)."""

from __future__ import annotations

import pytest

from tests.helpers import collective_checks as cc
from tests.helpers import dist_toyloop as toyloop

pytestmark = pytest.mark.slow  # spawned learners


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    from asrtrain.distributed.runtime.launch import run_learners

    tmp = tmp_path_factory.mktemp("collectives")
    out = {"ssgd": cc.ssgd_job(tmp / "ssgd", 4, "cpu"),
           "ssgd-mean": cc.ssgd_job(tmp / "ssgd-mean", 4, "cpu", break_reduce="mean"),
           "adpsgd": cc.adpsgd_job(tmp / "adpsgd", 4, "cpu"),
           "hadpsgd": cc.hadpsgd_job(tmp / "hadpsgd", "cpu"),
           "hadpsgd-mean": cc.hadpsgd_job(tmp / "hadpsgd-mean", "cpu", break_reduce="mean"),
           "hadpsgd-world": cc.hadpsgd_job(tmp / "hadpsgd-world", "cpu", break_reduce="world")}
    run_learners(toyloop.train, list(out.values()), learners=4, backend="gloo", timeout_s=120)
    return out


def test_ssgd_gradients_and_weights_equal_one_learner_on_the_global_batch(jobs):
    cc.check_ssgd(jobs["ssgd"])


def test_adpsgd_broadcasts_the_initial_weights_and_conserves_the_sum_while_learning(jobs):
    cc.check_adpsgd(jobs["adpsgd"])


def test_hadpsgd_group_gradient_is_the_groups_and_the_sum_is_conserved_while_learning(jobs):
    cc.check_hadpsgd(jobs["hadpsgd"])


@pytest.mark.parametrize("name,check", [("ssgd-mean", cc.check_ssgd), ("hadpsgd-mean", cc.check_hadpsgd),
                                        ("hadpsgd-world", cc.check_hadpsgd)])
def test_the_checks_fail_with_a_wrong_all_reduce(jobs, name, check):
    with pytest.raises(AssertionError, match="reduced gradient"):
        check(jobs[name])
