"""Ctrl-C at random moments of a tiny `asrtrain train`, counting how each run ended.

    nice -n 19 python scripts/interrupt_loop.py --trials 200 --learners 1 --out /tmp/int1.json
    nice -n 19 python scripts/interrupt_loop.py --trials 50 --learners 2 --out /tmp/int2.json

A tiny feature task (tests/train/featfix.py) is made once under --work; a calibration run measures how long an
uninterrupted run takes (T, start-up to exit); then every trial starts a fresh run in its own session and sends
SIGINT to its whole process group (as a terminal's Ctrl-C does) after a delay drawn uniformly from [0, 1.1 T]:
start-up, training, the final average, after final.pt, and a few after the run ended. Outcomes:

- one_line:  exit status 1, no traceback, and exactly one error line, ``asrtrain: error: interrupted ...``
- finished:  exit status 0 and stdout the path of final.pt (the run was done when the signal came)
- sigint_at_startup: killed by SIGINT itself with nothing printed: the signal came while the interpreter was
             starting, before it installed its own handler, or Python's own "Fatal Python error:
             init_import_site" when it came during the import of `site` (no code of ours has run yet)
- crash:     killed by a signal (SIGSEGV, SIGABRT, ...) or a native-crash message on stderr
- hang:      still running --hang-s seconds after the signal (then killed)
- other:     anything else (another exit status, more or other lines, a traceback)

The JSON summary holds the counts, the settings and the stderr of every run that was not one_line/finished.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ["model.num_layers=1", "model.hidden=16", "model.subsample=2", "train.max_frames=1500",
            "train.warmup_steps=2", "train.epochs=2", "train.checkpoint_every_steps=2"]
NATIVE = ("Segmentation fault", "corrupted size", "Fatal Python error", "double free", "terminate called",
          "Aborted (core dumped)", "malloc")


def command(task, exp: Path, learners: int):
    tr, dev, tok = task
    cmd = [sys.executable, "-m", "asrtrain", "train", "--train-data", str(tr), "--dev-data", str(dev),
           "--tokenizer", str(tok), "--exp-dir", str(exp), "--learners", str(learners),
           "--strategy", "single" if learners == 1 else "ssgd"]
    for s in SETTINGS:
        cmd += ["--set", s]
    return cmd


def start(cmd):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def classify(rc, out: str, err: str, exp: Path) -> str:
    if rc is None:
        return "hang"
    if (rc == -signal.SIGINT and not err) or "init_import_site" in err:
        # before the interpreter installed its handler, or while it imports `site`: no code of ours ran yet
        return "sigint_at_startup"
    if rc < 0 or any(m in err for m in NATIVE):
        return "crash"
    if rc == 0 and out == f"{exp / 'final.pt'}\n":
        return "finished"
    lines = [ln for ln in err.splitlines() if "error" in ln.lower() or "Traceback" in ln or "Aborted" in ln]
    if rc == 1 and len(lines) == 1 and lines[0].startswith("asrtrain: error: interrupted"):
        return "one_line"
    return "other"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--learners", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=0.0, help="stop after this long (0: run every trial)")
    ap.add_argument("--hang-s", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="where the task and exp dirs go (default: a temp dir)")
    ap.add_argument("--out", type=Path, required=True, help="JSON summary")
    a = ap.parse_args()
    from asrtrain.features.toy import make_task

    work = a.work or Path(tempfile.mkdtemp(prefix="interrupt_loop."))
    task = make_task(Path(tempfile.mkdtemp(prefix="task.", dir=work)), 24, 6)  # made once, reused
    exp = work / "exp"
    import shutil

    shutil.rmtree(exp, ignore_errors=True)
    t0 = time.monotonic()
    p = start(command(task, exp, a.learners))
    out, err = p.communicate(timeout=900)
    span = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"calibration run failed ({p.returncode}):\n{err}")
    rng = random.Random(a.seed)
    counts = {k: 0 for k in ("one_line", "finished", "sigint_at_startup", "crash", "hang", "other")}
    bad, began = [], time.monotonic()
    for i in range(a.trials):
        if a.minutes and time.monotonic() - began > a.minutes * 60:
            break
        shutil.rmtree(exp, ignore_errors=True)
        delay = rng.uniform(0, 1.1 * span)
        p = start(command(task, exp, a.learners))
        time.sleep(delay)
        try:
            os.killpg(p.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            out, err = p.communicate(timeout=a.hang_s)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            rc = None
        kind = classify(rc, out, err, exp)
        counts[kind] += 1
        if kind not in ("one_line", "finished"):
            bad.append({"trial": i, "delay_s": round(delay, 3), "kind": kind, "rc": rc, "stderr": err[-4000:]})
        print(f"{i} {delay:.2f}s {kind} rc={rc}", flush=True)
        if kind not in ("one_line", "finished"):
            print("    " + err[-2000:].replace("\n", "\n    "), flush=True)
    summary = {"learners": a.learners, "trials": sum(counts.values()), "calibration_run_s": round(span, 2),
               "counts": counts, "load_average": os.getloadavg(), "cpus": os.cpu_count(),
               "minutes": round((time.monotonic() - began) / 60, 1), "settings": SETTINGS, "bad": bad}
    a.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: summary[k] for k in ("learners", "trials", "counts", "calibration_run_s")}))


if __name__ == "__main__":
    main()
