"""Benchmark parts ``dp`` and ``periodic`` of scripts/bench_strategies.py (issue 11).

dp:
  0. the cost of per-example gradients: one DP step (one forward/backward per utterance, clipping, noise)
     over one normal step on the same batch, the recipe's BLSTM (2 x 320, stack/subsample 6), 1 thread,
     median of ``--dp-reps`` after a warm-up.
  a. epsilon in {2, 8, inf} (inf = no DP) for SSGD-DP vs ADPSGD-DP, 2 learners, same global batch and
     epochs: test WER (the recipe's lexicon search + trigram) and wall time; then the same with rank 1
     slowed 3x (dist.slowdown 1:3). ADPSGD uses train.balance=dynamic there: without DP the fast learner
     claims more of the global batches; with DP balance is private (each learner takes more turns over
     its own shard, at most dp.max_step_share = 2 times its share, with sigma computed for that cap).
dpspeed:
  a'. the heterogeneous case alone, cheap enough for 3 seeds: rank 1 slowed 3x, target epsilon 8, SSGD-DP
     vs ADPSGD-DP static vs ADPSGD-DP private dynamic; wall time, steps and epsilon per learner, dev loss
     of the learner-averaged model (``--dpspeed-epochs``, default 2).
periodic:
  b. constant H in {1, 4, 16} vs adaptive, 4 learners (--quick: 2): test WER against the bytes each learner sent
     (from the strategy state in the last checkpoint). Goal: adaptive within 5% relative of H = 1's WER
     with at most half its bytes.

Every configuration runs ``--seeds`` seeds (train.seed); tables give mean and spread (min-max) over
them, written with PNGs to ``<work>/dp.md|png``, ``dpspeed.md|png`` and ``periodic.md|png``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Dict, List, Sequence

import torch

from bench_common import Corpus, decode_wer, device_sync, markdown_table, train


def dp_step_cost(reps: int = 5, utts: int = 12, frames: int = 300, seed: int = 0,
                 device: str = "cpu") -> Dict[str, float]:
    """Seconds of a normal step and of a DP step on the same random batch (corpus-like lengths), on
    ``device`` (the CPU with 1 thread; on a GPU each timing waits for the device)."""
    from asrtrain.config import DPConfig, ModelConfig
    from asrtrain.distributed.base import Strategy
    from asrtrain.distributed.dp import DPStrategy
    from asrtrain.model.blstm import build_model
    from asrtrain.features.dataset import Batch
    from asrtrain.train.loop import compute_loss

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(seed)
    model = build_model(ModelConfig(input_dim=80, num_targets=150, stack=6, subsample=6, num_layers=2,
                                    hidden=320, dropout=0.05)).to(device)
    lens = torch.randint(frames // 2, frames + 1, (utts,), generator=g)
    tlens = (lens // 15).clamp(min=1)
    batch = Batch([f"u{i}" for i in range(utts)], torch.randn(utts, int(lens.max()), 80, generator=g), lens,
                  torch.randint(1, 150, (utts, int(tlens.max())), generator=g), tlens).to(torch.device(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    plain = Strategy()
    dp = DPStrategy(Strategy(), DPConfig(enabled=True, clip=1.0, noise_multiplier=1.0, delta=1e-6))
    for s in (plain, dp):
        s.setup(model, opt)
    dp.plan(100, 1, 100 * utts)
    loss_fn = (lambda m, b: compute_loss(m, b, "ctc"))
    out = {}
    for name, s in (("normal", plain), ("dp", dp)):
        times = []
        for _ in range(reps + 1):
            device_sync(device)
            t0 = time.perf_counter()
            s.compute_gradients(model, batch, loss_fn, int(batch.target_lens.sum()))
            device_sync(device)
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times[1:])
    torch.set_num_threads(threads)
    out["ratio"] = out["dp"] / out["normal"]
    out["utts"] = utts
    return out


def opacus_step_seconds(reps: int = 2, utts: int = 12, frames: int = 300, seed: int = 0,
                        device: str = "cpu") -> float:
    """Seconds of one step with per-example gradients from opacus: the same BLSTM with ``nn.LSTM``
    swapped for ``opacus.layers.DPLSTM`` (same weights and names) inside a ``GradSampleModule``, on
    ``device`` (compare with :func:`dp_step_cost` on the same device: on a GPU the microbatch loop cost
    65x a normal step at 128 utterances, and opacus' batched per-example gradients were not measured
    there)."""
    import torch.nn.functional as F
    from opacus import GradSampleModule
    from opacus.layers import DPLSTM

    from asrtrain.config import ModelConfig
    from asrtrain.model.blstm import build_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model = build_model(ModelConfig(input_dim=80, num_targets=150, stack=6, subsample=6, num_layers=2,
                                    hidden=320, dropout=0.05))
    for i, layer in enumerate(model.layers):
        dp_layer = DPLSTM(layer.input_size, layer.hidden_size, batch_first=True, bidirectional=True)
        dp_layer.load_state_dict(layer.state_dict())
        model.layers[i] = dp_layer
    gsm = GradSampleModule(model.to(device))
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(frames // 2, frames + 1, (utts,), generator=g)
    tlens = (lens // 15).clamp(min=1)
    x = torch.randn(utts, int(lens.max()), 80, generator=g).to(device)
    targets = torch.randint(1, 150, (utts, int(tlens.max())), generator=g).to(device)
    times = []
    for _ in range(reps + 1):
        device_sync(device)
        t0 = time.perf_counter()
        gsm.zero_grad()
        log_probs, out_lens = gsm(x, lens)
        F.ctc_loss(log_probs.transpose(0, 1), targets, out_lens, tlens, reduction="sum",
                   zero_infinity=True).backward()
        device_sync(device)
        times.append(time.perf_counter() - t0)
    torch.set_num_threads(threads)
    return statistics.median(times[1:])


def spread(values: Sequence[float]) -> str:
    return f"{statistics.mean(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def final_strategy_state(run, rank: int = 0) -> dict:
    tags = sorted((run.exp / "checkpoints").glob(f"epoch-*.rank{rank}.pt"))
    from asrtrain.train.checkpoint import load_checked
    return load_checked(tags[-1])["strategy"]


def epsilon_logged(run, rank: int) -> float:
    import re
    found = re.findall(rf"\[learner {rank}\] epoch \d+ dp: epsilon ([\d.e+-]+)", run.log())
    return float(found[-1]) if found else float("inf")


def plot(path: Path, series: Dict[str, List[tuple]], xlabel: str, ylabel: str, logx: bool = False) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for label, points in series.items():
        ax.errorbar([p[0] for p in points], [p[1] for p in points], yerr=[p[2] for p in points], marker="o",
                    capsize=3, label=label, linestyle="-" if len(points) > 1 else "none")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def part_dp(work: Path, corpus: Corpus, s: dict, common: List[str], results: dict) -> None:
    cost = dp_step_cost(reps=s["dp_reps"])
    print(f"== dp 0. per-example gradients (microbatches of 1), {cost['utts']} utterances of 150-300 frames, "
          f"1 thread: normal step {cost['normal']:.3f} s, DP step {cost['dp']:.3f} s, "
          f"ratio {cost['ratio']:.1f}x", flush=True)
    results["dp_step_cost_ratio"] = cost["ratio"]
    if s["dp_opacus"]:
        t = opacus_step_seconds()
        print(f"   opacus DPLSTM + GradSampleModule on the same batch: {t:.3f} s, "
              f"{t / cost['normal']:.1f}x a normal step", flush=True)
    f, epochs = s["dpp_global_frames"] // 2, s["dp_epochs"]
    base = common + [f"train.epochs={epochs}", f"train.max_frames={f}", "dist.learners=2",
                     "dp.clip=1.0", "dp.delta=1e-4"]
    rows, series = [], {}
    speeds = {"both": (False, True), "equal": (False,), "slow": (True,)}[s.get("dp_speeds", "both")]
    for hetero in speeds:
        for strat in ("ssgd", "adpsgd"):
            for eps in s["dp_eps"]:
                wers, walls, spent = [], [], []
                for seed in range(1, s["seeds"] + 1):
                    sets = base + [f"dist.strategy={strat}", f"train.seed={seed}"]
                    if eps != "inf":
                        sets += ["dp.enabled=true", f"dp.epsilon={eps}"]
                    if hetero:
                        sets += ["dist.slowdown='1:3'"]
                        # under dp, dynamic balance is private: own shard, step cap in the accounting
                        sets += ["train.balance=dynamic"] if strat == "adpsgd" else []
                    run = train(work, f"dp_{strat}_eps{eps}_h{int(hetero)}_s{seed}", corpus, sets)
                    wers.append(decode_wer(run, corpus, lm=True))
                    walls.append(run.wall_s)
                    spent.append(max(epsilon_logged(run, r) for r in (0, 1)))
                rows.append([strat, eps, "1:3" if hetero else "-", spread(wers), spread(walls),
                             f"{max(spent):.3g}"])
                series.setdefault(f"{strat}{' slow 1:3' if hetero else ''}", []).append(
                    (float(eps) if eps != "inf" else 64.0, statistics.mean(wers),
                     (max(wers) - min(wers)) / 2))
                print("  " + " | ".join(str(c) for c in rows[-1]), flush=True)
    table = markdown_table(["strategy", "target epsilon", "slowdown", "test WER % mean (min-max)",
                            "wall s mean (min-max)", "max epsilon logged"], rows)
    (work / "dp.md").write_text(f"{s['seeds']} seeds, {corpus.train_utts} training utterances, "
                                f"{epochs} epochs, "
                                f"2 learners x {f} frames; per-example cost ratio {cost['ratio']:.1f}x.\n\n"
                                f"{table}\n")
    plot(work / "dp.png", series, "target epsilon (64 = no DP)", "test WER %", logx=True)
    print(table)


def part_periodic(work: Path, corpus: Corpus, s: dict, common: List[str], results: dict) -> None:
    f, epochs = s["dpp_global_frames"] // s["periodic_learners"], s["periodic_epochs"]
    base = common + [f"train.epochs={epochs}", f"train.max_frames={f}", "dist.strategy=periodic",
                     f"dist.learners={s['periodic_learners']}"]
    rows, points, wer_of, bytes_of = [], {}, {}, {}
    for period in ("1", "4", "16", "adaptive"):
        wers, sent = [], []
        for seed in range(1, s["seeds"] + 1):
            run = train(work, f"periodic_{period}_s{seed}", corpus, base + [f"dist.period={period}",
                                                                          f"train.seed={seed}"])
            wers.append(decode_wer(run, corpus, lm=True))
            sent.append(final_strategy_state(run)["bytes_sent"] / 1e6)
        wer_of[period], bytes_of[period] = statistics.mean(wers), statistics.mean(sent)
        rows.append([period, spread(wers), spread(sent)])
        points[f"H={period}"] = [(statistics.mean(sent), statistics.mean(wers), (max(wers) - min(wers)) / 2)]
        print("  " + " | ".join(str(c) for c in rows[-1]), flush=True)
    rel = (wer_of["adaptive"] - wer_of["1"]) / max(wer_of["1"], 1e-9)
    frac = bytes_of["adaptive"] / max(bytes_of["1"], 1e-12)
    results["periodic_adaptive_wer_rel"], results["periodic_adaptive_bytes_frac"] = rel, frac
    table = markdown_table(["period", "test WER % mean (min-max)", "MB sent per learner mean (min-max)"],
                           rows)
    (work / "periodic.md").write_text(
        f"{s['seeds']} seeds, {corpus.train_utts} training utterances, {epochs} epochs, "
        f"{s['periodic_learners']} learners x {f} frames.\n\n{table}\n\nadaptive vs H=1: WER {rel:+.3f} "
        f"relative, bytes x{frac:.3f} (goal: within +0.05 with at most x0.5)\n")
    plot(work / "periodic.png", points, "MB sent per learner", "test WER %", logx=True)
    print(table)
    print(f"periodic_adaptive_vs_h1: WER {rel:+.3f} relative, bytes x{frac:.3f} (goal <= +0.05, <= 0.5)")


DPSPEED = {  # variant -> --set overrides; all: 2 learners, rank 1 slowed 3x, target epsilon 8
    "ssgd-dp": ["dist.strategy=ssgd"],
    "adpsgd-dp static": ["dist.strategy=adpsgd"],
    "adpsgd-dp dynamic (private)": ["dist.strategy=adpsgd", "train.balance=dynamic"],
}


def part_dpspeed(work: Path, corpus: Corpus, s: dict, common: List[str], results: dict) -> None:
    """The paper's heterogeneous case alone, cheap enough for 3 seeds: 2 learners, rank 1 slowed 3x,
    target epsilon 8, SSGD-DP vs ADPSGD-DP with static and with private dynamic balance; wall time of
    the whole run, steps and epsilon per learner, and the dev loss per token of the learner-averaged
    final model (the last epoch checkpoint's avg_model)."""
    from bench_common import averaged_dev_curve

    f, epochs = s["dpp_global_frames"] // 2, s["dpspeed_epochs"]
    base = common + [f"train.epochs={epochs}", f"train.max_frames={f}", "dist.learners=2", "dp.enabled=true",
                     "dp.epsilon=8", "dp.clip=1.0", "dp.delta=1e-4", "dist.slowdown='1:3'"]
    rows, walls_of = [], {}
    for name, sets in DPSPEED.items():
        walls, losses, steps, eps = [], [], [], []
        key = name.split(" (")[0].replace(" ", "_")
        for seed in range(1, s["seeds"] + 1):
            run = train(work, f"dpspeed_{key}_s{seed}", corpus, base + sets + [f"train.seed={seed}"])
            walls.append(run.wall_s)
            losses.append(averaged_dev_curve(run, corpus, last_only=True)[0]["dev_loss"])
            steps.append((run.steps(0), run.steps(1)))
            eps.append((epsilon_logged(run, 0), epsilon_logged(run, 1)))
        walls_of[name] = walls
        rows.append([name, spread(walls), spread(losses),
                     " / ".join(f"{a}:{b}" for a, b in steps),
                     " / ".join(f"{a:.2f}:{b:.2f}" for a, b in eps)])
        print("  " + " | ".join(str(c) for c in rows[-1]), flush=True)
    ratio = statistics.mean(walls_of["ssgd-dp"]) / statistics.mean(walls_of["adpsgd-dp dynamic (private)"])
    results["dpspeed_ssgd_over_adpsgd_dynamic"] = ratio
    table = markdown_table(["variant", "wall s mean (min-max)", "dev loss/token, averaged model",
                            "steps rank0:rank1 per seed", "epsilon spent rank0:rank1 per seed"], rows)
    head = (f"{s['seeds']} seeds, {corpus.train_utts} training utterances, {epochs} epochs, 2 learners x {f} "
            f"frames, rank 1 slowed 3x (dist.slowdown 1:3), target epsilon 8 at delta 1e-4.\n\n")
    (work / "dpspeed.md").write_text(f"{head}{table}\n\nwall time SSGD-DP over ADPSGD-DP private dynamic: "
                                     f"{ratio:.2f}x\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    names = list(walls_of)
    ax.barh(names, [statistics.mean(walls_of[n]) for n in names],
            xerr=[[statistics.mean(walls_of[n]) - min(walls_of[n]) for n in names],
                  [max(walls_of[n]) - statistics.mean(walls_of[n]) for n in names]], capsize=3)
    ax.set_xlabel(f"wall s, {epochs} epochs, one learner 3x slower ({s['seeds']} seeds)")
    fig.tight_layout()
    fig.savefig(work / "dpspeed.png", dpi=120)
    plt.close(fig)
    print(table)
    print(f"dpspeed_ssgd_over_adpsgd_dynamic: {ratio:.2f}")
