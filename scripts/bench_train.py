#!/usr/bin/env python
"""Training throughput of the full loop next to a bare forward/backward/step loop, same batches, one run.

The full loop is ``asrtrain.train.loop.run`` (batching, prefetch, lr schedule, clipping, metrics,
TensorBoard, the epoch-end checkpoint and averaging); the bare loop feeds the same pre-collated batches
to the same model and optimizer. The two are interleaved so machine noise hits both alike, in alternating order.

    python scripts/bench_train.py [--utts 4000] [--rounds 4] [--config recipes/synth/conf/train.yaml]

Rounds alternate which of the two runs first (ABAB...), because order alone moved the ratio by ~6% here.

The loop also pays what the bare loop is handed for free: collating batches (in its prefetch thread),
gradient clipping, per-job start-up (TensorBoard, the final model, curves.png) and the epoch-end
checkpoint. 4000 utterances (~27 min of audio per epoch, still a ninth of the demo's epoch) amortise the
per-job part as real training does; with 1200 the ratio drops by about 0.05 on this machine.

Last lines: ``train_epochs_over_bare`` (the loop's epochs alone, by their own clocks: where per-step
overhead shows) and ``train_loop_over_bare: <ratio>`` (the whole job: audio-seconds per second, loop / bare).
"""

from __future__ import annotations

import argparse
import atexit
import logging
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--utts", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=4, help="even: half the rounds run the loop first")
    ap.add_argument("--epochs", type=int, default=2, help="epochs per round (the bare loop runs as many)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--config", type=Path, default=ROOT / "recipes" / "synth" / "conf" / "train.yaml")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (features, checkpoints)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)

    from asrtrain.features.toy import make_feat_dir
    from asrtrain.config import TokenizerConfig
    from asrtrain.distributed.base import Strategy
    from asrtrain.text.tokenizer import train_tokenizer, Tokenizer
    from asrtrain.train.batching import BatchSpec, learner_batches
    from asrtrain.features.dataset import AsrDataset
    from asrtrain.train.job import prepare_job
    from asrtrain.train.loop import compute_loss, make_optimizer, run
    from asrtrain.model.blstm import build_model

    tmp = Path(tempfile.mkdtemp(prefix="bench_train."))
    if not args.keep:  # 0.6-1.1 GB a run (features, checkpoints)
        atexit.register(shutil.rmtree, tmp, True)
    else:
        print(f"scratch kept in {tmp}", flush=True)
    words = [f"w{i}" for i in range(60)]
    feats = make_feat_dir(tmp / "train", args.utts, dim=80, words=words)
    tok = train_tokenizer(feats / "text", tmp / "tok", TokenizerConfig(model_type="word", vocab_size=80))
    sets = [f"train.epochs={args.epochs}", "train.log_every_steps=20", "train.average_last=1", f"train.threads={args.threads}"]

    # Warm-up, not counted: first-use imports (tensorboard, matplotlib) and allocator growth.
    run(0, 1, prepare_job(args.config, [], ["train.epochs=1", "train.average_last=1"], feats, None,
                          tmp / "warmup", tok, None, False), Strategy())
    from asrtrain.train.checkpoint import epoch_checkpoints, load_checked

    loop_s = bare_s = audio = epochs_s = 0.0
    ratios: list = []  # per round: (whole job, epochs alone), loop over bare
    for r in range(args.rounds):
        job = prepare_job(args.config, [], sets, feats, None, tmp / f"exp{r}", tok, None, False)
        cfg = job.cfg
        data = AsrDataset(feats, cfg.model.subsample, Tokenizer(tok))
        spec = BatchSpec(cfg.train.max_frames, cfg.train.max_utts, cfg.train.bucket_width, cfg.train.seed)
        batches = [data.collate(b) for e in range(args.epochs)
                   for b in learner_batches(data.lengths, spec, e, Strategy().partition())]
        secs = sum(b.num_frames for b in batches) * cfg.features.frame_shift / 1000.0

        def full() -> float:
            t0 = time.perf_counter()
            run(0, 1, job, Strategy())
            return time.perf_counter() - t0

        def bare() -> float:
            torch.manual_seed(cfg.train.seed)
            model = build_model(cfg.model)
            opt = make_optimizer(model, cfg)
            model.train()
            t0 = time.perf_counter()
            for b in batches:
                loss, count = compute_loss(model, b, cfg.model.loss)
                opt.zero_grad()
                (loss / max(1, count)).backward()
                opt.step()
            return time.perf_counter() - t0

        # Alternate which runs first: on this machine whichever runs second in a round ran ~3% faster
        # (loop first: epochs 0.90 of bare; bare first: 0.96, same code, 4 rounds each).
        if r % 2 == 0:
            t_loop, t_bare = full(), bare()
        else:
            t_bare, t_loop = bare(), full()
        # The loop's own epoch clocks: from an epoch's first batch to its end, without start-up, the
        # epoch-end checkpoint and the final model.
        t_epochs = sum(row["seconds"] for row in load_checked(epoch_checkpoints(job.exp_dir)[-1])["history"])
        loop_s, bare_s, epochs_s, audio = loop_s + t_loop, bare_s + t_bare, epochs_s + t_epochs, audio + secs
        ratios.append((t_bare / t_loop, t_bare / t_epochs))
        first = "loop" if r % 2 == 0 else "bare"
        print(f"round {r} ({first} first): {secs:.0f} s of audio; loop {secs / t_loop:.1f} audio-s/s "
              f"(epochs alone {secs / t_epochs:.1f}), bare {secs / t_bare:.1f} audio-s/s", flush=True)
    print(f"train_loop_audio_s_per_s: {audio / loop_s:.2f}")
    print(f"bare_loop_audio_s_per_s: {audio / bare_s:.2f}")
    print(f"train_epochs_over_bare: {bare_s / epochs_s:.2f}  (the epochs alone: job start-up, epoch-end "
          f"checkpoints and the final model excluded, {loop_s - epochs_s:.1f} s of {loop_s:.1f} s)")
    whole = sorted(r[0] for r in ratios)
    alone = sorted(r[1] for r in ratios)
    print(f"per-round ratios, median (min-max): whole job {statistics.median(whole):.3f} ({whole[0]:.3f}-"
          f"{whole[-1]:.3f}), epochs alone {statistics.median(alone):.3f} ({alone[0]:.3f}-{alone[-1]:.3f})")
    print(f"train_loop_over_bare: {bare_s / loop_s:.2f}")


if __name__ == "__main__":
    main()
