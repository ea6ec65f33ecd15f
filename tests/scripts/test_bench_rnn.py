"""scripts/bench_rnn.py runs on the recipe's model (its conv front-end included) at a tiny size and
prints its ratio line; it once died on a shape error because it stacked frames where the model has a
conv front-end."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_rnn_runs_on_the_recipe_model():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_rnn.py"), "--utts", "3", "--frames", "40",
                        "--rounds", "1", "--steps", "1", "--threads", "1"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert re.search(r"^rnn_padded_over_packed: \d+\.\d\d$", r.stdout, re.M), r.stdout
