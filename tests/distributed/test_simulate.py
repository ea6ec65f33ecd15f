"""The epoch simulator: hand-computed cases, the overlap rules, properties, and the command."""

import itertools
import json
import math
import random
from dataclasses import replace

import pytest

from asrtrain.distributed.simreport import blstm_params, published_v100
from asrtrain.distributed.simulate import (Cluster, Link, Plan, Workload, broadcast_s, parse_plan,
                                           ring_allreduce_s, simulate_epoch, sweep)
from asrtrain.errors import AsrError
from tests.cli_helpers import one_error, run

FREE = Link(0.0, 1e30)  # no latency, (practically) infinite bandwidth


def cluster(intra=FREE, inter=FREE, per_node=8, overhead=0.0, fold=0.0, cores=0):
    return Cluster(intra, inter, per_node, overhead, fold, cores)


def work(**kw):
    base = dict(step_s=1.0, batches=64, params=1000, bytes_per_param=4)
    base.update(kw)
    return Workload(**base)


def test_one_learner_is_batches_times_step():
    r = simulate_epoch(Plan("single"), 1, work(step_s=0.5, batches=10), cluster())
    assert r.epoch_s == pytest.approx(5.0) and r.speedup == 1.0 and r.bytes_per_learner == 0.0


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_ssgd_without_communication_cost_speeds_up_n_times(n):
    r = simulate_epoch(Plan("ssgd"), n, work(batches=64), cluster())
    assert r.speedup == pytest.approx(n, rel=1e-12)


def test_ring_allreduce_formula_and_the_pure_bandwidth_case():
    link = Link(0.0, 1000.0)
    assert ring_allreduce_s(2, 4000, link) == pytest.approx(4.0)  # exactly bytes over bandwidth
    assert ring_allreduce_s(4, 4000, Link(0.5, 1000.0)) == pytest.approx(2 * 3 * 0.5 + 2 * 3 / 4 * 4.0)
    assert ring_allreduce_s(1, 4000, link) == 0.0
    assert broadcast_s(4, 4000, Link(0.5, 1000.0)) == pytest.approx(3 * 0.5 + 4.0)


def test_two_learners_zero_latency_by_hand():
    w = work(step_s=1.0, batches=10, params=1000)  # model 4000 bytes
    net = cluster(intra=Link(0.0, 16000.0))  # 0.25 s per model
    ssgd = simulate_epoch(Plan("ssgd"), 2, w, net)
    assert ssgd.epoch_s == pytest.approx(5 * (1.0 + 0.25))  # 5 steps, each compute + M/B
    assert ssgd.bytes_per_learner == pytest.approx(5 * 4000)
    # ADPSGD: 5 steps each; rank 0's round (request + reply, 2 x 4004 B) overlaps its 1 s compute; the
    # epoch ends with a float64 all-reduce of the weights (8000 B over the ring of 2).
    ad = simulate_epoch(Plan("adpsgd"), 2, w, net)
    assert ad.epoch_s == pytest.approx(5 * 1.0 + 8000 / 16000.0)
    assert ad.bytes_per_learner == pytest.approx((2 * 5 * 4004) / 2 + 8000)
    assert ad.staleness == 0.0


def test_a_round_longer_than_the_step_is_waited_for_and_is_one_step_stale():
    w = work(step_s=1.0, batches=10, params=1000)
    net = cluster(intra=Link(0.0, 4004 / 1.5))  # 1.5 s per message, 3 s per exchange
    ad = simulate_epoch(Plan("adpsgd"), 2, w, net)
    assert ad.epoch_s == pytest.approx(5 * 3.0 + 8000 / (4004 / 1.5))
    assert ad.staleness == pytest.approx(1.0)
    dbo = simulate_epoch(Plan("adpsgd", delay_by_one=True), 2, w, net)
    assert dbo.epoch_s <= ad.epoch_s + 1e-9


def test_slow_learner_slows_ssgd_by_its_factor_and_dynamic_adpsgd_less():
    w = work(batches=120, slow_factor=3.0, slow_learners=1)
    base = simulate_epoch(Plan("ssgd"), 4, work(batches=120), cluster()).epoch_s
    assert simulate_epoch(Plan("ssgd"), 4, w, cluster()).epoch_s == pytest.approx(3 * base)
    static = simulate_epoch(Plan("adpsgd"), 4, w, cluster()).epoch_s
    dynamic = simulate_epoch(Plan("adpsgd", balance="dynamic"), 4, w, cluster()).epoch_s
    assert static == pytest.approx(3 * base)  # the fast ones wait for the slow one at the epoch end
    # dynamic: 3 learners at 1 step/s and one at 1/3: 120 / (3 + 1/3) = 36 s, not 90
    assert dynamic == pytest.approx(120 / (3 + 1 / 3), abs=3.0)
    assert dynamic < 0.5 * static


def test_passive_contention_makes_random_partners_queue():
    # Exchanges dominate (4 s against a 0.1 s step): fixed rounds pair every active with its own passive,
    # random ones sometimes send two actives to one passive, which serves them one after the other.
    w = work(step_s=0.1, batches=80, params=1000)
    net = cluster(intra=Link(0.0, 4004 / 2.0))
    fixed = simulate_epoch(Plan("adpsgd", "fixed"), 8, w, net)
    rand = simulate_epoch(Plan("adpsgd", "random"), 8, w, net)
    assert fixed.epoch_s == pytest.approx(10 * 4.0 + 2 * 7 / 8 * 8000 / (4004 / 2.0))
    assert rand.epoch_s >= fixed.epoch_s + 4.0  # at least one exchange spent queueing


def test_hadpsgd_bytes_and_group_step_by_hand():
    # 4 learners in 2 groups of 2 on one node; compute 1 s; group all-reduce and broadcast free of latency
    w = work(step_s=1.0, batches=40, params=1000)
    net = cluster(intra=Link(0.0, 4000.0))  # 1 s per model
    r = simulate_epoch(Plan("h-adpsgd", group_size=2), 4, w, net)
    steps = 40 / 2 / 2  # 20 global batches of 2 learners, shared by 2 groups
    assert r.steps == steps
    # step: compute 1 + all-reduce 2 (1)/2 * 1 = 1, leaders' exchange (2 x 1.001 s) overlaps that, then
    # the broadcast 1 s; the epoch ends with the world all-reduce of float64 weights (2 * 3/4 * 2 s)
    assert r.epoch_s == pytest.approx(steps * (1 + 1 + 0.002 + 1) + 2 * 3 / 4 * 2.0, rel=1e-3)
    per_learner = (2 * steps * 4004 + 2 * steps * (2 * 1 + 1) * 4000) / 4 + 2 * 3 / 4 * 8000
    assert r.bytes_per_learner == pytest.approx(per_learner)


@pytest.mark.parametrize("cores", [0, 2])  # a device each; 4 learners a node sharing 2 cores
def test_more_bandwidth_never_slows_a_run(cores):
    w = work(step_s=0.2, batches=96, params=50_000, spread=0.2)
    for label, n, bw in itertools.product(["ssgd", "adpsgd", "adpsgd-random", "adpsgd-dbo", "h-adpsgd"],
                                          [4, 8, 16], [2e5, 1e6, 5e6]):
        slow = cluster(Link(1e-4, 4 * bw), Link(1e-3, bw), per_node=4, overhead=0.01, fold=0.005, cores=cores)
        fast = cluster(Link(1e-4, 8 * bw), Link(1e-3, 2 * bw), per_node=4, overhead=0.01, fold=0.005,
                       cores=cores)
        plan = parse_plan(label)
        assert simulate_epoch(plan, n, w, fast).epoch_s <= simulate_epoch(plan, n, w, slow).epoch_s + 1e-9, \
            (label, n, bw, cores)


def test_delay_by_one_is_never_slower():
    for spread, bw, n in itertools.product([0.0, 0.3], [2e4, 1e5, 1e6], [2, 4, 8]):
        w = work(step_s=0.1, batches=64, params=2000, spread=spread)
        net = cluster(Link(1e-4, bw), Link(1e-3, bw / 4), per_node=2)
        for schedule in ("fixed", "random"):
            dflt = simulate_epoch(Plan("adpsgd", schedule), n, w, net)
            dbo = simulate_epoch(Plan("adpsgd", schedule, delay_by_one=True), n, w, net)
            assert dbo.epoch_s <= dflt.epoch_s + 1e-9, (spread, bw, n, schedule)


def test_deterministic_with_spread_and_refusals():
    w = work(spread=0.3)
    a = simulate_epoch(Plan("adpsgd", "random"), 8, w, cluster(per_node=2))
    b = simulate_epoch(Plan("adpsgd", "random"), 8, w, cluster(per_node=2))
    assert a == b
    with pytest.raises(AsrError, match="even number of groups"):
        simulate_epoch(Plan("adpsgd"), 6 - 1, w, cluster())
    with pytest.raises(AsrError, match="unknown strategy"):
        parse_plan("sgd")
    assert [r.learners for r in sweep([Plan("adpsgd")], [1, 2, 3, 4], w, cluster())] == [1, 2, 4]


def test_published_scenario_derivation():
    assert blstm_params(1, 2, 3, 0, 4) == 2 * (4 * 2 * (3 + 2) + 16) + 4 * 4 + 4
    w, c = published_v100()
    assert w.params == blstm_params(6, 512, 260, 256, 32000)
    assert w.step_s * w.batches * 16 / 3600 == pytest.approx(40 * 5.2)  # the one-GPU 208 h
    assert c.inter.bandwidth_Bps == 12.5e9 and c.learners_per_node == 8
    assert math.isclose(w.model_bytes, 4 * w.params)


def test_simulate_command(tmp_path):
    png = tmp_path / "speedup.png"
    res = run("simulate", "--learners", "1,2,4,16", "--batches", "2000", "--strategies", "ssgd,h-adpsgd",
              "--plot", png)
    assert res.exit_code == 0, res.output
    assert "predictions" in res.output and "h-adpsgd" in res.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "unknown strategy" in one_error(run("simulate", "--strategies", "hogwild"))
    # CPU learners sharing 2 cores: SSGD on 4 learners is no faster than on 2
    res = run("simulate", "--learners", "2,4", "--strategies", "ssgd", "--step-s", "0.1", "--batches", "400",
              "--params", "1000", "--learners-per-node", "4", "--cores-per-node", "2", "--intra-gbps", "1000",
              "--intra-latency-us", "0")
    assert res.exit_code == 0, res.output
    assert "2 shared cores/node" in res.output
    speedups = [float(line.split()[3]) for line in res.output.splitlines() if line.startswith("ssgd ")]
    assert speedups == pytest.approx([2.0, 2.0], rel=1e-3), res.output
    # ... and gossip exchanges that take CPU from those cores make ADPSGD slower than free ones
    args = ["simulate", "--learners", "4", "--strategies", "adpsgd", "--step-s", "0.1", "--batches", "400",
            "--params", "1000", "--learners-per-node", "4", "--cores-per-node", "2", "--intra-gbps", "1000",
            "--intra-latency-us", "0"]
    rows = [next(line.split() for line in run(*a).output.splitlines() if line.startswith("adpsgd "))
            for a in (args, args + ["--exchange-cpu-ms", "20"])]
    assert float(rows[1][3]) < float(rows[0][3]), rows
    bad = run(*args, "--exchange-cpu-ms", "-1")
    assert bad.exit_code == 2 and "'--exchange-cpu-ms': -1.0 is not in the range" in bad.output


# -- learners sharing the cores of one machine (processor sharing) ------------------------------------

def shared(cores, per_node=8, link=FREE):
    return Cluster(link, link, per_node, 0.0, 0.0, cores)


def test_shared_walls_by_hand():
    from asrtrain.distributed.simengine import shared_walls
    assert shared_walls([1.0, 1.0], 2) == [1.0, 1.0]  # a core each
    assert shared_walls([1.0, 1.0, 1.0, 1.0], 2) == pytest.approx([2.0] * 4)  # half a core each
    # 1, 2, 3 core-seconds on 2 cores: all at 2/3 until the first ends at 1.5 s; then two at full speed
    assert shared_walls([1.0, 2.0, 3.0], 2) == pytest.approx([1.5, 2.5, 3.5])
    assert shared_walls([1.0, 2.0, 3.0], 0) == [1.0, 2.0, 3.0]  # a device each


def test_four_learners_on_two_cores_by_hand():
    w = work(step_s=0.1, batches=40)
    # SSGD: 10 steps, every step all four compute at once at half a core: 0.2 s each
    assert simulate_epoch(Plan("ssgd"), 4, w, shared(2)).epoch_s == pytest.approx(10 * 0.2)
    assert simulate_epoch(Plan("ssgd"), 4, w, shared(4)).epoch_s == pytest.approx(10 * 0.1)
    # slow learner (factor 3, a sleep after its compute): 0.2 s shared compute, then 2 x 0.2 s idle
    slow = work(step_s=0.1, batches=40, slow_factor=3.0, slow_learners=1)
    assert simulate_epoch(Plan("ssgd"), 4, slow, shared(2)).epoch_s == pytest.approx(10 * 0.6)
    # ADPSGD, free communication, equal learners: all four compute in phase, 0.2 s a step, 10 steps each
    assert simulate_epoch(Plan("adpsgd"), 4, w, shared(2)).epoch_s == pytest.approx(10 * 0.2)
    # ... with the slow one: while it idles the other three share two cores (2/3 each), so they run ahead
    # of its pace; the epoch (static shares) ends when the slow one has done its 10 steps
    ad = simulate_epoch(Plan("adpsgd"), 4, slow, shared(2)).epoch_s
    assert 10 * 0.3 < ad < 10 * 0.6
    # a device each: the old model, exactly
    assert simulate_epoch(Plan("adpsgd"), 4, slow, shared(0)).epoch_s == pytest.approx(10 * 0.3)


@pytest.mark.parametrize("link", [FREE, Link(1e-3, 4000 / 0.05)])  # free; 50 ms a model
@pytest.mark.parametrize("strategy,per_node", [("ssgd", 0), ("adpsgd", 0), ("h-adpsgd", 2)])
def test_more_cores_never_slower(strategy, per_node, link):
    w = work(step_s=0.1, batches=48, spread=0.3, slow_factor=2.0, slow_learners=1)
    plan = Plan(strategy, group_size=per_node)
    times = [simulate_epoch(plan, 8, w, shared(c, per_node=8, link=link)).epoch_s for c in (1, 2, 4, 8, 0)]
    assert all(a >= b - 1e-9 for a, b in zip(times, times[1:])), times


def test_collectives_share_the_cores_by_hand():
    # A collective's link time assumes a core per process; m processes in it on k < m cores take m / k
    # times as long (each needs a core to copy, reduce and move bytes).
    w = work(step_s=0.1, batches=40, params=1000)  # 4000 bytes
    link = Link(0.0, 60000.0)  # ring all-reduce of 4: 2 x 3/4 x 4000 / 60000 = 0.1 s; the count: 0
    # SSGD, 4 learners, 10 steps: compute 0.1 s and all-reduce 0.1 s on 4 cores (or a device each) ...
    for cores in (4, 0):
        assert simulate_epoch(Plan("ssgd"), 4, w, shared(cores, link=link)).epoch_s == pytest.approx(10 * 0.2)
    # ... and on 2 cores both take twice as long
    assert simulate_epoch(Plan("ssgd"), 4, w, shared(2, link=link)).epoch_s == pytest.approx(10 * 0.4)
    # H-ADPSGD, 2 groups of 2 in phase, 1 s steps, 1 s in-group all-reduce and 1 s broadcast, a 2.002 s
    # exchange (it overlaps the step) and a 3 s world all-reduce of the float64 weights at the end. On 2
    # cores the four learners run every part at half a core: 10 x (2 + 2 + 2) + 2 x 3.
    w, link = work(step_s=1.0, batches=40, params=1000), Link(0.0, 4000.0)
    h = Plan("h-adpsgd", group_size=2)
    assert simulate_epoch(h, 4, w, shared(4, link=link)).epoch_s == pytest.approx(10 * 3.002 + 3)
    assert simulate_epoch(h, 4, w, shared(2, link=link)).epoch_s == pytest.approx(10 * 6 + 6)


def test_slow_learner_sleeps_for_only_the_slowed_part_of_its_step_by_hand():
    # dist.slowdown sleeps (factor - 1) x the wall time from before_step to the end of the backward pass;
    # the rest of the step (norm, optimizer step, fold) is not slept for: slowed_frac of the step is.
    slow = work(step_s=0.1, batches=20, slow_factor=3.0, slow_learners=1, slowed_frac=0.75)
    # a core (or a device) each: a slow step is 0.075 + 2 x 0.075 + 0.025 = 0.25 s, 10 steps each
    for cores in (2, 0):
        assert simulate_epoch(Plan("adpsgd"), 2, slow, shared(cores)).epoch_s == pytest.approx(10 * 0.25)
        assert simulate_epoch(Plan("ssgd"), 2, slow, shared(cores)).epoch_s == pytest.approx(10 * 0.25)
    # one core, one step each: both compute at half a core; the slow one's slowed half (0.05 core-s) ends
    # at 0.1 s, it sleeps 2 x 0.1 s; the fast one finishes alone at 0.15 s; at 0.3 s the slow one computes
    # the rest (0.05) alone: 0.35 s. Sleeping for the whole step (slowed_frac 1) gives 0.2 + 0.4 = 0.6 s.
    one = work(step_s=0.1, batches=2, slow_factor=3.0, slow_learners=1)
    assert simulate_epoch(Plan("adpsgd"), 2, replace(one, slowed_frac=0.5), shared(1)).epoch_s \
        == pytest.approx(0.35)
    assert simulate_epoch(Plan("adpsgd"), 2, one, shared(1)).epoch_s == pytest.approx(0.6)
    with pytest.raises(AsrError, match="slowed_frac"):
        simulate_epoch(Plan("adpsgd"), 2, replace(one, slowed_frac=0.0), shared(1))


def test_gossip_exchanges_take_cpu_on_shared_cores_by_hand():
    # Two learners, one step each of 1 core-second, on 2 shared cores, free links; each exchange side
    # costs 0.5 core-seconds. t=0: the active's first half (0.25) and both computes share 2 cores (2/3
    # each): it ends at 0.375, the computes have 0.75 left. The passive's 0.5 and the computes (2/3 each)
    # end the passive's part at 1.125, computes 0.25 left; then the active's last 0.25 and both computes
    # end together at 1.5. Without the exchange CPU the epoch is the step: 1 s.
    w = work(step_s=1.0, batches=2, params=1)
    on = replace(shared(2), exchange_cpu_s=0.5)
    assert simulate_epoch(Plan("adpsgd"), 2, w, on).epoch_s == pytest.approx(1.5)
    assert simulate_epoch(Plan("adpsgd"), 2, w, shared(2)).epoch_s == pytest.approx(1.0)
    # with a device each the exchange CPU is not charged (GPU learners: exchange_overhead_s is the cost)
    assert simulate_epoch(Plan("adpsgd"), 2, w, replace(shared(0), exchange_cpu_s=0.5)).epoch_s \
        == pytest.approx(1.0)
    # with exchange CPU on the cores, more cores still never make a run slower (8 learners, random
    # partners, so two actives may queue on one passive)
    many = [simulate_epoch(Plan("adpsgd", "random"), 8, work(step_s=0.1, batches=64, params=1),
                           replace(shared(c, per_node=8), exchange_cpu_s=0.01)).epoch_s for c in (1, 2, 4, 8)]
    assert all(a >= b - 1e-9 for a, b in zip(many, many[1:])), many
    with pytest.raises(AsrError, match="exchange_cpu_s"):
        simulate_epoch(Plan("adpsgd"), 2, w, replace(shared(2), exchange_cpu_s=-1.0))


def test_oversubscription_costs_work_by_hand():
    from asrtrain.distributed.simengine import Cpu, Engine, fit_overhead, ps_rate, shared_walls
    # c = 0.5: m > k jobs on k cores each need 1 + 0.5 (m / k - 1) times their work
    assert ps_rate(2, 2, 0.5) == 1.0 and ps_rate(1, 2, 0.5) == 1.0  # not oversubscribed: free
    assert ps_rate(4, 2, 0.5) == pytest.approx(0.5 / 1.5)
    assert ps_rate(8, 2, 0.5) == pytest.approx(0.25 / 2.5) and ps_rate(0, 2, 0.5) == 0.0
    # four jobs of 1 core-second on 2 cores: 3 s each (2 s without the cost); 1, 2, 3 on 2 cores: three
    # at 2/3 / 1.25 until the first ends at 1.875 s; then two at full speed: 2.875 and 3.875 s
    assert shared_walls([1.0] * 4, 2, 0.5) == pytest.approx([3.0] * 4)
    assert shared_walls([1.0, 2.0, 3.0], 2, 0.5) == pytest.approx([1.875, 2.875, 3.875])
    # the event-driven Cpu agrees with the closed form, on any works
    for works in ([1.0, 2.0, 3.0], [0.3, 0.3, 0.9, 1.7, 0.1], [2.0] * 8):
        eng, ends = Engine(), {}
        cpu = Cpu(eng, 2, 0.5)
        for i, x in enumerate(works):
            cpu.run(x).then(lambda i=i: ends.setdefault(i, eng.now))
        eng.run()
        assert [ends[i] for i in range(len(works))] == pytest.approx(shared_walls(works, 2, 0.5))
    # the fit recovers c from exact slow-downs and from none (c = 0), and clips a speed-up at 0
    assert fit_overhead([(1.0, 1.0), (2.0, 1.3), (4.0, 1.9)]) == pytest.approx(0.3)
    assert fit_overhead([(1.0, 1.0), (2.0, 1.0)]) == 0.0 and fit_overhead([(2.0, 0.9)]) == 0.0
    assert fit_overhead([(1.0, 1.0)]) == 0.0


def test_step_walls_and_shared_step_by_hand():
    from asrtrain.distributed.simengine import Cpu, Engine, shared_step, step_walls
    # two steps of 1 core-second, each with 0.5 of other threads beside it, on 2 cores: four jobs at half
    # a core; the side jobs end at 1 s, then the computes alone at full speed end at 1.5 s
    assert step_walls([1.0, 1.0], 0.5, 2) == pytest.approx([1.5, 1.5])
    assert step_walls([1.0, 2.0, 3.0], 0.0, 2) == pytest.approx([1.5, 2.5, 3.5])  # shared_walls
    assert step_walls([0.2, 0.2], 1.0, 4) == pytest.approx([1.0, 1.0])  # a core each: the side job's end

    def ends(*steps):
        eng, out = Engine(), {}
        cpu = Cpu(eng, 2)
        for i, kw in enumerate(steps):
            eng.spawn(shared_step(eng, cpu, **kw)).then(lambda i=i: out.setdefault(i, eng.now))
        eng.run()
        return [out[i] for i in range(len(steps))]
    # the event-driven step agrees with step_walls; a wait of 0.5 s comes after the cores
    assert ends(dict(work=1.0, side_s=0.5), dict(work=1.0, side_s=0.5)) == pytest.approx([1.5, 1.5])
    assert ends(dict(work=1.0, wait_s=0.5)) == pytest.approx([1.5])
    # a 3x-slow learner that sleeps for the whole step: 1 s of work and 0.5 s of wait, then 2 x 1.5 s asleep
    assert ends(dict(work=1.0, wait_s=0.5, slow_factor=3.0)) == pytest.approx([4.5])
    # half of it slowed: 0.5 s of work, 1 s asleep, then the other 0.5 s
    assert ends(dict(work=1.0, slow_factor=3.0, slowed_frac=0.5)) == pytest.approx([2.0])


def test_oversubscription_in_the_strategies_by_hand():
    w = work(step_s=0.1, batches=40)
    costly = replace(shared(2), oversub_overhead=0.5)
    # SSGD, 4 learners on 2 cores, 10 steps: 0.2 s each free, 0.3 s with c = 0.5; on 4 cores no cost
    assert simulate_epoch(Plan("ssgd"), 4, w, costly).epoch_s == pytest.approx(10 * 0.3)
    assert simulate_epoch(Plan("ssgd"), 4, w, replace(shared(4), oversub_overhead=0.5)).epoch_s \
        == pytest.approx(10 * 0.1)
    # the collectives too: 4 processes on 2 cores take 2 x 1.5 times the link time (see above)
    link = Link(0.0, 60000.0)
    assert simulate_epoch(Plan("ssgd"), 4, w, replace(shared(2, link=link), oversub_overhead=0.5)).epoch_s \
        == pytest.approx(10 * 0.6)
    # ADPSGD, equal learners in phase, free links: 0.3 s a step as well
    assert simulate_epoch(Plan("adpsgd"), 4, w, costly).epoch_s == pytest.approx(10 * 0.3)
    # c = 0 is the model without it, exactly; a cost never makes a run faster; negative c is refused
    slow = work(step_s=0.1, batches=48, spread=0.3, slow_factor=3.0, slow_learners=1, slowed_frac=0.7)
    for plan in (Plan("ssgd"), Plan("adpsgd", "random"), Plan("h-adpsgd", group_size=2)):
        c = replace(shared(2), exchange_cpu_s=0.01)
        base = simulate_epoch(plan, 8, slow, c)
        assert simulate_epoch(plan, 8, slow, replace(c, oversub_overhead=0.0)) == base
        times = [simulate_epoch(plan, 8, slow, replace(c, oversub_overhead=x)).epoch_s for x in (0.1, 0.5)]
        times = [base.epoch_s] + times
        assert times[0] <= times[1] <= times[2], (plan, times)
    with pytest.raises(AsrError, match="oversub_overhead"):
        simulate_epoch(Plan("ssgd"), 4, w, replace(shared(2), oversub_overhead=-0.1))


def test_simulate_command_oversubscription():
    args = ["simulate", "--learners", "4", "--strategies", "ssgd", "--step-s", "0.1", "--batches", "400",
            "--params", "1000", "--learners-per-node", "4", "--cores-per-node", "2", "--intra-gbps", "1000",
            "--intra-latency-us", "0"]
    rows = [next(line.split() for line in run(*a).output.splitlines() if line.startswith("ssgd "))
            for a in (args, args + ["--oversub-overhead", "0.5"])]
    assert [float(r[3]) for r in rows] == pytest.approx([2.0, 2.0 / 1.5], abs=0.006), rows  # 2 decimals
    bad = run(*args, "--oversub-overhead", "-1")
    assert bad.exit_code == 2 and "'--oversub-overhead': -1.0 is not in the range" in bad.output


def test_other_threads_and_waits_in_a_step_by_hand():
    # One step each on 2 cores, free links: the training threads' 1 core-second and the other threads'
    # 0.5 (side_s), four jobs at half a core: the side jobs end at 1 s, the computes alone at 1.5 s
    w = work(step_s=1.0, batches=2, params=1, side_s=0.5)
    for plan in (Plan("ssgd"), Plan("adpsgd")):
        assert simulate_epoch(plan, 2, w, shared(2)).epoch_s == pytest.approx(1.5)
        assert simulate_epoch(plan, 2, w, shared(0)).epoch_s == pytest.approx(1.0)  # a device each: host
        # threads are not on the learners' cores
    # a wait of 0.5 s off the cores: a core each, every step 1.5 s; a 3x-slow learner sleeps for twice the
    # compute and the wait (slowed_frac 1): 4.5 s
    waiting = work(step_s=1.0, batches=4, params=1, wait_s=0.5)
    slow = replace(waiting, slow_factor=3.0, slow_learners=1)
    for plan in (Plan("ssgd"), Plan("adpsgd")):
        assert simulate_epoch(plan, 2, waiting, shared(2)).epoch_s == pytest.approx(2 * 1.5)
        assert simulate_epoch(plan, 2, slow, shared(2)).epoch_s == pytest.approx(2 * 4.5)
    # on one core two equal ADPSGD learners stay in phase: each step they compute at half a core (2 s),
    # then both wait and the core idles: 2 x 2.5 s
    assert simulate_epoch(Plan("adpsgd"), 2, waiting, shared(1)).epoch_s == pytest.approx(2 * 2.5)
    # both 0: the model without them, exactly; negative values are refused
    base = work(step_s=0.1, batches=48, spread=0.3, slow_factor=3.0, slow_learners=1, slowed_frac=0.7)
    for plan in (Plan("ssgd"), Plan("adpsgd", "random"), Plan("h-adpsgd", group_size=2)):
        c = replace(shared(2), exchange_cpu_s=0.01)
        zero = replace(base, side_s=0.0, wait_s=0.0)
        assert simulate_epoch(plan, 8, zero, c) == simulate_epoch(plan, 8, base, c)
    with pytest.raises(AsrError, match="side_s and wait_s"):
        simulate_epoch(Plan("ssgd"), 2, replace(w, wait_s=-1.0), shared(2))


def test_simulate_refuses_a_strategy_with_no_count_it_can_run():
    """adpsgd on 3 learners only used to print an empty table with rc 0; topology refuses 3 too."""
    err = one_error(run("simulate", "--learners", "3", "--strategies", "adpsgd", "--batches", "400"))
    assert "--strategies adpsgd --learners 3: adpsgd needs an even number of groups" in err, err
    assert "(fix: give learner counts it can run on" in err


def test_simulate_names_the_counts_a_strategy_skipped():
    res = run("simulate", "--learners", "1,3,4", "--strategies", "ssgd,adpsgd", "--batches", "400",
              "--step-s", "0.1", "--params", "1000")
    assert res.exit_code == 0, res.output
    rows = [ln.split()[:2] for ln in res.output.splitlines() if ln.startswith(("ssgd ", "adpsgd "))]
    assert rows == [["ssgd", "1"], ["ssgd", "3"], ["ssgd", "4"], ["adpsgd", "1"], ["adpsgd", "4"]], rows
    assert "# not simulated: adpsgd on 3 learners" in res.output


def test_simulate_max_learners_has_help():
    res = run("simulate", "--help")
    assert "--max-learners INTEGER Largest learner count of the default" in " ".join(res.output.split())


# -- review fixes (2026-11-28) ------------------------------------------------------------------------

def test_hadpsgd_group_straddling_two_nodes_pays_the_inter_node_link_by_hand():
    # 12 learners, 8 a node: groups of 6 (at most n / 2), so group 1 is ranks 6-11 on nodes 0 and 1. Its
    # every-step all-reduce and broadcast cross the inter-node link; group 0's stay inside node 0. (They used
    # to take group 0's link for every group: free here.)
    w = work(step_s=1.0, batches=120, params=1000)  # 4000 bytes; 20 global batches, 10 steps a group
    net = cluster(intra=FREE, inter=Link(0.0, 4000.0), per_node=8)  # 1 s per model between nodes
    r = simulate_epoch(Plan("h-adpsgd"), 12, w, net)
    group1_step = 1.0 + 2 * 5 / 6 * 1.0 + 1.0  # compute, ring all-reduce of 6, broadcast
    world = 2 * 11 / 12 * 8000 / 4000.0  # the epoch-end all-reduce of the float64 weights spans both nodes
    assert r.epoch_s == pytest.approx(10 * group1_step + world)


def test_a_transfer_takes_its_nics_when_it_is_ready_by_hand():
    # 6 learners, 2 a node (n0: 0 active, 1 passive; n1: 2, 3; n2: 4, 5), random partners (seed 6): round 0
    # 0->1, 2->1, 4->1; round 1 0->3, 2->3, 4->3. A message between nodes takes 1 s, inside a node 0;
    # 0.3 s of snapshot and averaging a side (the active's half before its request, half after the reply);
    # steps 2.3 s, the last two ranks 1.9x slower (4.37 s).
    w = work(step_s=2.3, batches=12, params=1000, seed=6, slow_factor=1.9, slow_learners=2)
    net = cluster(intra=FREE, inter=Link(0.0, 4004.0), per_node=2, overhead=0.3)
    # Round 0: 2's request crosses n1->n0 0.15-1.15, 4's n2->n0 1.15-2.15 (n0's incoming NIC is busy); the
    # passive answers 2 (n0->n1 1.45-2.45), then 4 from 2.75. At 2.45 active 0 is ready with its round-1
    # request n0->n1: it takes n0's free outgoing NIC, 2.45-3.45, and the reply to 4 follows, 3.45-4.45
    # (write-back: 4.6). Booking the reply when 4's request arrived (2.15) used to hold n0's NIC idle
    # from 2.45 to 2.75 and push active 0's request behind it. Rank 4 then steps 4.6-8.97 (its round 1
    # overlaps).
    r = simulate_epoch(Plan("adpsgd", "random"), 6, w, net)
    assert r.epoch_s == pytest.approx(4.6 + 4.37 + 2 * 5 / 6 * 8000 / 4004.0)


def test_exchange_overhead_is_paid_once_a_side_by_hand():
    # 2 learners, free links, 0.1 s steps, 0.4 s of snapshot and averaging a side: a round is the active's
    # 0.2 + the passive's 0.4 + the active's 0.2 = 0.8 s (the active used to pay 0.4 twice: 1.2 s), waited
    # for at the end of each of the 5 steps
    w = work(step_s=0.1, batches=10, params=1000)
    r = simulate_epoch(Plan("adpsgd"), 2, w, cluster(overhead=0.4))
    assert r.epoch_s == pytest.approx(5 * 0.8) and r.staleness == pytest.approx(1.0)
    # the same on 4 shared cores with 0.1 core-s of exchange CPU a side (0.05 + 0.1 + 0.05 s: no core is
    # short, the two steps and one exchange job at most run at once): 1.0 s a round
    on = replace(cluster(overhead=0.4, cores=4), exchange_cpu_s=0.1)
    assert simulate_epoch(Plan("adpsgd"), 2, w, on).epoch_s == pytest.approx(5 * 1.0)


def test_simulate_command_units_and_machine_readable_output_by_hand():
    # two learners, no latency, 16,000 B/s: a 4,000-byte model's all-reduce of two takes exactly 0.25 s, so
    # SSGD's 5 steps of 1 s take 5 x 1.25 s, whether the link is inside a node (GB/s) or between (Gbit/s)
    common = ["simulate", "--learners", "1,2", "--strategies", "ssgd", "--step-s", "1", "--batches", "10",
              "--params", "1000", "--epochs", "36"]
    for link in (["--intra-gbps", "1.6e-5", "--intra-latency-us", "0"],
                 ["--learners-per-node", "1", "--inter-gbit", "1.28e-4", "--inter-latency-us", "0"]):
        res = run(*common, *link, "--format", "json")
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        two = out["results"][1]
        assert two["epoch_s"] == pytest.approx(6.25) and two["hours"] == pytest.approx(36 * 6.25 / 3600)
        assert two["bytes_per_learner"] == pytest.approx(5 * 4000) and out["one_learner_epoch_s"] == 10.0
    tsv = run(*common, "--format", "tsv")
    assert tsv.exit_code == 0, tsv.output
    rows = [line.split("\t") for line in tsv.stdout.splitlines()]
    assert rows[0] == ["strategy", "learners", "epoch_s", "speedup", "bytes_per_learner", "staleness",
                       "steps", "hours"]
    assert [r[:2] for r in rows[1:]] == [["ssgd", "1"], ["ssgd", "2"]] and float(rows[2][2]) > 0
    assert "predictions" in tsv.stderr and "predictions" not in tsv.stdout  # notes off the data
    table = run(*common)
    row = next(ln.split() for ln in table.output.splitlines() if ln.startswith("ssgd ") and " 2 " in ln)
    assert float(row[6]) == pytest.approx(36 * float(row[2]) / 3600, abs=0.01)  # the hours column


@pytest.mark.parametrize("args,fragment", [
    (["--strategies", ","], "--strategies ',' names no strategy"),
    (["--learners", ","], "--learners ',' names no learner count"),
    (["--slow-factor", "0.5", "--slow-learners", "1"], "--slow-factor 0.5 must be >= 1"),
    (["--exchange-cpu-ms", "5"], "--exchange-cpu-ms applies only to CPU learners"),
    (["--oversub-overhead", "0.5"], "--oversub-overhead applies only to CPU learners"),
    (["--plot", "/dev/null/speedup.png"], "--plot /dev/null/speedup.png: cannot write in /dev/null"),
])
def test_simulate_refuses_options_it_would_ignore_or_misread(args, fragment):
    err = one_error(run("simulate", "--learners", "2", "--batches", "40", *args))
    assert fragment in err and "(fix: " in err, err


def test_simulate_sorts_learner_counts_and_names_why_a_count_was_skipped():
    res = run("simulate", "--learners", "4,2,2,1", "--strategies", "ssgd,ssgd,single", "--batches", "40",
              "--step-s", "0.1", "--params", "1000", "--slow-learners", "2", "--slow-factor", "3")
    assert res.exit_code == 0, res.output
    rows = [ln.split()[:2] for ln in res.output.splitlines() if ln.startswith(("ssgd ", "single "))]
    assert rows == [["ssgd", "1"], ["ssgd", "2"], ["ssgd", "4"], ["single", "1"]], rows
    assert "# not simulated: single on 2, 4 learners: strategy single runs on one learner" in res.output
    assert "# slow learners: the last 2 step 3x slower where a normal learner remains (none on 2" \
        in res.output


def test_a_slow_factor_below_one_is_refused():
    with pytest.raises(AsrError, match="slow_factor must be >= 1"):
        simulate_epoch(Plan("adpsgd"), 2, work(slow_factor=0.5, slow_learners=1), cluster())


def test_more_bandwidth_or_less_latency_never_slows_a_run_without_queues_random_cases():
    # Random clusters and workloads: SSGD, and gossip between two groups (one active, one passive: no queue
    # whose order a faster link could change). With more actives, the passives' and NICs' first-come,
    # first-served queues can reorder and a faster link can slow a small run, an anomaly of any such queue
    # (adpsgd-dbo, 6 learners, 3 a node, spread 0.3, seed 25: 8.59 s -> 8.80 s with twice the intra-node
    # bandwidth; adpsgd-random, 12 learners, 4 a node, seed 22, exchanges 13x a step: 65.8 s -> 71.6 s with
    # 4x), so that is not checked here; at the published cluster's scale the sweep is monotone.
    rng = random.Random(13)
    for _ in range(60):
        label = rng.choice(["ssgd", "adpsgd", "adpsgd-dbo", "h-adpsgd", "h-adpsgd-dbo"])
        per = rng.choice([1, 2, 4])
        n = rng.choice([2, 4, 8]) if label == "ssgd" else (2 if label.startswith("adpsgd") else 2 * per)
        w = work(step_s=rng.choice([0.1, 0.5]), batches=n * rng.randint(1, 8), spread=rng.choice([0.0, 0.3]),
                 slow_factor=rng.choice([1.0, 2.5]), slow_learners=rng.choice([0, 1]),
                 seed=rng.randint(1, 99))
        bw, lat = rng.choice([2e3, 2e4, 2e5]), rng.choice([0.0, 1e-3])
        net = cluster(Link(lat, 4 * bw), Link(10 * lat, bw), per_node=per, overhead=rng.choice([0.0, 0.05]),
                      fold=rng.choice([0.0, 0.01]))
        k = rng.choice([1.1, 2.0, 10.0])
        faster = [replace(net, inter=Link(net.inter.latency_s, k * bw)),
                  replace(net, intra=Link(net.intra.latency_s, 4 * k * bw)),
                  replace(net, intra=Link(lat / k, 4 * bw), inter=Link(10 * lat / k, bw))]
        plan = replace(parse_plan(label), group_size=per)  # h-adpsgd: two groups of `per`
        base = simulate_epoch(plan, n, w, net).epoch_s
        for fast in faster:
            assert simulate_epoch(plan, n, w, fast).epoch_s <= base + 1e-9, (label, n, per, w, net, fast)
