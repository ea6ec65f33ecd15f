#!/usr/bin/env python
"""Benchmarks of the distributed strategies on this machine, 1 torch thread per learner (issue 3).

Every run is a real ``asrtrain train`` (prepare_job + spawned learners) on the synthetic corpus, which
the script synthesises, featurises and tokenizes once into ``--work`` (default ./bench_out) and reuses.
Model for all parts: the recipe's BLSTM-CTC (recipes/synth/conf/train.yaml: stack 4, subsample 4) made
smaller, ``model.num_layers=2 model.hidden=128`` (``--quick``: 1 x 32), warmup 10 steps, cosine anneal.

1. step: per-step time of ADPSGD (2 learners) over single learners, same per-learner batch, read
   from the learners' own ``steps_per_s`` log windows (median, first window dropped); with and without
   --delay-by-one. The baseline is two independent single-learner runs at once (the same load on the
   2 cores, no communication), so the ratio is the communication overhead; the ratio over one single
   learner alone on the idle machine (co-location included) is printed too. Target <= 1.15.
2. hetero: 2 learners, rank 1 slowed 3x (dist.slowdown 1:3): training utterances per wall-clock second
   over all epochs (rank 0's epoch times: waits at epoch ends included, no dev set; the figure with
   process spawn and set-up included is printed too) of ADPSGD with train.balance=dynamic
   over SSGD; the ideal ratio for N learners with one slowed 3x is ((N-1) + 1/3) / (N/3) = 2.0 for N=2.
   ADPSGD with the default static balance is reported too: it waits for the straggler every epoch.
3. convergence: test WER (the recipe's lexicon search with a trigram of the training transcripts;
   greedy printed beside it) of single (max_frames 4F) vs ADPSGD (4 learners, F each) vs
   H-ADPSGD (4 learners, 2 per group, F each), same epochs (--epochs, 10), same global batch (F = 1000).
4. largebatch: SSGD vs ADPSGD (fixed ring; random partners from 4 learners up) on --learners N (2; 16 or 32
   at scale) at global batches m x B (--lb-mult, 1,2,3,4; B = --lb-base, 1000 frames x N), --lb-seeds (1,2,3),
   --lb-epochs (5) epochs, learning rate per --lr-rule (none: not rescaled; one rule, or one per strategy). Evaluates the
   **learner-averaged** model of every epoch checkpoint (dev loss per token and greedy dev WER), and
   shows fixed vs random partners per epoch with each schedule's spectral gap; writes largebatch.png and
   largebatch.md into --work. (Before issue 13 this part read each learner's own model's dev loss.)
   --lb-reuse reads back finished runs (their curve.json) and trains only the missing ones.
   What docs/results/large-batch.md quotes (about 2 h on 2 cores; B = 1000 x 16 frames leaves every model on CTC's
   plateau after 10 epochs, so B is one utterance per learner):

       python scripts/bench_strategies.py --parts largebatch --learners 16 --lb-base 5000 --lb-epochs 10

Full-run data: --hours 1.0 of synthetic training speech (~1160 utterances), 100 dev and 200 test
utterances; parts 1 and 2 use max_frames 4000 per learner, 2 and 3 epochs. The step and
heterogeneity figures were measured with --hours 0.3 (347 utterances), the others with 1.0.

    python scripts/bench_strategies.py                    # everything (see --help for sizes)
    python scripts/bench_strategies.py --parts step,hetero
    python scripts/bench_strategies.py --quick            # smoke test, ~2-3 minutes
    python scripts/bench_strategies.py --parts dp,dpspeed,periodic  # issue 11: scripts/bench_dp_periodic.py

The last three lines are ``adpsgd_step_over_single``, ``hetero_adpsgd_over_ssgd``, ``hetero_ideal``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_common import (Corpus, decode_wer, markdown_table, step_seconds, synth_corpus, train,  # noqa: E402
                          train_concurrently)

PARTS = ("step", "hetero", "convergence", "largebatch", "dp", "dpspeed", "periodic")


def sizes(quick: bool, args) -> dict:
    """Every size the parts use; --quick shrinks them so the whole script is a smoke test."""
    if quick:
        return dict(hours=0.02, dev_utts=16, test_utts=16, tok=("char", 60), model=(1, 32), frames=1500,
                    step_epochs=2, hetero_epochs=1, conv_frames=800, conv_epochs=1, lb_base=1500,
                    lb_mult=(1, 2), lb_epochs=1, log_every=1, seeds=1, dp_reps=2, dp_opacus=False,
                    dp_eps=("8", "inf"), dp_epochs=1, dpspeed_epochs=1, periodic_epochs=1,
                    periodic_learners=2, dpp_global_frames=3000, dp_speeds=args.dp_speeds)
    return dict(hours=args.hours, dev_utts=100, test_utts=200, tok=("unigram", 150), model=(2, 128),
                frames=4000, step_epochs=2, hetero_epochs=3, conv_frames=1000, conv_epochs=args.epochs,
                lb_base=2000, lb_mult=(1, 2, 4, 8), lb_epochs=args.lb_epochs, log_every=5, seeds=args.seeds,
                dp_reps=5, dp_opacus=True, dp_eps=("2", "8", "inf"), dp_epochs=args.epochs,
                dpspeed_epochs=args.dpspeed_epochs,
                periodic_epochs=args.epochs, periodic_learners=4, dpp_global_frames=args.global_frames,
                dp_speeds=args.dp_speeds)


def common_sets(s: dict) -> list:
    layers, hidden = s["model"]
    return [f"model.num_layers={layers}", f"model.hidden={hidden}", "train.threads=1",
            "train.warmup_steps=10",
            f"train.log_every_steps={s['log_every']}", "train.average_last=1", "dist.timeout_s=120"]


def strategy_sets(strategy: str, learners: int, per_node: int = 0, dbo: bool = False) -> list:
    out = [f"dist.strategy={strategy}", f"dist.learners={learners}"]
    if per_node:
        out.append(f"dist.learners_per_node={per_node}")
    if dbo:
        out.append("dist.delay_by_one=true")
    return out


def part_step(work: Path, corpus: Corpus, s: dict, results: dict) -> None:
    print("== 1. step time: ADPSGD (2 learners) vs single, 1 thread each, "
          f"max_frames {s['frames']} per learner", flush=True)
    base = common_sets(s) + [f"train.max_frames={s['frames']}", f"train.epochs={s['step_epochs']}"]
    t_alone = step_seconds(train(work, "step_single", corpus, base + strategy_sets("single", 1)), 0)
    # Two single learners at once load the 2 cores as the 2-learner job does, without communicating:
    # ADPSGD over this is the communication overhead; over the lone single it includes co-location.
    pair = train_concurrently(work, ["step_single_a", "step_single_b"], corpus, base + strategy_sets("single", 1))
    t1 = sum(step_seconds(r, 0) for r in pair) / 2
    print(f"step_seconds_single_alone: {t_alone:.4f}")
    print(f"step_seconds_single_colocated: {t1:.4f} (2 independent single learners at once; "
          f"co-location alone costs {t1 / t_alone:.3f}x)")
    for label, dbo in (("", False), ("_dbo", True)):
        run = train(work, f"step_adpsgd{label}", corpus, base + strategy_sets("adpsgd", 2, dbo=dbo))
        per = [step_seconds(run, r) for r in (0, 1)]
        t2 = sum(per) / 2
        print(f"step_seconds_adpsgd{label}: {t2:.4f} (rank0 {per[0]:.4f}, rank1 {per[1]:.4f}); "
              f"over the lone single {t2 / t_alone:.3f}")
        print(f"adpsgd{label}_step_over_single: {t2 / t1:.3f}  (delay_by_one={dbo}; over co-located singles; "
              "target <= 1.15)", flush=True)
        results[f"adpsgd{label}_step_over_single"] = t2 / t1


def part_hetero(work: Path, corpus: Corpus, s: dict, results: dict) -> None:
    n, epochs = 2, s["hetero_epochs"]
    print(f"== 2. heterogeneity: {n} learners, rank 1 slowed 3x, {epochs} epochs of {corpus.train_utts} "
          "utterances, training utterances per wall-clock second", flush=True)
    base = common_sets(s) + [f"train.max_frames={s['frames']}", f"train.epochs={epochs}",
                             "dist.slowdown='1:3'"]
    rate, rate_call = {}, {}
    for name, sets in (("ssgd", strategy_sets("ssgd", n)),
                       ("adpsgd_dynamic", strategy_sets("adpsgd", n) + ["train.balance=dynamic"]),
                       ("adpsgd_static", strategy_sets("adpsgd", n))):
        run = train(work, f"hetero_{name}", corpus, base + sets)
        rate[name] = corpus.train_utts * epochs / run.epoch_seconds()
        rate_call[name] = corpus.train_utts * epochs / run.wall_s
        steps = [run.steps(r) for r in range(n)]
        print(f"hetero_utts_per_s_{name}: {rate[name]:.2f} over the epochs ({run.epoch_seconds():.1f} s); "
              f"{rate_call[name]:.2f} over the whole call with spawn ({run.wall_s:.1f} s); "
              f"steps per learner {steps}")
    ideal = ((n - 1) + 1 / 3) / (n / 3)
    results["hetero_adpsgd_over_ssgd"] = rate["adpsgd_dynamic"] / rate["ssgd"]
    results["hetero_ideal"] = ideal
    print(f"hetero_adpsgd_over_ssgd_with_spawn: {rate_call['adpsgd_dynamic'] / rate_call['ssgd']:.3f}  "
          "(process start-up and set-up included)")
    print(f"hetero_adpsgd_static_over_ssgd: {rate['adpsgd_static'] / rate['ssgd']:.3f}  "
          "(static balance: the fast learner waits for the slow one at every epoch end)")
    print(f"hetero_adpsgd_over_ssgd: {results['hetero_adpsgd_over_ssgd']:.3f}  (train.balance=dynamic) "
          f"ideal {ideal:.2f}, measured/ideal {results['hetero_adpsgd_over_ssgd'] / ideal:.2f} "
          "(target >= 0.9)", flush=True)


def part_convergence(work: Path, corpus: Corpus, s: dict, results: dict) -> None:
    f, epochs = s["conv_frames"], s["conv_epochs"]
    print(f"== 3. convergence: test WER after {epochs} epochs, global batch {4 * f} frames", flush=True)
    base = common_sets(s) + [f"train.epochs={epochs}"]
    runs = {"single": base + strategy_sets("single", 1) + [f"train.max_frames={4 * f}"],
            "adpsgd": base + strategy_sets("adpsgd", 4) + [f"train.max_frames={f}"],
            "hadpsgd": base + strategy_sets("h-adpsgd", 4, per_node=2) + [f"train.max_frames={f}"]}
    wer, greedy = {}, {}
    for name, sets in runs.items():
        run = train(work, f"conv_{name}", corpus, sets)
        greedy[name] = decode_wer(run, corpus)
        wer[name] = decode_wer(run, corpus, lm=True)
        print(f"convergence_wer_{name}: {wer[name]:.2f}  (greedy {greedy[name]:.2f})", flush=True)
    if wer["single"] > 50:
        print("NOTE: single-learner WER > 50%: too little training for the comparison to mean much "
              "(raise --hours / --epochs)")
    for name in ("adpsgd", "hadpsgd"):
        rel = (wer[name] - wer["single"]) / max(wer["single"], 1e-9)
        results[f"convergence_{name}_rel"] = rel
        print(f"convergence_{name}_rel: {rel:+.3f}  (target within +-0.10; greedy "
              f"{(greedy[name] - greedy['single']) / max(greedy['single'], 1e-9):+.3f})")


def largebatch_sizes(quick: bool, args) -> dict:
    """Part 4's sizes (issue 13): learners, base global batch, multiples, seeds, learning-rate rule."""
    base = args.lb_base or (750 if quick else 1000) * args.learners
    mult = args.lb_mult or ((1, 2) if quick else (1, 2, 3, 4))
    names = args.lb_strategies or tuple(LB_STRATEGIES)
    unknown = [k for k in names if k not in LB_STRATEGIES]
    if unknown:
        raise SystemExit(f"bench: --lb-strategies {','.join(names)}: unknown {','.join(map(repr, unknown))} "
                         f"(fix: a subset of {','.join(LB_STRATEGIES)})")
    return dict(lb_base=base, lb_mult=mult, learners=args.learners, lb_seeds=args.lb_seeds,
                lr_rule=lr_rules(args.lr_rule, lb_runnable(names, args.learners)), lb_reuse=args.lb_reuse,
                lb_strategies=names)


def lb_runnable(names, learners: int) -> list:
    """The strategies of ``names`` the grid trains at ``learners``, in table order: random partners from 4
    learners up (at 2 the only partner is fixed)."""
    return [k for k in LB_STRATEGIES if k in names and (learners >= 4 or k != "adpsgd-random")]


LR_RULES = ("none", "sqrt", "linear")


def lr_rules(value: str, names) -> dict:
    """``--lr-rule``: one rule for every strategy (``sqrt``), or one per strategy (``ssgd=sqrt,adpsgd-fixed=
    linear,...``, every strategy of the grid named once), so each can run at the rule that suits it."""
    fix = (f"one of {', '.join(LR_RULES)}, or NAME=RULE for each of {','.join(names)}, "
           "e.g. ssgd=sqrt,adpsgd-fixed=linear,adpsgd-random=linear")
    if "=" not in value:
        if value not in LR_RULES:
            raise SystemExit(f"bench: --lr-rule {value!r}: unknown rule (fix: {fix})")
        return {name: value for name in names}
    rules = {}
    for item in value.split(","):
        name, _, rule = (x.strip() for x in item.partition("="))
        if name not in names or rule not in LR_RULES or name in rules:
            raise SystemExit(f"bench: --lr-rule {value!r}: {item.strip()!r} is not a strategy of this grid with "
                             f"a known rule, or names one twice (fix: {fix})")
        rules[name] = rule
    if missing := [k for k in names if k not in rules]:
        raise SystemExit(f"bench: --lr-rule {value!r}: no rule for {','.join(missing)} (fix: {fix})")
    return rules


def rule_text(rules: dict) -> str:
    """``sqrt`` when every strategy has the same rule, else ``ssgd sqrt, adpsgd-fixed linear``."""
    if len(set(rules.values())) == 1:
        return next(iter(rules.values()))
    return ", ".join(f"{k} {v}" for k, v in rules.items())


LB_STRATEGIES = {"ssgd": ("ssgd", []), "adpsgd-fixed": ("adpsgd", ["dist.averaging=fixed"]),
                 "adpsgd-random": ("adpsgd", ["dist.averaging=random"])}


def lr_sets(rule: str, mult: int) -> list:
    """The learning rate at ``mult`` x the base batch: ``none`` keeps the recipe's (what the README
    documents), ``sqrt`` / ``linear`` scale it by sqrt(mult) / mult."""
    if rule == "none":
        return []
    import yaml

    from bench_common import RECIPE
    base = yaml.safe_load((RECIPE / "train.yaml").read_text())["train"]["lr"]
    return [f"train.lr={base * (mult ** 0.5 if rule == 'sqrt' else mult):.6g}"]


def settings_changed(exp: Path, sets: list) -> list:
    """The ``--set`` overrides (the last of each key wins, as in training) that ``exp``'s config.yaml does
    not hold, as ``key=stored (asked value)``. Each value is read as training reads it (``2e-3`` is the
    float 0.002, not the string YAML 1.1 makes of it)."""
    import yaml

    from asrtrain.config import Config
    from asrtrain.config.file import coerce_value, field_type, override_item

    cfg = yaml.safe_load((exp / "config.yaml").read_text())
    out = []
    for key, value in dict(override_item(s) for s in sets).items():
        typ = field_type(Config, key)
        asked = value if typ is None else coerce_value(value, typ, key, None, None)
        node = cfg
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node != asked:
            out.append(f"{key}={node} (asked {value})")
    return out


def lb_curve(work: Path, name: str, corpus: Corpus, sets: list, every_epoch: bool, reuse: bool) -> list:
    """One large-batch run's learner-averaged dev curve (every epoch, or the last only), saved as
    ``curve.json`` in the run; then only rank 0's epoch checkpoints are kept (they hold the averaged
    model): 16 learners x 10 epochs of every rank's checkpoints filled 64 GB of disk in 21 runs.
    ``reuse``: a finished run with its curve is read back instead of trained again."""
    import json

    from bench_common import Run, averaged_dev_curve

    exp = work / "runs" / name
    saved = exp / "curve.json"
    finished = reuse and (exp / "final.pt").is_file()
    if finished and (changed := settings_changed(exp, sets)):
        raise SystemExit(f"bench: {exp / 'config.yaml'}: trained with {', '.join(changed)}, not what this "
                         "grid asks (fix: a fresh --work, or run without --lb-reuse)")
    if finished and saved.is_file():
        print(f"  [{name}] reused", flush=True)
        return json.loads(saved.read_text())
    run = Run(exp, float("nan")) if finished else train(work, name, corpus, sets, dev=True)
    curve = averaged_dev_curve(run, corpus, last_only=not every_epoch)
    saved.write_text(json.dumps(curve))
    for p in (exp / "checkpoints").glob("epoch-*.rank*.pt*"):
        if ".rank0.pt" not in p.name:
            p.unlink()
    return curve


def part_largebatch(work: Path, corpus: Corpus, s: dict, results: dict) -> None:
    """SSGD vs ADPSGD (fixed ring, random partners) on N learners at global batches m x B, S seeds; dev
    loss and greedy dev WER of the learner-averaged model (the epoch checkpoints' avg_model) per epoch."""
    import statistics as st

    from asrtrain.distributed.topology import gap_row

    n, b, epochs, seeds = s["learners"], s["lb_base"], s["lb_epochs"], s["lb_seeds"]
    names = lb_runnable(s["lb_strategies"], n)
    print(f"== 4. large batch: {n} learners, global batch m x {b} frames (m in {s['lb_mult']}), {epochs} "
          f"epochs, seeds {seeds}, lr rule {rule_text(s['lr_rule'])}; learner-averaged model on dev", flush=True)
    base = common_sets(s) + [f"train.epochs={epochs}", f"dist.timeout_s={max(120, 20 * n)}",
                             f"train.keep_checkpoints={epochs}"]  # every epoch's averaged model is evaluated
    curves = {}
    for m in s["lb_mult"]:
        per = b * m // n
        for seed in seeds:
            for name in names:
                strat, extra = LB_STRATEGIES[name]
                sets = base + strategy_sets(strat, n) + extra + lr_sets(s["lr_rule"][name], m)
                sets += [f"train.max_frames={per}", f"train.seed={seed}"]
                curves[name, m, seed] = lb_curve(work, f"lb{n}_{name}_{m}x_s{seed}", corpus, sets,
                                                 every_epoch=m == s["lb_mult"][0], reuse=s["lb_reuse"])
                last = curves[name, m, seed][-1]
                print(f"  {name} {m}x seed {seed}: averaged-model dev loss {last['dev_loss']:.3f}, "
                      f"dev WER {last['dev_wer']:.1f}%", flush=True)

    def agg(name, m, key):
        vals = [curves[name, m, sd][-1][key] for sd in seeds]
        return st.mean(vals), (st.stdev(vals) if len(vals) > 1 else 0.0)

    m0 = s["lb_mult"][0]  # the ratios and the per-epoch table use the first batch run (B unless --lb-mult skips it)
    at = "B" if m0 == 1 else f"{m0}B"
    # SSGD at the first batch is the reference of the ratios; a subset without SSGD gives plain losses
    ref = agg("ssgd", m0, "dev_loss")[0] if "ssgd" in names else None
    rows = []
    for m in s["lb_mult"]:
        row = [m * b, m]
        for name in names:
            loss, sd = agg(name, m, "dev_loss")
            wer, wsd = agg(name, m, "dev_wer")
            ratio = f" ({loss / ref:.3f})" if ref else ""
            row += [f"{loss:.3f} +- {sd:.3f}{ratio}", f"{wer:.1f} +- {wsd:.1f}"]
        rows.append(row)
    header = ["global batch (frames)", "x B"]
    for name in names:
        header += [f"{name} dev loss" + (f" (/ SSGD at {at})" if ref else ""), f"{name} dev WER %"]
    table = markdown_table(header, rows)
    gaps = {name: gap_row(n, LB_STRATEGIES[name][1][0].split("=")[1]).gap for name in names if name != "ssgd"}
    conv = [[e + 1] + [f"{st.mean(curves[name, m0, sd][e]['dev_loss'] for sd in seeds):.3f}"
                       for name in names] for e in range(epochs)]
    conv_header = ["epoch"] + [f"{k} (gap {gaps[k]:.3f})" if k in gaps else k for k in names]
    conv_table = markdown_table(conv_header, conv)
    note = (f"{n} learners, {corpus.train_utts} training utterances, {epochs} epochs, seeds {list(seeds)}, "
            f"lr rule {rule_text(s['lr_rule'])}; learner-averaged model (mean +- sd over seeds; loss per token).")
    (work / "largebatch.md").write_text(f"Final dev loss and greedy dev WER: {note}\n\n{table}\n\n"
                                        f"Dev loss per epoch at the batch {m0 * b} (spectral gap of the "
                                        f"schedule at {n}):\n\n{conv_table}\n")
    print(table)
    print(conv_table)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 3.6))
    for name in names:
        ax.plot([m * b for m in s["lb_mult"]],
                [agg(name, m, "dev_loss")[0] / (ref or 1.0) for m in s["lb_mult"]], marker="o", label=name)
        bx.plot(range(1, epochs + 1), [float(r[1 + names.index(name)]) for r in conv], marker="o",
                label=name + (f" (gap {gaps[name]:.2f})" if name in gaps else ""))
    ax.set_xlabel("global batch (padded frames)")
    ax.set_ylabel("averaged-model dev loss" + (f" / SSGD at {at}" if ref else ""))
    ax.set_title(f"{n} learners, {epochs} epochs", fontsize=9)
    ax.legend(fontsize=8)
    bx.set_xlabel("epoch")
    bx.set_ylabel(f"dev loss at {m0 * b} frames")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(work / "largebatch.png", dpi=120)
    plt.close(fig)
    print(f"wrote {work / 'largebatch.png'} and {work / 'largebatch.md'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("bench_out"), help="cache and output dir")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a ~2-3 minute smoke test")
    ap.add_argument("--learners", type=int, default=2, help="large batch: learners (even; 16, 32 at scale)")
    ap.add_argument("--lb-base", type=int, default=0, help="large batch: base global batch B in frames "
                    "(default 1000 x learners; --quick 750 x learners)")
    ap.add_argument("--lb-mult", type=lambda v: tuple(int(x) for x in v.split(",")), default=None,
                    help="large batch: multiples of B (default 1,2,3,4; --quick 1,2)")
    ap.add_argument("--lb-seeds", type=lambda v: tuple(int(x) for x in v.split(",")), default=(1, 2, 3),
                    help="large batch: training seeds (default 1,2,3)")
    ap.add_argument("--lb-reuse", action="store_true",
                    help="large batch: read back finished runs in --work/runs (their curve.json, or evaluate "
                         "their checkpoints) instead of training them again; train only the missing ones")
    ap.add_argument("--lb-strategies", type=lambda v: tuple(x.strip() for x in v.split(",")), default=None,
                    help=f"large batch: which of {','.join(LB_STRATEGIES)} to run (default all; without "
                         "ssgd the table gives plain losses, not ratios to SSGD)")
    ap.add_argument("--lr-rule", default="none",
                    help="large batch: learning rate at m x B: none (the recipe's, as the README documents), "
                         "sqrt or linear for every strategy, or one per strategy: ssgd=sqrt,adpsgd-fixed=linear,"
                         "adpsgd-random=linear")
    ap.add_argument("--hours", type=float, default=1.0, help="synthetic training speech (full run)")
    ap.add_argument("--epochs", type=int, default=10, help="convergence epochs (full run)")
    ap.add_argument("--lb-epochs", type=int, default=5, help="large-batch epochs (full run)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per configuration in parts dp, periodic")
    ap.add_argument("--dpspeed-epochs", type=int, default=2, help="part dpspeed: epochs")
    ap.add_argument("--dp-eps", type=lambda v: tuple(x.strip() for x in v.split(",")), default=None,
                    help="part dp: target epsilons, inf = no DP (default 2,8,inf; --quick 8,inf)")
    ap.add_argument("--dp-speeds", choices=("both", "equal", "slow"), default="both",
                    help="part dp: equal learners, rank 1 slowed 3x, or both (default)")
    ap.add_argument("--global-frames", type=int, default=4000,
                    help="parts dp, periodic: global batch in frames, split evenly over the learners "
                         "(default 4000, the synth recipe's max_frames)")
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error(f"unknown part(s) {', '.join(bad)}; choose from {', '.join(PARTS)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    s = {**sizes(args.quick, args), **largebatch_sizes(args.quick, args)}
    s.update({"dp_eps": args.dp_eps} if args.dp_eps else {})
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    corpus = synth_corpus(work, s["hours"], s["dev_utts"], s["test_utts"], *s["tok"])
    print(f"corpus: {corpus.train_utts} training utterances ({s['hours']} h) in {corpus.train.parent}; "
          f"learner logs in {work / 'learners.log'}", flush=True)
    results: dict = {}
    fns = {"step": part_step, "hetero": part_hetero, "convergence": part_convergence,
           "largebatch": part_largebatch}
    for p in parts:
        if p in ("dp", "dpspeed", "periodic"):  # scripts/bench_dp_periodic.py (issue 11)
            import bench_dp_periodic
            getattr(bench_dp_periodic, f"part_{p}")(work, corpus, s, common_sets(s), results)
            continue
        fns[p](work, corpus, s, results)
    print(f"total {time.time() - t0:.0f} s")
    for key in ("dpspeed_ssgd_over_adpsgd_dynamic", "adpsgd_step_over_single", "hetero_adpsgd_over_ssgd",
                "hetero_ideal"):
        if key in results:
            print(f"{key}: {results[key]:.2f}")


if __name__ == "__main__":
    main()
