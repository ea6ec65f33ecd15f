"""Scenarios, tables and the speed-up plot of :mod:`asrtrain.simulate.epoch`.

:func:`published_v100` is the published H-ADPSGD system (Zhang et al.: 64 V100s in 8 nodes of 8, 100 Gb/s
Ethernet, a 6x512 BLSTM at batch 128 per GPU, 16 epochs of SWB-2000 in 5.2 h, 40x over one V100). Only the
hardware and the one-GPU time are published; every other number below is an assumption, named where it is
made, and it is what ``asrtrain simulate`` uses by default:

- one-GPU time: 40 x 5.2 h = 208 h for 16 epochs (about the week the paper quotes), so 13 h per epoch;
- samples: the hybrid BLSTM is trained on 21-frame chunks (IBM's recipe), 2,000 h x 360,000 frames/h / 21
  = 34.3 M chunks per epoch, 267,857 batches of 128; step time = 13 h / 267,857 = 0.175 s on one V100;
- model: 6 bidirectional layers of 512 cells, 260 inputs, a 256 linear bottleneck, 32,000 CD states:
  43.2 M fp32 parameters, 172 MB (:func:`blstm_params`);
- network: inside a node 5 us and 100 GB/s (NVLink-class, what NCCL's ring reaches on a DGX-1); between
  nodes 25 us and 100 Gb/s = 12.5 GB/s;
- our GPU gossip goes through host memory: each exchange side snapshots the weights to the host and
  averages there (``exchange_overhead_s`` = 172 MB / 12 GB/s of PCIe), and the leader folds the delta
  back at each step boundary on its critical path (``fold_s``, the same copy);
- compute spread 0 (equal 21-frame chunks); see ``scripts/bench_scale.py`` for what moves each figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Tuple

from asrtrain.simulate.model import Cluster, Link, Workload
from asrtrain.simulate.epoch import EpochResult

PUBLISHED = {"hadpsgd64_speedup": 40.0, "hadpsgd64_hours": 5.2, "hybrid32_hours": 11.5, "epochs": 16}


def blstm_params(layers: int, hidden: int, inputs: int, bottleneck: int, outputs: int) -> int:
    """Parameters of a bidirectional LSTM stack (torch's two bias vectors) + bottleneck + output layer."""
    total, width = 0, inputs
    for _ in range(layers):
        total += 2 * (4 * hidden * (width + hidden) + 8 * hidden)
        width = 2 * hidden
    if bottleneck:
        total += width * bottleneck + bottleneck
        width = bottleneck
    return total + width * outputs + outputs


def published_v100(chunk_frames: int = 21, batch: int = 128, hours: float = 2000.0
                   ) -> Tuple[Workload, Cluster]:
    """The published V100 cluster and SWB-2000 epoch (assumptions in the module docstring)."""
    one_gpu_hours = PUBLISHED["hadpsgd64_speedup"] * PUBLISHED["hadpsgd64_hours"]  # 208 h for 16 epochs
    one_gpu_epoch_s = one_gpu_hours * 3600 / PUBLISHED["epochs"]
    batches = round(hours * 3600 * 100 / chunk_frames / batch)
    params = blstm_params(6, 512, 260, 256, 32000)
    pcie = params * 4 / 12e9
    w = Workload(step_s=one_gpu_epoch_s / batches, batches=batches, params=params)
    c = Cluster(intra=Link(5e-6, 100e9), inter=Link(25e-6, 12.5e9), learners_per_node=8,
                exchange_overhead_s=pcie, fold_s=pcie)
    return w, c


def powers_of_two(largest: int) -> List[int]:
    out, n = [], 1
    while n <= largest:
        out.append(n)
        n *= 2
    return out


def not_simulated(labels: Sequence[str], learners: Sequence[int], results: Sequence[EpochResult]
                  ) -> List[Tuple[str, List[int]]]:
    """(strategy label, learner counts) that :func:`~asrtrain.simulate.epoch.sweep` skipped because
    the strategy cannot run on that many learners (gossip needs an even number of groups)."""
    done = {(r.label, r.learners) for r in results}
    out = [(label, [n for n in learners if (label, n) not in done]) for label in labels]
    return [(label, ns) for label, ns in out if ns]


def table(results: Sequence[EpochResult], epochs: int = 16) -> str:
    """The results as the fixed-width table ``asrtrain simulate`` prints (one row a result)."""
    return "\n".join([table_header()] + [table_row(r, epochs) for r in results])


def table_header() -> str:
    return (f"{'strategy':<20} {'learners':>8} {'epoch_s':>11} {'speedup':>8} {'MB/learner':>11} "
            f"{'staleness':>9} {'hours':>9}")


def table_row(r: EpochResult, epochs: int) -> str:
    """One row: ``hours`` is ``epochs`` epochs; MB/learner is what one learner sends in one epoch."""
    return (f"{r.label:<20} {r.learners:>8d} {r.epoch_s:>11.1f} {r.speedup:>8.2f} "
            f"{r.bytes_per_learner / 1e6:>11.1f} {r.staleness:>9.3f} {epochs * r.epoch_s / 3600:>9.2f}")


#: The machine-readable columns (``asrtrain simulate --format tsv`` / ``json``), full precision, SI units.
FIELDS = ("strategy", "learners", "epoch_s", "speedup", "bytes_per_learner", "staleness", "steps", "hours")


def record(r: EpochResult, epochs: int) -> dict:
    """One result as a dict of :data:`FIELDS` (``hours``: ``epochs`` epochs; ``steps``: optimizer steps
    per learner, per group for h-adpsgd)."""
    return {"strategy": r.label, "learners": r.learners, "epoch_s": r.epoch_s, "speedup": r.speedup,
            "bytes_per_learner": r.bytes_per_learner, "staleness": r.staleness, "steps": r.steps,
            "hours": epochs * r.epoch_s / 3600}


def tsv_row(values: Sequence) -> str:
    return "\t".join(repr(v) if isinstance(v, float) else str(v) for v in values)


def plot_speedup(results: Sequence[EpochResult], path: Path, title: str) -> Path:
    """Speed-up against learners, one line per strategy, log-log, with the ideal line (PNG, Agg)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from asrtrain.atomic import atomic_open

    fig, ax = plt.subplots(figsize=(6, 4.2))
    labels = list(dict.fromkeys(r.label for r in results))
    for label in labels:
        rows = [r for r in results if r.label == label]
        ax.plot([r.learners for r in rows], [r.speedup for r in rows], marker="o", ms=3, label=label)
    ns = sorted({r.learners for r in results})
    ax.plot(ns, ns, "k:", lw=1, label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("learners")
    ax.set_ylabel("predicted speed-up over one learner")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.12, top=0.92)
    path = Path(path)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)
    return path
