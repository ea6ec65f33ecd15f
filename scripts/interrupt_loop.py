"""Ctrl-C at random moments of a tiny `asrtrain train`, counting how each run ended.

    nice -n 19 python scripts/interrupt_loop.py --trials 200 --learners 1 --out /tmp/int1.json
    nice -n 19 python scripts/interrupt_loop.py --trials 50 --learners 2 --out /tmp/int2.json

A tiny feature task (tests/train/featfix.py) is made once under --work; a calibration run measures how long an
uninterrupted run takes (T, start-up to exit); then every trial starts a fresh run in its own session and sends
SIGINT to its whole process group (as a terminal's Ctrl-C does) after a delay drawn uniformly from [0, 1.1 T]:
start-up, training, the final average, after final.pt, and a few after the run ended. Outcomes:

- one_line:  exit status 1, no traceback, and exactly one error line, ``asrtrain: error: interrupted ...``
- finished:  exit status 0 and stdout the path of final.pt: the signal came after the command had returned
             (a late Ctrl-C is ignored), and the run's output is whole
- after_exit: the process had already exited when the signal was due (not sent; not an interrupt)
- sigint_at_startup: the signal came before a line of asrtrain ran (:func:`before_our_code`): killed by
             SIGINT with nothing printed, Python's own "Fatal Python error: init_..." or its
             KeyboardInterrupt traceback in the console script's import line (`--startup-scan` measures
             how long that window is)
- crash:     killed by a signal (SIGSEGV, SIGABRT, ...) or a native-crash message on stderr
- hang:      still running --hang-s seconds after the signal (then killed)
- other:     anything else (another exit status, more or other lines, a traceback)

The run is the console script `asrtrain` next to this Python (what a user types), else `python -m asrtrain`.
The JSON summary (rewritten after every trial, so a loop cut short keeps its counts) holds the counts, the settings and the stderr of every run that was not one_line/finished.
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


CODE: Path | None = None  # --code: the checkout the runs import (default: the one this script imports)
MODULE = False  # --module: `python -m asrtrain` instead of the console script


def entry() -> list[str]:
    script = Path(sys.executable).with_name("asrtrain")
    return [str(script)] if script.exists() and not MODULE else [sys.executable, "-m", "asrtrain"]


def code_version() -> str:
    """The commit of the code the runs import (``asrtrain``'s checkout), with ``+dirty`` for local changes."""
    import asrtrain

    src = CODE or Path(asrtrain.__file__).resolve().parents[1]
    try:
        rev = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "asrtrain", "setup.cfg"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"unknown ({src})"
    return rev + ("+dirty" if dirty else "") + f" ({src})"


def command(task, exp: Path, learners: int):
    tr, dev, tok = task
    cmd = entry() + ["train", "--train-data", str(tr), "--dev-data", str(dev),
           "--tokenizer", str(tok), "--exp-dir", str(exp), "--learners", str(learners),
           "--strategy", "single" if learners == 1 else "ssgd"]
    for s in SETTINGS:
        cmd += ["--set", s]
    return cmd


def start(cmd):
    env = dict(os.environ, PYTHONPATH=str(CODE)) if CODE else None
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=env, cwd=CODE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def finish(p, hang_s: float):
    """``(exit status or None for a hang, stdout, stderr)`` of a run, killed after ``hang_s``."""
    try:
        out, err = p.communicate(timeout=hang_s)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, out, err


def before_our_code(rc, err: str) -> bool:
    """The signal came before a line of asrtrain ran: killed by SIGINT with nothing printed (before the
    interpreter installed its handler), Python's own ``Fatal Python error: init_...`` (during its start-up:
    init_sys_streams, init_import_site), or its KeyboardInterrupt traceback whose frames are only the console
    script's import line and the frozen import machinery (while it looked for the package)."""
    if "Fatal Python error: init_" in err:
        return True
    if rc != -signal.SIGINT:
        return False
    lines = err.strip().splitlines()
    if not lines:
        return True
    frames = [ln.strip() for ln in lines if ln.strip().startswith('File "')]
    ours = [f for f in frames if not (f.startswith('File "<frozen ') or '/bin/asrtrain"' in f or "runpy.py" in f)]
    return lines[-1] == "KeyboardInterrupt" and lines[0].startswith("Traceback") and not ours


def classify(rc, out: str, err: str, exp: Path) -> str:
    if rc is None:
        return "hang"
    if before_our_code(rc, err):
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
    ap.add_argument("--interrupts", type=int, default=0, help="stop once this many signals were sent (0: no limit)")
    ap.add_argument("--hang-s", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="where the task and exp dirs go (default: a temp dir)")
    ap.add_argument("--out", type=Path, required=True, help="JSON summary")
    ap.add_argument("--code", type=Path, default=None,
                    help="run the asrtrain of this checkout (PYTHONPATH); the task is made with this script's")
    ap.add_argument("--startup-scan", default="", metavar="MS,MS,...",
                    help="instead: --trials interrupts at each of these fixed delays (ms) after the start, to "
                         "measure the start-up window left to Python (outcomes per delay)")
    ap.add_argument("--module", action="store_true", help="run `python -m asrtrain`, not the console script")
    a = ap.parse_args()
    global CODE, MODULE
    CODE, MODULE = (a.code.resolve() if a.code else None), a.module
    from asrtrain.features.toy import make_task

    work = a.work or Path(tempfile.mkdtemp(prefix="interrupt_loop."))
    task = make_task(Path(tempfile.mkdtemp(prefix="task.", dir=work)), 24, 6)  # made once, reused
    exp = work / "exp"
    import shutil

    if a.startup_scan:
        return startup_scan(a, task, exp)
    spans = []
    for _ in range(3):  # the first run is slower (cold caches): the median of three
        shutil.rmtree(exp, ignore_errors=True)
        t0 = time.monotonic()
        p = start(command(task, exp, a.learners))
        out, err = p.communicate(timeout=900)
        spans.append(time.monotonic() - t0)
        if p.returncode != 0:
            sys.exit(f"calibration run failed ({p.returncode}):\n{err}")
    span = sorted(spans)[1]
    rng = random.Random(a.seed)
    counts = {k: 0 for k in ("one_line", "finished", "after_exit", "sigint_at_startup", "crash", "hang", "other")}
    bad, began = [], time.monotonic()
    version = code_version()

    def summary() -> dict:
        return {"learners": a.learners, "code": version, "seed": a.seed, "command": " ".join(entry()),
                "interrupts": sum(counts.values()) - counts["after_exit"],
                "calibration_runs_s": [round(x, 2) for x in spans], "counts": counts,
                "load_average": os.getloadavg(), "cpus": os.cpu_count(),
                "minutes": round((time.monotonic() - began) / 60, 1), "settings": SETTINGS, "bad": bad}

    for i in range(a.trials):
        if a.minutes and time.monotonic() - began > a.minutes * 60:
            break
        if a.interrupts and sum(counts.values()) - counts["after_exit"] >= a.interrupts:
            break
        shutil.rmtree(exp, ignore_errors=True)
        delay = rng.uniform(0, 1.1 * span)
        p = start(command(task, exp, a.learners))
        time.sleep(delay)
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            sent = True
        else:
            sent = False
        rc, out, err = finish(p, a.hang_s)
        kind = classify(rc, out, err, exp) if sent else "after_exit"
        counts[kind] += 1
        core = Path(CODE or os.getcwd()) / "core"  # `ulimit -c unlimited` and core_pattern "core": kept for gdb
        if core.exists():
            os.replace(core, work / f"core.{i}")
        if kind not in ("one_line", "finished", "after_exit"):
            bad.append({"trial": i, "delay_s": round(delay, 3), "kind": kind, "rc": rc, "stderr": err[-4000:],
                        "core": str(work / f"core.{i}") if (work / f"core.{i}").exists() else None})
        print(f"{i} {delay:.2f}s {kind} rc={rc}", flush=True)
        if kind not in ("one_line", "finished", "after_exit"):
            print("    " + err[-2000:].replace("\n", "\n    "), flush=True)
        tmp = a.out.with_name(a.out.name + ".tmp")
        tmp.write_text(json.dumps(summary(), indent=1) + "\n")
        os.replace(tmp, a.out)
    s = summary()
    print(json.dumps({k: s[k] for k in ("learners", "code", "interrupts", "counts", "calibration_runs_s")}))


def startup_scan(a, task, exp: Path) -> None:
    """SIGINT at fixed delays after the start: below some delay the interpreter has not yet run a line of
    asrtrain (Python's default: killed by SIGINT, or its own traceback); above it, the one line."""
    import shutil

    delays = [float(x) / 1000 for x in a.startup_scan.split(",")]
    table = {f"{d * 1000:g}": {} for d in delays}
    odd = []
    for _ in range(a.trials):
        for d in delays:
            shutil.rmtree(exp, ignore_errors=True)
            p = start(command(task, exp, a.learners))
            time.sleep(d)
            os.killpg(p.pid, signal.SIGINT)
            rc, out, err = finish(p, a.hang_s)
            kind = classify(rc, out, err, exp)
            if kind == "other" and "KeyboardInterrupt" in err:
                kind = "python_traceback"
            row = table[f"{d * 1000:g}"]
            row[kind] = row.get(kind, 0) + 1
            if kind not in ("one_line", "sigint_at_startup"):
                odd.append({"delay_ms": d * 1000, "kind": kind, "rc": rc, "stdout": out[-500:],
                            "stderr": err[-3000:]})
        print(json.dumps(table), flush=True)
    result = {"learners": a.learners, "code": code_version(), "command": " ".join(entry()),
              "repeats": a.trials, "load_average": os.getloadavg(), "outcomes_by_delay_ms": table, "odd": odd}
    a.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
