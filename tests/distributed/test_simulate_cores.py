"""The epoch simulator with learners sharing the cores of one machine (processor sharing), by hand."""

from dataclasses import replace

import pytest

from asrtrain.simulate.model import Link, Plan
from asrtrain.simulate.epoch import simulate_epoch
from asrtrain.errors import AsrError
from tests.helpers.simcases import FREE, shared, work


def test_shared_walls_by_hand():
    from asrtrain.simulate.engine import shared_walls
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
    from asrtrain.simulate.engine import Cpu, Engine, fit_overhead, ps_rate, shared_walls
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
    from asrtrain.simulate.engine import Cpu, Engine, shared_step, step_walls
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
