"""scripts/gpu_profile.py's smoke mode on the CPU: every item is written as one JSON line, CUDA-only items
are recorded as skipped with a reason, and --budget-s stops the grid and the loop runs with the items
left listed. What it measures on the CPU means nothing; that it runs keeps the GPU minutes for the GPU."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _smoke(tmp_path, *extra):
    out = tmp_path / "profile.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_profile.py"), "--smoke", "--out", str(out),
                        *extra], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    stdout = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert stdout == lines
    return lines


@pytest.mark.slow
def test_smoke_writes_every_item_as_a_json_line(tmp_path):
    lines = _smoke(tmp_path)
    assert not [x for x in lines if "error" in x]
    items = [x["item"] for x in lines]
    assert items[0] == "env" and items[-1] == "done" and lines[-1]["smoke"] is True
    assert lines[0]["device"] == "cpu" and lines[0]["skipped_gpu_fields"]
    kernels = [x for x in lines if x["item"] == "kernels"]
    assert len(kernels) == 1 and "CUDA only" in kernels[0]["skipped"]
    profiles = [x for x in lines if x["item"] == "profile" and "skipped" not in x]
    assert {p["layout"] for p in profiles} == {"auto", "packed_once"}
    assert all(p["top"] and 0 <= p["copy_fill_index_share"] <= 1 for p in profiles)
    grid = [x for x in lines if x["item"] == "grid"]
    assert {(g["layout"], g["precision"], g["utts"]) for g in grid} == {
        (lay, prec, n) for lay in ("packed_per_layer", "packed_once", "padded")
        for prec in ("tf32", "fp16", "bf16-rnn") for n in (4, 8)}
    for g in grid:
        if g["precision"] == "tf32":
            assert g["median_ms"] > 0 and g["reps"] == 2 and g["audio_s_per_s"] > 0 and g["tflop_s"] >= 0
        else:
            assert "CUDA only" in g["skipped"]
    loops = [x for x in lines if x["item"] == "loop"]
    assert [x["name"] for x in loops] == ["today_fp32", "fixed128_fp32"]
    assert all(x["steps"] >= 1 and x["audio_s_per_s"] > 0 for x in loops)
    # 128 utterances' cells (here the first batch size, 4) come before the loop, the rest after it
    first_loop = items.index("loop")
    assert all(g["utts"] == 4 for g in grid if lines.index(g) < first_loop)


@pytest.mark.slow
def test_budget_stops_the_grid_and_lists_what_is_left(tmp_path):
    lines = _smoke(tmp_path, "--budget-s", "0")
    assert [x["item"] for x in lines][-1] == "budget"
    assert not [x for x in lines if x["item"] in ("grid", "loop", "done")]
    left = lines[-1]["left"]
    assert len([k for k, _ in left if k == "grid"]) == 18 and [w for k, w in left if k == "loop"] == [
        "today_fp32", "fixed128_fp32"]
