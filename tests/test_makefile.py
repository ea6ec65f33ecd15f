"""The Makefile's free-space check: one line naming the directory and the fix, before pip starts."""

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # make in a subprocess

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_check_space_stops_with_one_line_and_passes_when_asked_for_none():
    big = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "check-space",
                          "MIN_FREE_GB=100000000"], capture_output=True, text=True)
    assert big.returncode != 0
    line = [x for x in big.stderr.splitlines() if x.startswith("make: /")]
    assert len(line) == 1 and "GB free" in line[0] and "MIN_FREE_GB=0" in line[0], big.stderr
    none = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "check-space", "MIN_FREE_GB=0"],
                          capture_output=True, text=True)
    assert none.returncode == 0 and none.stderr == "", none.stderr
