"""What a learner shows: a progress bar on a terminal, sparse log lines otherwise, TensorBoard scalars
per learner, and ``curves.png`` of loss and learning rate per epoch."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

log = logging.getLogger("asrtrain.train")


class Monitor:
    """Per-learner progress and metrics. Only the main learner draws a bar or writes curves; every
    learner logs its strategy metrics (exchanges, staleness, lock wait ...) and has its own
    TensorBoard run ``<exp>/tensorboard/rank<r>``."""

    def __init__(self, exp_dir: Path, strategy, log_every: int, total_steps: int):
        self.exp_dir = Path(exp_dir)
        self.rank = strategy.rank
        self.main = strategy.is_main
        self.log_every = max(1, log_every)
        self.total = total_steps
        self.bar = None
        self.tb = None
        self._new_window()
        if self.main and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total_steps, desc="train", unit="step", dynamic_ncols=True)
        try:
            from torch.utils.tensorboard import SummaryWriter
            self.tb = SummaryWriter(str(self.exp_dir / "tensorboard" / f"rank{self.rank}"))
        except Exception as err:  # tensorboard is optional at run time; say so once
            log.warning("tensorboard disabled: %s", err)

    def step(self, state, loss: float, lr: float, frames: int, compute_s: float,
             metrics: Callable[[], Dict[str, float]]) -> None:
        w = self._window
        w["loss"] += loss
        w["n"] += 1
        w["frames"] += frames
        w["compute"] += compute_s
        if self.bar is not None:
            self.bar.n = state.step
            self.bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", epoch=state.epoch + 1, refresh=False)
            self.bar.update(0)
        if state.step % self.log_every:
            return
        elapsed = max(1e-9, time.time() - w["t0"])
        row = {"loss": w["loss"] / w["n"], "lr": lr, "steps_per_s": w["n"] / elapsed,
               "audio_s_per_s": w["frames"] * 0.01 / elapsed, "compute_frac": w["compute"] / elapsed,
               # CPU seconds in the window: the whole process (every thread: prefetch, gossip, gloo's) and the
               # training thread alone; they are core-seconds, whatever else shares the cores
               "cpu_s": time.process_time() - w["cpu0"], "main_cpu_s": time.thread_time() - w["main_cpu0"]}
        extra = metrics()
        row.update(extra)
        if self.tb is not None:
            for k, v in row.items():
                self.tb.add_scalar(f"train/{k}", v, state.step)
        if self.bar is None and (self.main or extra):
            text = " ".join(f"{k}={v:.4g}" for k, v in row.items())
            log.info("[learner %d] epoch %d step %d/%d %s", self.rank, state.epoch + 1, state.step, self.total,
                     text)
        self._new_window()

    def _new_window(self) -> None:
        self._window = {"loss": 0.0, "n": 0, "frames": 0, "compute": 0.0, "t0": time.time(),
                        "cpu0": time.process_time(), "main_cpu0": time.thread_time()}

    def epoch(self, row: Dict[str, float]) -> None:
        if self.tb is not None:
            for k, v in row.items():
                if k != "epoch":
                    self.tb.add_scalar(f"epoch/{k}", v, int(row["epoch"]))
            self.tb.flush()
        if self.main:
            msg = (f"epoch {int(row['epoch'])}: train_loss {row['train_loss']:.4f} dev_loss "
                   f"{row['dev_loss']:.4f} lr {row['lr']:.2e} ({row['seconds']:.0f} s)")
            if self.bar is not None:
                self.bar.write(msg)
            log.info(msg)

    def curves(self, history: List[Dict[str, float]], path: Optional[Path] = None) -> None:
        """Write ``curves.png``: train/dev loss and learning rate per epoch."""
        if not history:
            return
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from asrtrain.atomic import atomic_open
        ep = [r["epoch"] for r in history]
        fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
        a.plot(ep, [r["train_loss"] for r in history], "o-", label="train")
        a.plot(ep, [r["dev_loss"] for r in history], "s-", label="dev")
        a.set_xlabel("epoch")
        a.set_ylabel("loss per token")
        a.legend()
        a.grid(alpha=0.3)
        b.plot(ep, [r["lr"] for r in history], "o-")
        b.set_xlabel("epoch")
        b.set_ylabel("learning rate (end of epoch)")
        b.grid(alpha=0.3)
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.14, top=0.95, wspace=0.3)  # tight_layout is slow
        with atomic_open(path or self.exp_dir / "curves.png", "wb") as fh:
            fig.savefig(fh, format="png", dpi=100)
        plt.close(fig)

    def close(self) -> None:
        """End the progress bar and the TensorBoard writer (and its thread); a second call does nothing."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.tb is not None:
            self.tb.close()
            self.tb = None
