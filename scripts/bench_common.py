"""Helpers of scripts/bench_strategies.py: the cached synthetic corpus, one `asrtrain train` run, log parsing.

Every training run goes through the real path: :func:`asrtrain.train.job.prepare_job` then
:func:`asrtrain.train.job.train` (which spawns the learners through ``run_learners``), exactly what
``asrtrain train`` calls. The learners' stderr goes to ``<work>/learners.log`` so the report stays readable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "synth" / "conf"


@dataclass(frozen=True)
class Corpus:
    train: Path  # feature dirs
    dev: Path
    test: Path
    test_text: Path  # reference transcripts of test
    tokenizer: Path
    train_utts: int
    lm: Path  # word trigram of the training transcripts (ARPA)


def synth_corpus(work: Path, hours: float, dev_utts: int, test_utts: int, tok_type: str, vocab: int
                 ) -> Corpus:
    """Synthesise, featurise and tokenize once; later calls with the same sizes reuse ``work/synth_*``."""
    from asrtrain.config import FeatureConfig, TokenizerConfig
    from asrtrain.config.file import load_section
    from asrtrain.corpora.synth.prepare import prepare_synth
    from asrtrain.features.archive import compute_features
    from asrtrain.text.tokenizer import train_tokenizer

    root = Path(work) / f"synth_h{hours:g}_d{dev_utts}_t{test_utts}"
    prepare_synth(root / "data", hours=hours, dev_utts=dev_utts, test_utts=test_utts, nj=2)
    fconf = load_section(FeatureConfig, RECIPE / "fbank.yaml")
    for part in ("train", "dev", "test"):
        compute_features(root / "data" / part, root / "dump" / part, fconf, nj=2)
    tok_dir = root / f"tok_{tok_type}{vocab}"
    if not (tok_dir / "tokenizer.model").is_file():
        train_tokenizer(root / "data" / "train" / "text", tok_dir, TokenizerConfig(tok_type, vocab))
    lm = root / "lm" / "lm.arpa"
    if not lm.is_file():
        from asrtrain.lm.ngram import read_sentences, train_ngram
        lm.parent.mkdir(parents=True, exist_ok=True)
        train_ngram(read_sentences(root / "data" / "train" / "text"), 3).write_arpa(lm)
    n = sum(1 for _ in open(root / "dump" / "train" / "feats.scp"))
    return Corpus(root / "dump" / "train", root / "dump" / "dev", root / "dump" / "test",
                  root / "data" / "test" / "text", tok_dir / "tokenizer.model", n, lm)


def device_sync(device) -> None:
    """Wait for ``device``'s queued work (a no-op off CUDA), so a timing covers what it launched."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def output_to(path: Path):
    """Send fds 1 and 2 (inherited by the spawned learners; gloo prints on 1) to ``path``, and drop the
    log handlers an in-process learner adds (its train.log), for the duration."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "a") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)
            for h in root.handlers[:]:
                if h not in handlers:
                    root.removeHandler(h)
                    h.close()
            root.setLevel(level)


@dataclass
class Run:
    exp: Path
    wall_s: float  # the whole train() call: spawn, epochs, checkpoints, final model

    def log(self) -> str:
        return (self.exp / "train.log").read_text()

    def history(self) -> List[Dict[str, float]]:
        tags = sorted((self.exp / "checkpoints").glob("epoch-*.rank0.pt"))
        return torch.load(tags[-1], weights_only=True)["history"]

    def epoch_seconds(self) -> float:
        """Rank 0's epochs (training, end-of-epoch collectives, validation), without spawn and set-up."""
        return sum(row["seconds"] for row in self.history())

    def steps(self, rank: int) -> int:
        tags = sorted((self.exp / "checkpoints").glob(f"epoch-*.rank{rank}.pt"))
        return int(torch.load(tags[-1], weights_only=True)["step"])


def train(work: Path, name: str, corpus: Corpus, sets: Sequence[str], dev: bool = False) -> Run:
    """One fresh ``asrtrain train`` run in ``work/runs/<name>`` with ``--set`` overrides ``sets``."""
    from asrtrain.train.job import prepare_job, train as run_job

    exp = Path(work) / "runs" / name
    if exp.exists():
        shutil.rmtree(exp)
    job = prepare_job(RECIPE / "train.yaml", [], list(sets), corpus.train, corpus.dev if dev else None, exp,
                      corpus.tokenizer, None, False)
    t0 = time.perf_counter()
    with output_to(Path(work) / "learners.log"):
        run_job(job)
    run = Run(exp, time.perf_counter() - t0)
    print(f"  [{name}] {run.wall_s:.1f} s", flush=True)
    return run


def train_concurrently(work: Path, names: Sequence[str], corpus: Corpus, sets: Sequence[str],
                       extra: Optional[Sequence[Sequence[str]]] = None) -> List[Run]:
    """Several independent ``asrtrain train`` processes at once (no dev set): the same CPU load as a
    multi-learner job without any communication, the fair baseline for communication overhead.
    ``extra[i]`` are more ``--set`` overrides for run ``i`` only."""
    import subprocess

    exe = Path(sys.executable).parent / "asrtrain"
    procs, t0 = [], time.perf_counter()
    with open(Path(work) / "learners.log", "a") as logf:
        for i, name in enumerate(names):
            exp = Path(work) / "runs" / name
            if exp.exists():
                shutil.rmtree(exp)
            cmd = [str(exe), "train", "--config", str(RECIPE / "train.yaml"), "--train-data", str(corpus.train),
                   "--tokenizer", str(corpus.tokenizer), "--exp-dir", str(exp)]
            for s in list(sets) + list(extra[i] if extra else []):
                cmd += ["--set", s]
            procs.append((name, exp, subprocess.Popen(cmd, stdout=logf, stderr=logf)))
        runs = []
        for name, exp, proc in procs:
            if proc.wait() != 0:
                raise SystemExit(f"bench: concurrent run {name} failed (see {Path(work) / 'learners.log'})")
            runs.append(Run(exp, time.perf_counter() - t0))
    print(f"  [{', '.join(names)}] {time.perf_counter() - t0:.1f} s, concurrently", flush=True)
    return runs


STEP_RE = re.compile(r"\[(\d+)\] INFO \S+: \[learner \d+\] epoch \d+ step (\d+)/\d+ "
                     r".*?steps_per_s=([\d.e+-]+)")


def step_seconds(run: Run, rank: int) -> Optional[float]:
    """Median seconds per step of ``rank`` over its logged windows, the first (warm-up) one left out."""
    per = [1.0 / float(m.group(3)) for m in STEP_RE.finditer(run.log()) if int(m.group(1)) == rank]
    per = per[1:] if len(per) > 1 else per
    return statistics.median(per) if per else None


def decode_wer(run: Run, corpus: Corpus, lm: bool = False) -> float:
    """Decode the test set with ``final.pt`` (greedy, or the recipe's lexicon search with the corpus's
    trigram); WER in percent."""
    from asrtrain.decode.run import decode
    from asrtrain.score.report import score_text

    out = run.exp / ("decode_test_lm" if lm else "decode_test")
    with output_to(run.exp.parent.parent / "learners.log"):
        if lm:
            decode(run.exp, corpus.test, out, lm=corpus.lm)
        else:
            decode(run.exp, corpus.test, out)
    return score_text(corpus.test_text, out / "text").wer


def averaged_dev_curve(run: Run, corpus: Corpus, last_only: bool = False) -> List[Dict[str, float]]:
    """Per epoch (``last_only``: the last epoch only), the **learner-averaged** model's dev loss (per
    token) and greedy dev WER (%).

    Each epoch checkpoint holds ``avg_model``, the mean of all learners' weights at that epoch's end
    (for ADPSGD not what any one learner holds); this evaluates it on the whole dev set in this process.
    """
    from asrtrain.decode.run import decode, load_model
    from asrtrain.distributed.base import Strategy
    from asrtrain.score.report import score_text
    from asrtrain.text.tokenizer import Tokenizer
    from asrtrain.train import checkpoint as ckpt
    from asrtrain.features.dataset import AsrDataset
    from asrtrain.train.loop import compute_validation_loss
    from asrtrain.train.state import Learner

    rows = []
    with output_to(run.exp.parent.parent / "learners.log"):
        paths = [(ckpt.epoch_of(p), p) for p in ckpt.epoch_checkpoints(run.exp)]
        for i, path in paths[-1:] if last_only else paths:
            cfg, model = load_model(run.exp, path)
            dev = AsrDataset(corpus.dev, cfg.model.subsample, Tokenizer(run.exp / "tokenizer.model"))
            learner = Learner(model, model, None, None, torch.device("cpu"), "fp32")
            loss = compute_validation_loss(learner, Strategy(), dev, cfg)
            out = run.exp / f"decode_dev_avg_epoch{i}"
            decode(run.exp, corpus.dev, out, method="greedy", checkpoint=path)
            wer = score_text(corpus.dev / "text", out / "text").wer
            rows.append({"epoch": i, "dev_loss": loss, "dev_wer": wer})
    return rows


def markdown_table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    fmt = [lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt[0](v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
