#!/usr/bin/env python3
"""Run AN4 recipe variants over several seeds at once, on dev only, and decode test once for the winner.

A driver around ``recipes/an4/run.sh`` for a machine with room for several trainings at a time (one
GPU, many cores); each run is the recipe itself (stages 4-6 with ``--set`` overrides), so a variant that
wins here is the recipe with those lines changed. Used for recipes/an4/README.md's choice 9.

  python scripts/an4_sweep.py --data DATA --work W --out OUT \
      --variant 'base' --variant 'l3d3:model.num_layers=3,model.dropout=0.3' [--seeds 1,2,3]
      [--concurrency 6] [--train-deadline SECONDS] [--threads 2] [--nj 16] [--test-winner]
      [--oov-penalties closed,-10,-6] [--adopt-below WER]

DATA holds prepared data dirs train/ dev/ test/ (``asrtrain prepare an4``); a wav.scp path may start
with ``@FLAC@``, replaced by ``--flac-dir`` (how the audio travels to a machine without the corpus).
Variants run in the order given, seeds inside a variant, at most ``--concurrency`` at a time; a run
still training at ``--train-deadline`` seconds (counted from the start of this script) is stopped and
reported as unfinished, never scored. The rule that picks the winner is fixed before any run: the
lowest mean dev WER with the LM over all seeds, among the variants whose every seed finished; a tie
goes to the earlier variant. Test is decoded only with ``--test-winner``, only for the winner, and
only when the winner is not the first variant (the recipe as it stands, whose test figures exist).
``--adopt-below WER`` replaces the first variant with a bar fixed beforehand (the recipe's recorded 3-seed
mean minus the margin a rule asks for, e.g. 10.32 for recipes/an4/README.md's conv rule): every variant is
a candidate, one wins only if its mean LM dev WER is at or below the bar, and none wins otherwise, so a
variant can be judged against the recipe's recorded figures without training the recipe again.
Results: OUT/sweep.json and OUT/sweep.md.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "recipes" / "an4" / "run.sh"
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[sweep {time.monotonic() - T0:6.0f} s] {msg}", flush=True)


def parse_variant(spec: str) -> tuple[str, list[str]]:
    name, _, sets = spec.partition(":")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        sys.exit(f"an4_sweep: variant name {name!r} must be letters, digits, '_', '.', '-'")
    return name, [s for s in sets.split(",") if s]


def prepare(data: Path, work: Path, flac_dir: Path | None, nj: int) -> None:
    dst = work / "data"
    for part in ("train", "dev", "test"):
        (dst / part).mkdir(parents=True, exist_ok=True)
        for f in (data / part).iterdir():
            if f.name == "wav.scp":
                text = f.read_text()
                if flac_dir is not None:
                    text = text.replace("@FLAC@", str(flac_dir.resolve()))
                (dst / part / "wav.scp").write_text(text)
            elif f.is_file():
                shutil.copy(f, dst / part / f.name)
    (dst / ".stage0.done").touch()
    log("stages 1-3: speed perturbation, features, tokenizer, LM")
    subprocess.run(["bash", str(RUN), "--work", str(work), "--stage", "1", "--stop-stage", "3",
                    "--nj", str(nj)], check=True)


def recipe_cmd(work: Path, first_stage: int, tag: str, seed: int, decode_sets: str, sets: list[str],
               oov_penalties: str = "closed") -> list:
    """``run.sh`` from ``first_stage`` to 6 for one run: its tag, seed, decoded sets, tune-lm's OOV
    penalties and ``--set`` lines."""
    cmd = ["bash", str(RUN), "--work", str(work), "--stage", str(first_stage), "--stop-stage", "6",
           "--tag", tag, "--seed", str(seed), "--decode-sets", decode_sets, "--oov-penalties", oov_penalties]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def scores(logfile: Path, tag: str) -> dict:
    out = {}
    if not logfile.exists():
        return out
    for line in logfile.read_text().splitlines():
        m = re.match(r"%(WER|CER) ([0-9.]+) \|.*\| (\S+)$", line.strip())
        if m and m.group(3).startswith(tag + "_"):
            out[f"{m.group(1).lower()}_{m.group(3)[len(tag) + 1:]}"] = float(m.group(2))
    return out


def curve(exp: Path) -> dict:
    dev, secs = [], []
    log_path = exp / "train.log"
    if log_path.exists():
        for line in log_path.read_text().splitlines():
            m = re.search(r"epoch (\d+): train_loss \S+ dev_loss ([0-9.]+) .*\((\d+) s\)", line)
            if m:
                dev.append(float(m.group(2)))
                secs.append(int(m.group(3)))
    return {"dev_loss": dev, "epoch_s": secs}


def pick_winner(order: list[str], results: dict, bar: float | None = None) -> str | None:
    """The rule fixed before any run: the lowest mean dev WER with the LM among the variants whose every
    seed finished (and, with ``bar``, whose mean is at or below it); a tie (to 0.01) goes to the variant
    listed first. None when no variant qualifies."""
    done = [n for n in order if results[n]["complete"]
            and (bar is None or round(results[n]["wer_lm_dev"]["mean"], 2) <= bar)]
    if not done:
        return None
    return min(done, key=lambda n: (round(results[n]["wer_lm_dev"]["mean"], 2), order.index(n)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, required=True,
                    help="prepared data dirs train/ dev/ test/ (asrtrain prepare an4)")
    ap.add_argument("--flac-dir", type=Path, help="replaces @FLAC@ at the start of wav.scp paths")
    ap.add_argument("--work", type=Path, required=True, help="the recipe's --work (data, dump, exp, logs)")
    ap.add_argument("--out", type=Path, required=True, help="where sweep.json and sweep.md are written")
    ap.add_argument("--variant", action="append", required=True,
                    help="NAME[:key=value,...], run.sh --set lines; the first is the recipe to beat (repeat)")
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated training seeds (default 1,2,3)")
    ap.add_argument("--concurrency", type=int, default=6, help="runs at a time (default 6)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads per run (default 2)")
    ap.add_argument("--nj", type=int, default=os.cpu_count() or 2, help="feature jobs (default: the cores)")
    ap.add_argument("--train-deadline", type=float, default=1e9,
                    help="seconds from the start after which unfinished runs are stopped, never scored")
    ap.add_argument("--oov-penalties", default="closed",
                    help="run.sh --oov-penalties for every run's tune-lm (default: the closed search)")
    ap.add_argument("--test-winner", action="store_true",
                    help="decode test for the winner on dev, when it is not the first variant")
    ap.add_argument("--adopt-below", type=float, default=None, metavar="WER",
                    help="a fixed bar instead of the first variant: a variant wins only with a mean LM dev "
                         "WER at or below it (the recipe's recorded mean minus the rule's margin)")
    args = ap.parse_args()
    for part in ("train", "dev", "test"):
        if not (args.data / part / "wav.scp").is_file():
            sys.exit(f"an4_sweep: {args.data / part / 'wav.scp'} not found; give --data the dirs "
                     "`asrtrain prepare an4 AN4_DIR DATA` wrote")
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        sys.exit(f"an4_sweep: --seeds {args.seeds!r}: give integers separated by commas, e.g. 1,2,3")

    variants = [parse_variant(v) for v in args.variant]
    args.out.mkdir(parents=True, exist_ok=True)
    logs = args.work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    prepare(args.data, args.work, args.flac_dir, args.nj)

    queue = [(name, sets, seed) for name, sets in variants for seed in seeds]
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    status: dict[str, str] = {}
    wall: dict[str, float] = {}
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    while queue or running:
        while queue and len(running) < args.concurrency and time.monotonic() - T0 < args.train_deadline:
            name, sets, seed = queue.pop(0)
            tag = f"{name}_s{seed}"
            cmd = recipe_cmd(args.work, 4, tag, seed, "dev", [f"train.threads={args.threads}", *sets],
                             args.oov_penalties)
            with open(logs / f"{tag}.log", "w") as fh:  # the child keeps its own copy of the descriptor
                running[tag] = (subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                                 start_new_session=True), time.monotonic())
            log(f"start {tag} {' '.join(sets)}")
        if not running:
            break
        time.sleep(2)
        for tag, (proc, started) in list(running.items()):
            if proc.poll() is not None:
                status[tag] = "done" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
                wall[tag] = time.monotonic() - started
                del running[tag]
                log(f"{tag}: {status[tag]} in {wall[tag]:.0f} s {scores(logs / f'{tag}.log', tag)}")
            elif time.monotonic() - T0 > args.train_deadline:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
                status[tag] = "unfinished at the deadline"
                wall[tag] = time.monotonic() - started
                del running[tag]
                log(f"{tag}: stopped at the deadline after {wall[tag]:.0f} s")
        if time.monotonic() - T0 > args.train_deadline:
            for name, sets, seed in queue:
                status[f"{name}_s{seed}"] = "not started before the deadline"
            queue = []

    results = {}
    for name, sets in variants:
        runs = {}
        for seed in seeds:
            tag = f"{name}_s{seed}"
            runs[seed] = {"status": status.get(tag, "?"), "wall_s": round(wall.get(tag, 0.0)),
                          **scores(logs / f"{tag}.log", tag), **curve(args.work / "exp" / tag)}
        complete = all(r["status"] == "done" and "wer_lm_dev" in r for r in runs.values())
        entry = {"sets": sets, "runs": runs, "complete": complete}
        if complete:
            for key in ("wer_greedy_dev", "wer_lm_dev", "cer_lm_dev"):
                vals = [r[key] for r in runs.values() if key in r]
                entry[key] = {"mean": round(statistics.mean(vals), 2), "min": min(vals), "max": max(vals)}
        results[name] = entry

    winner = pick_winner([n for n, _ in variants], results, args.adopt_below)
    bar = "" if args.adopt_below is None else f", at or below {args.adopt_below}"
    log(f"winner on dev (mean WER with the LM over {len(seeds)} seeds{bar}): {winner}")
    test = {}
    if args.test_winner and winner and (args.adopt_below is not None or winner != variants[0][0]):
        for seed in seeds:
            tag = f"{winner}_s{seed}"
            cmd = recipe_cmd(args.work, 5, tag, seed, "test", dict(variants)[winner], args.oov_penalties)
            with open(logs / f"{tag}.test.log", "w") as fh:
                subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, check=False)
            test[seed] = scores(logs / f"{tag}.test.log", tag)
            log(f"test {tag}: {test[seed]}")
    summary = {"seeds": seeds, "winner": winner, "adopt_below": args.adopt_below, "variants": results,
               "test_of_winner": test,
               "elapsed_s": round(time.monotonic() - T0)}
    (args.out / "sweep.json").write_text(json.dumps(summary, indent=1))
    lines = ["| variant | overrides | seeds done | greedy dev WER | LM dev WER | LM dev CER | s/epoch |",
             "|---|---|---|---|---|---|---|"]
    for name, e in results.items():
        ok = sum(r["status"] == "done" for r in e["runs"].values())
        ep = [s for r in e["runs"].values() for s in r["epoch_s"]]
        fmt = (lambda k: f"{e[k]['mean']} ({e[k]['min']}-{e[k]['max']})" if k in e else "-")
        lines.append(f"| {name} | {' '.join(e['sets']) or '(recipe)'} | {ok}/{len(seeds)} | "
                     f"{fmt('wer_greedy_dev')} | {fmt('wer_lm_dev')} | {fmt('cer_lm_dev')} | "
                     f"{statistics.median(ep) if ep else '-'} |")
    lines.append(f"\nwinner (lowest mean LM dev WER{bar}): {winner}")
    if test:
        lines.append(f"test of the winner: {json.dumps(test)}")
    (args.out / "sweep.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
