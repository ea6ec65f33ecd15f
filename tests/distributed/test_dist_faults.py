"""kill -9 of one learner: the others stop within the timeout, with an error naming the dead rank."""

from __future__ import annotations

import re

import pytest

from tests.helpers import dist_toyloop as toyloop
from asrtrain.config import DistConfig
from asrtrain.distributed.runtime.launch import run_learners
from asrtrain.errors import AsrError

pytestmark = pytest.mark.slow  # spawned learners, killed and hung on purpose

# A silent peer is declared dead after TIMEOUT_S / 2: 20 missed heartbeats (0.5 s apart), so a learner
# starved of CPU on a loaded machine is not mistaken for a dead one.
TIMEOUT_S = 20.0


@pytest.mark.parametrize("strategy", ["adpsgd", "ssgd"])
def test_kill_9_of_one_learner_names_it_everywhere(tmp_path, capfd, strategy):
    job = toyloop.ToyArgs(str(tmp_path), DistConfig(strategy=strategy, learners=4, averaging="random",
                                                    delay_by_one=True, timeout_s=TIMEOUT_S),
                          num_batches=4 * 200, batch=2, sleep_s=0.05, kill_rank=1, kill_at_step=3)
    with pytest.raises(AsrError, match=r"learner rank 1 died \(killed by signal SIGKILL\)"):
        run_learners(toyloop.train, [job], learners=4, backend="gloo", timeout_s=TIMEOUT_S)
    err = capfd.readouterr().err
    # the parent's error (raised above) is the job's one line: no survivor prints its own, each logs the cause
    assert not [ln for ln in err.splitlines() if ln.startswith("asrtrain: error:")], err[-2000:]
    for rank in (0, 2, 3):
        lines = [ln for ln in err.splitlines() if f" ERROR rank{rank} " in ln]
        assert lines and re.search(r"\brank 1\b", lines[0].split(": ", 1)[1]), err[-2000:]
    assert not (tmp_path / "rank0.pt").exists()


def test_a_hung_learner_is_named_not_the_messenger(tmp_path, capfd, monkeypatch):
    """SIGSTOP: the learner's heartbeat stops but it never exits. The survivors name it, the parent
    reports the survivors' verdict (not "rank 0 failed") and ends the stopped process."""
    import signal

    from asrtrain.distributed.runtime import launch

    monkeypatch.setattr(launch, "LEFTOVER_KILL_S", 5.0)
    job = toyloop.ToyArgs(str(tmp_path), DistConfig(strategy="adpsgd", learners=2, timeout_s=TIMEOUT_S),
                          num_batches=2 * 200, batch=2, sleep_s=0.05, kill_rank=1, kill_at_step=3,
                          kill_signal=int(signal.SIGSTOP))
    with pytest.raises(AsrError, match=r"learner rank 1 stopped responding") as info:
        run_learners(toyloop.train, [job], learners=2, backend="gloo", timeout_s=TIMEOUT_S)
    assert "rank 0" not in str(info.value)


def test_a_stuck_main_thread_is_named_while_its_heartbeat_goes_on(tmp_path):
    """Rank 1's main thread sleeps (a deadlocked reader, say) but its heartbeat thread runs: rank 0, waiting
    in the all-reduce, is not blamed; rank 1 is, as the one that made no progress."""
    job = toyloop.ToyArgs(str(tmp_path), DistConfig(strategy="ssgd", learners=2, timeout_s=TIMEOUT_S),
                          num_batches=200, batch=2, kill_rank=1, kill_at_step=3, kill_signal=0)
    with pytest.raises(AsrError, match=r"learner rank 1 made no progress") as info:
        run_learners(toyloop.train, [job], learners=2, backend="gloo", timeout_s=TIMEOUT_S, hang_after=8.0)
    assert "rank 0" not in str(info.value)


def test_hang_verdicts():
    from asrtrain.distributed.runtime.beacon import Beacon, find_hung

    now = 1000.0
    assert find_hung({0: Beacon(5, now - 1, False), 1: Beacon(5, now - 2, True)}, now, 10) is None
    assert find_hung({0: Beacon(0, 0.0, False), 1: Beacon(3, now - 1, False)}, now, 10) is None  # 0 never reports
    # both stalled: the one not waiting in communication is blamed, even if it stalled later
    assert find_hung({0: Beacon(5, now - 30, True), 1: Beacon(5, now - 20, False)}, now, 10) == 1
    # all waiting (or all not): the earliest to stall
    assert find_hung({0: Beacon(5, now - 20, True), 1: Beacon(5, now - 30, True)}, now, 10) == 1
    p = Beacon(7, 12.5, True)
    assert Beacon.decode(p.encode(3).encode()) == p and Beacon.decode(b"done") is None
