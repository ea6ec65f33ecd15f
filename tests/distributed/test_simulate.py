"""The epoch simulator: hand-computed cases, the overlap rules and properties (shared cores:
test_simulate_cores.py; the command: test_simulate_cli.py)."""

import itertools
import math
import random
from dataclasses import replace

import pytest

from asrtrain.simulate.report import blstm_params, published_v100
from asrtrain.simulate.model import Link, Plan, broadcast_s, ring_allreduce_s
from asrtrain.simulate.epoch import parse_plan, simulate_epoch, sweep
from asrtrain.errors import AsrError
from tests.helpers.simcases import FREE, cluster, work


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
