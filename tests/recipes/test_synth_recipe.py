"""One small end-to-end run of recipes/synth/run.sh: every stage, markers, and the WER table."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "recipes" / "synth" / "run.sh"
WER_LINE = re.compile(r"^%WER (\d+\.\d) \| (\d+) (\d+) \| (\d+\.\d) (\d+\.\d) (\d+\.\d) (\d+\.\d) (\d+\.\d) (\d+\.\d) \| (\S+)$")


def run(work, *args):
    env = dict(os.environ, ASRTRAIN=f"{sys.executable} -m asrtrain", OMP_NUM_THREADS="1")
    return subprocess.run(["bash", str(RUN), "--work", str(work), *args], env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow
def test_synth_recipe_end_to_end(tmp_path):
    small = ["--hours", "0.04", "--set", "train.epochs=2", "--set", "model.num_layers=1",
             "--set", "model.hidden=32", "--set", "train.warmup_steps=5"]
    # stage 0 only: the corpus and nothing else
    r = run(tmp_path, "--stop-stage", "0", *small)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "data" / ".stage.done").is_file() and not (tmp_path / "dump").exists()
    # the rest
    r = run(tmp_path, "--stage", "1", *small)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [l for l in r.stdout.splitlines() if l.startswith("%WER")]
    assert len(lines) == 2, r.stdout
    m = WER_LINE.match(lines[-1])
    assert m and m.group(10) == "test", lines[-1]
    n_test = len((tmp_path / "data" / "test" / "text").read_text().splitlines())
    assert int(m.group(2)) == n_test
    for f in ["exp/blstm/final.pt", "exp/blstm/curves.png", "exp/blstm/decode_test/text", "dump/test/feats.scp"]:
        assert (tmp_path / f).is_file(), f
    # a second run skips every finished stage
    r = run(tmp_path, "--stop-stage", "4", *small)
    assert r.returncode == 0 and r.stdout.count("(done:") >= 7, r.stdout
