"""scripts/interrupt_loop.py, the evidence behind the Ctrl-C claim, runs: one calibration run and two
interrupts of a one-learner training, each ending in one of the known outcomes, counted in its summary."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two tiny trainings and their interrupts, in subprocesses
def test_two_interrupts_are_counted(tmp_path):
    out = tmp_path / "summary.json"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "interrupt_loop.py"), "--trials", "2", "--seed", "3",
                        "--work", str(tmp_path), "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(out.read_text())
    c = summary["counts"]
    assert sum(c.values()) == 2 and summary["interrupts"] == 2 - c["after_exit"]
    assert c["one_line"] + c["finished"] + c["after_exit"] == 2, summary["bad"]
    assert summary["code"] and len(summary["calibration_runs_s"]) == 3
