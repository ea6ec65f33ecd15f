"""Refusals, schedules, state, topology numbers and the topology command (no processes spawned)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from asrtrain.cli import cli
from asrtrain.config import DistConfig
from asrtrain.distributed import topology
from asrtrain.distributed.adpsgd import ADPSGD
from asrtrain.distributed.base import Partition
from asrtrain.distributed.gossip import Gossip
from asrtrain.distributed.factory import check_dist_config, make_strategy, parse_slowdown
from asrtrain.distributed.runtime.backend import resolve_backend
from asrtrain.distributed.runtime.launch import run_learners
from asrtrain.errors import AsrError


def test_odd_ring_is_refused_with_one_line():
    with pytest.raises(AsrError, match="even number of learners") as info:
        make_strategy(DistConfig(strategy="adpsgd", learners=3), rank=0, world_size=3)
    assert "\n" not in str(info.value) and "got 3" in str(info.value)
    with pytest.raises(AsrError, match="even number of groups"):
        check_dist_config(DistConfig(strategy="h-adpsgd", learners=6, learners_per_node=2), 6)
    with pytest.raises(AsrError, match="groups of 3"):
        check_dist_config(DistConfig(strategy="h-adpsgd", learners=4, learners_per_node=3), 4)
    with pytest.raises(AsrError, match="even number"):
        check_dist_config(DistConfig(strategy="adpsgd", learners=1), 1)
    with pytest.raises(AsrError, match="single runs one learner"):
        check_dist_config(DistConfig(strategy="single", learners=2), 2)
    check_dist_config(DistConfig(strategy="h-adpsgd", learners=8, learners_per_node=2), 8)


def test_partitions_follow_base_docstring():
    assert make_strategy(DistConfig(strategy="ssgd"), 1, 4).partition() == Partition(0, 1, 1, 4)
    assert make_strategy(DistConfig(strategy="adpsgd"), 3, 4).partition() == Partition(3, 4, 0, 1)
    h = make_strategy(DistConfig(strategy="h-adpsgd", learners_per_node=2), 3, 4)
    assert h.partition() == Partition(1, 2, 1, 2)


def test_slowdown_parsing():
    assert parse_slowdown("1:4,3:2.5", 1) == 4.0 and parse_slowdown("1:4,3:2.5", 3) == 2.5
    assert parse_slowdown("", 0) == 1.0
    with pytest.raises(AsrError, match="rank:factor"):
        parse_slowdown("fast", 0)
    assert make_strategy(DistConfig(strategy="single", slowdown="0:3"), 0, 1).slowdown == 3.0


def _gossip(n, me, schedule):
    params = [torch.zeros(3)]
    return Gossip(params, list(range(n)), me, group=None, schedule=schedule, seed=7)


@pytest.mark.parametrize("schedule", ["fixed", "random"])
def test_schedules_are_bipartite_and_the_stop_lists_agree(schedule):
    n = 8
    gs = [_gossip(n, r, schedule) for r in range(n)]
    for a in range(0, n, 2):
        partners = [gs[a].partner(r) for r in range(200)]
        assert all(p % 2 == 1 for p in partners)  # actives only ever ask passives
        assert set(partners) <= set(gs[a].may_contact())
        for p in gs[a].may_contact():  # every passive a may ask waits for a's STOP
            assert a in gs[p].may_contact_me()
    if schedule == "fixed":
        assert [gs[2].partner(r) for r in range(4)] == [3, 1, 3, 1]
        assert [gs[0].partner(r) for r in range(2)] == [1, 7]
    else:
        counts = np.bincount([gs[0].partner(r) for r in range(400)], minlength=n)[1::2]
        assert counts.min() > 60  # roughly uniform over the 4 passives
        again = _gossip(n, 0, schedule)  # reproducible from (seed, rank, round)
        assert [gs[0].partner(r) for r in range(20)] == [again.partner(r) for r in range(20)]


def test_adpsgd_state_round_trip_before_setup():
    s = ADPSGD(0, 4, "random", seed=5)
    s.load_state_dict({"round": 17, "schedule": "random", "seed": 5})
    assert s.state_dict() == {"round": 17, "schedule": "random", "seed": 5}


def test_backend_resolution():
    assert resolve_backend("gloo") == "gloo"
    if not torch.cuda.is_available():
        assert resolve_backend("auto") == "gloo"
        with pytest.raises(AsrError, match="CUDA is not available"):
            resolve_backend("nccl")


def test_launcher_refuses_a_learner_count_that_contradicts_torchrun(monkeypatch):
    for k, v in dict(RANK="0", WORLD_SIZE="4", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500").items():
        monkeypatch.setenv(k, v)
    with pytest.raises(AsrError, match="WORLD_SIZE=4"):
        run_learners(print, None, learners=2)


def _record(rank, world_size, out):
    out.append((rank, world_size, torch.distributed.get_world_size()))


def test_one_learner_runs_in_this_process_with_a_group_of_one():
    out = []
    run_learners(_record, out, learners=1, backend="gloo", timeout_s=20)
    assert out == [(0, 1, 1)]
    assert not torch.distributed.is_initialized()
    run_learners(_record, out, learners=1, backend="gloo", timeout_s=20)  # the environment is left clean
    assert out == [(0, 1, 1)] * 2


@pytest.mark.parametrize("n", [4, 6, 8, 16, 32])
def test_topology_gaps_match_closed_forms(n):
    fixed = topology.gap_row(n, "fixed").gap
    assert fixed == pytest.approx(math.sin(2 * math.pi / n) ** 2, abs=1e-9)
    assert topology.gap_row(n, "random").gap == pytest.approx(0.5, abs=1e-9)
    assert topology.gap_row(n, "random-ring").gap == pytest.approx(math.sin(math.pi / n) ** 2, abs=1e-9)


def test_mixing_matrices_are_doubly_stochastic_and_two_learners_agree_in_one_round():
    for schedule in topology.SCHEDULES:
        m, _ = topology.schedule_matrix(8, schedule)
        np.testing.assert_allclose(m.sum(0), 1.0)
        np.testing.assert_allclose(m.sum(1), 1.0)
    assert topology.gap_row(2, "fixed").gap == pytest.approx(1.0)
    w = topology.pair_matrix(4, 0, 1)
    np.testing.assert_allclose(w @ np.array([2.0, 4.0, 1.0, 1.0]), [3.0, 3.0, 1.0, 1.0])


def test_topology_command_prints_gap_and_table():
    res = CliRunner().invoke(cli, ["topology", "--learners", "16", "--schedule", "fixed", "--max", "32"])
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[0]
    assert "spectral gap 0.146447" in first
    rows = [ln.split() for ln in res.output.splitlines() if ln.strip()[:2].strip().isdigit()]
    assert [int(r[0]) for r in rows] == [4, 8, 16, 32]
    fixed_gaps = [float(r[1]) for r in rows]
    assert fixed_gaps == sorted(fixed_gaps, reverse=True)  # the ring's gap shrinks as it grows
    odd = CliRunner().invoke(cli, ["topology", "--learners", "5"])
    assert odd.exit_code == 1 and "even number of learners" in odd.output


def test_one_exchange_keeps_the_sum_and_a_step_taken_meanwhile():
    """The averaging arithmetic without threads: both end at the mean, plus their own intervening step."""
    torch.manual_seed(0)
    a, b = _gossip(2, 0, "fixed"), _gossip(2, 1, "fixed")
    a.params[0].copy_(torch.randn(3))
    b.params[0].copy_(torch.randn(3))
    total = a.effective() + b.effective()
    sa, step_a = a._snapshot()
    sb, step_b = b._snapshot()
    with torch.no_grad():
        a.params[0].add_(torch.tensor([0.5, -0.25, 1.0]))  # a gradient step between snapshot and write-back
    a.steps += 1
    a._write_back(sa[:-1], sb[:-1], step_a)
    b._write_back(sb[:-1], sa[:-1], step_b)
    mean = (sa[:-1].double() + sb[:-1].double()) / 2
    torch.testing.assert_close(b.effective(), mean, rtol=0, atol=1e-7)
    torch.testing.assert_close(a.effective(), mean + torch.tensor([0.5, -0.25, 1.0], dtype=torch.float64),
                               rtol=0, atol=1e-7)
    step = torch.tensor([0.5, -0.25, 1.0], dtype=torch.float64)
    torch.testing.assert_close(a.effective() + b.effective(), total + step, rtol=0, atol=1e-6)
    assert a.metrics()["staleness_sum"] == 1 and b.metrics()["staleness_sum"] == 0
    before = a.effective()
    assert a.fold()  # into float32 parameters; the rounding stays in the delta
    assert torch.equal(a.effective(), before)


def test_a_suspended_process_is_told_from_a_busy_one():
    """Heartbeat ticks 0.5 s apart: a late tick on a loaded machine is not a suspension; a gap of minutes
    (Ctrl-Z, SIGSTOP, Slurm's scontrol suspend) is, and PeerWatch then restarts its clocks instead of
    naming its own learner as hung when it resumes (it did, after 17 min stopped, 2026-11-28)."""
    from asrtrain.distributed.runtime.peerwatch import suspended_for

    assert suspended_for(100.0, 100.5, 0.5) == 0.0
    assert suspended_for(100.0, 125.0, 0.5) == 0.0  # 25 s late: a starved thread, not a stop
    assert suspended_for(100.0, 1108.5, 0.5) == pytest.approx(1008.0)
    assert suspended_for(100.0, 150.0, 5.0) == 0.0 and suspended_for(100.0, 160.0, 5.0) == pytest.approx(55.0)
