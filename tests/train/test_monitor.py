"""The learner's log windows: rates, CPU seconds, and which learners log."""

import logging
import re
from types import SimpleNamespace

from asrtrain.train.monitor import Monitor


def _burn(n: int = 200_000) -> int:
    return sum(i * i for i in range(n))


def _window(tmp_path, rank, metrics, caplog):
    strategy = SimpleNamespace(rank=rank, is_main=rank == 0)
    mon = Monitor(tmp_path / f"exp{rank}", strategy, log_every=2, total_steps=4)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="asrtrain.train"):
        for step in (1, 2):
            _burn()
            mon.step(SimpleNamespace(step=step, epoch=0), loss=1.0, lr=0.1, frames=100, compute_s=0.01,
                     metrics=lambda: dict(metrics))
    return [r.getMessage() for r in caplog.records if "epoch 1 step" in r.getMessage()]


def test_window_logs_process_and_training_thread_cpu(tmp_path, caplog):
    lines = _window(tmp_path, 0, {}, caplog)
    assert len(lines) == 1, lines
    kv = dict(item.split("=", 1) for item in lines[0].split("step 2/4 ")[1].split())
    # the work above ran on this thread: both counters saw it, and the process saw at least as much
    assert float(kv["main_cpu_s"]) > 0 and float(kv["cpu_s"]) >= float(kv["main_cpu_s"]) * 0.99
    assert re.search(r"steps_per_s=\S+ audio_s_per_s=\S+", lines[0])


def test_other_learners_log_only_with_strategy_metrics(tmp_path, caplog):
    assert _window(tmp_path, 1, {}, caplog) == []
    lines = _window(tmp_path, 1, {"exchanges": 2.0}, caplog)
    assert len(lines) == 1 and "exchanges=2" in lines[0]
