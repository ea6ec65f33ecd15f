#!/usr/bin/env python
"""GPU training throughput: the full loop next to a bare forward/backward/step loop, fp32 and bf16, and
the ADPSGD step over the single-learner step with two learners sharing the GPU. All side by side in one run.

Model: the published Switchboard BLSTM shape, 6 bidirectional layers of 512 cells per direction over 40
log-mel filterbanks (8 kHz), 3 frames stacked (``model.stack=3``, ``model.subsample=3``), CTC over a
word-piece-sized output (``--targets``). Data: synthetic 40-dim features of 3-8 s utterances (no audio is
read: the benchmark measures training, not feature extraction), 128 utterances per batch at most, as
published.

    python scripts/bench_gpu.py                     # on a GPU machine
    python scripts/bench_gpu.py --device cpu --utts 48 --layers 1 --hidden 32 --max-frames 4000  # smoke

The full loop is :func:`asrtrain.train.loop.run` (batching, pinned prefetch, non_blocking copies, lr
schedule, clipping with the finite check, metrics, TensorBoard, the epoch checkpoint); the bare loop feeds
the same batches, already collated into pinned memory, through autocast, backward and ``optimizer.step``.

Every precision prints TFLOP/s beside audio-s/s: the work counted by :mod:`asrtrain.model.flops` from the
model's shapes (matrix products only, valid frames only) over the seconds measured.

Last lines: ``gpu_train_loop_over_bare: R`` (bf16 where it ran, else the first precision: audio-s/s of
the loop over the bare loop) and ``gpu_<precision>_audio_s_per_s: X`` (the full loop). Each precision
also prints the bare loop with the loop's per-step host check (gradient norm, loss and norm read on the
host), which shows what that device sync costs.

The default 4,096 utterances make a 40-step epoch (about 6 s on an H200). At 1,024 an epoch is 11 steps,
about 2 s there, and the loop's per-epoch costs (the first batch's collation, the end-of-epoch hand-off)
weighed several percent: fp32 loop/bare was 0.85 on the H200 at 1,024 and 1.04-1.06 at 4,096.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench_common import device_sync

ROOT = Path(__file__).resolve().parent.parent


def make_corpus(root: Path, utts: int, dim: int, seed: int = 0) -> Path:
    """A feature dir of ``utts`` utterances of 300-800 frames with word transcripts (~1 word per 40
    frames, from a 500-word vocabulary)."""
    import kaldiio
    import yaml

    from asrtrain.config import FeatureConfig
    from asrtrain.config.file import to_dict
    from asrtrain.data.table import spk2utt_from_utt2spk, write_table

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    words = [f"w{i}" for i in range(500)]
    text, utt2spk, frames = {}, {}, {}
    ids = sorted(f"spk{i % 8}-{i:06d}" for i in range(utts))  # speaker-first ids, written in sorted order
    with kaldiio.WriteHelper(f"ark,scp:{root}/feats.ark,{root}/feats.scp") as w:
        for i, utt in enumerate(ids):
            n = int(rng.integers(300, 801))
            w(utt, rng.normal(0, 1, (n, dim)).astype(np.float32))
            text[utt] = " ".join(rng.choice(words, size=max(1, n // 40)))
            utt2spk[utt] = f"spk{i % 8}"
            frames[utt] = n
    for name, table in (("text", text), ("utt2spk", utt2spk), ("utt2num_frames", frames),
                        ("spk2utt", spk2utt_from_utt2spk(utt2spk))):
        write_table(root / name, {k: str(v) for k, v in table.items()})
    feat = to_dict(FeatureConfig(sample_rate=8000, num_mel_bins=dim, cmvn="none"))
    (root / "features.yaml").write_text(yaml.safe_dump(feat, sort_keys=False))
    return root


def bare_loop(cfg, batches, device, precision: str, host_check: bool = False) -> float:
    """Seconds for forward/backward/step over pre-collated pinned batches (same model, optimizer, lr).

    With ``host_check``, each step also does what the loop's finite check does before the optimizer
    step: the gradient norm, and the loss and norm read on the host (one device sync per step). The
    difference from the plain bare loop is what that sync costs on this device."""
    from asrtrain.model.blstm import build_model
    from asrtrain.train.loop import compute_loss, make_optimizer

    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model).to(device)
    opt = make_optimizer(model, cfg)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    model.train()
    device_sync(device)
    t0 = time.perf_counter()
    for b in batches:
        b = b.to(device)
        loss, count = compute_loss(model, b, cfg.model.loss, precision)
        opt.zero_grad(set_to_none=False)
        loss = loss / max(1, count)
        (scaler.scale(loss) if scaler is not None else loss).backward()
        if host_check:
            if scaler is not None:
                scaler.unscale_(opt)
            norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
            torch.stack([loss.detach().float(), norm.float()]).tolist()
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
    device_sync(device)
    return time.perf_counter() - t0


def epoch_seconds(exp: Path, rank: int = 0):
    """(seconds of the last epoch, steps in it) from the learner's last epoch checkpoint."""
    from asrtrain.train.checkpoint import load_checked

    paths = sorted(exp.glob(f"checkpoints/epoch-*.rank{rank}.pt"))
    ck = load_checked(paths[-1])
    first = load_checked(paths[-2])["step"] if len(paths) > 1 else 0
    return ck["history"][-1]["seconds"], ck["step"] - first


def adpsgd_over_single(args, feats: Path, tok: Path, tmp: Path, sets) -> float:
    """Per-step time of 2 ADPSGD learners sharing the device, over 2 single learners sharing it (two
    independent jobs at once, each on half the data): the same load, without communication."""
    dev = f"{args.device}:0" if args.device == "cuda" else args.device
    base = [sys.executable, "-m", "asrtrain", "train", "--config", str(args.config), "--tokenizer", str(tok),
            "--device", dev, "--set", "train.precision=bf16"] + [x for s in sets for x in ("--set", s)]
    half = []
    for h in range(2):
        sub = tmp / f"half{h}"
        r = subprocess.run([sys.executable, "-m", "asrtrain", "data", "subset", str(feats), str(sub),
                            "--first" if h == 0 else "--last", str(args.utts // 2)], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(r.stderr)
        half.append(sub)
    procs = [subprocess.Popen(base + ["--train-data", str(half[h]), "--exp-dir", str(tmp / f"single{h}")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in range(2)]
    if any(p.wait() for p in procs):
        raise SystemExit("co-located single-learner runs failed")
    single = [epoch_seconds(tmp / f"single{h}") for h in range(2)]
    r = subprocess.run(base + ["--train-data", str(feats), "--exp-dir", str(tmp / "adpsgd"), "--strategy", "adpsgd",
                               "--learners", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-2000:])
    ad = [epoch_seconds(tmp / "adpsgd", rank) for rank in range(2)]
    per_step = lambda rows: sum(s for s, _ in rows) / max(1, sum(n for _, n in rows))  # noqa: E731
    return per_step(ad) / per_step(single)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--utts", type=int, default=4096, help="utterances (~15 min of audio per 170)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs per run (the first is a warm-up)")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--targets", type=int, default=500, help="output units (word pieces)")
    ap.add_argument("--max-frames", type=int, default=64000, help="input frames per batch")
    ap.add_argument("--max-utts", type=int, default=128, help="utterances per batch at most")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra config override for every run, e.g. model.rnn_layout=packed_once (repeat)")
    ap.add_argument("--skip-adpsgd", action="store_true")
    ap.add_argument("--config", type=Path, default=ROOT / "recipes" / "synth" / "conf" / "train.yaml")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (features, checkpoints)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from asrtrain.config import TokenizerConfig
    from asrtrain.device import resolve_device
    from asrtrain.distributed.base import Strategy
    from asrtrain.model.blstm import build_model
    from asrtrain.model.flops import train_flops
    from asrtrain.text.tokenizer import Tokenizer, train_tokenizer
    from asrtrain.train.batching import BatchSpec, learner_batches
    from asrtrain.features.dataset import AsrDataset
    from asrtrain.train.job import prepare_job
    from asrtrain.train.loop import run

    device = resolve_device(args.device)
    tmp = Path(tempfile.mkdtemp(prefix="bench_gpu."))
    if not args.keep:  # 0.6-1.1 GB a run (features, checkpoints)
        atexit.register(shutil.rmtree, tmp, True)
    else:
        print(f"scratch kept in {tmp}", flush=True)
    feats = make_corpus(tmp / "train", args.utts, 40)
    tok = train_tokenizer(feats / "text", tmp / "tok", TokenizerConfig(model_type="word", vocab_size=args.targets))
    sets = [f"train.epochs={args.epochs}", "train.log_every_steps=1000", "train.average_last=1",
            f"model.num_layers={args.layers}", f"model.hidden={args.hidden}", "model.proj=0", "model.stack=3",
            "model.subsample=3", f"train.max_frames={args.max_frames}", f"train.max_utts={args.max_utts}",
            "model.dropout=0.1", "specaug.enabled=false", "train.sortagrad=false"] + args.sets
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        print(f"device: {name}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
              f"cuDNN {torch.backends.cudnn.version()}", flush=True)
    results = {}
    for precision in args.precisions.split(","):
        job = prepare_job(args.config, [], sets + [f"train.device={args.device}", f"train.precision={precision}"],
                          feats, None, tmp / f"exp_{precision}", tok, None, False)
        cfg = job.cfg
        data = AsrDataset(feats, cfg.model.subsample, Tokenizer(tok))
        spec = BatchSpec(cfg.train.max_frames, cfg.train.max_utts, cfg.train.bucket_width, cfg.train.seed)
        epochs = [[data.collate(b).pin() if device.type == "cuda" else data.collate(b)
                   for b in learner_batches(data.lengths, spec, e, Strategy().partition())]
                  for e in range(args.epochs)]
        audio = sum(b.num_frames for b in epochs[-1]) * cfg.features.frame_shift / 1000.0
        sub = cfg.model.subsample
        flops = train_flops(cfg.model, sum(int(((b.feat_lens + sub - 1) // sub).sum()) for b in epochs[-1]))
        run(0, 1, job, Strategy())
        loop_s, steps = epoch_seconds(job.exp_dir)  # the last epoch: warm caches, cuDNN plans chosen
        bare_loop(cfg, epochs[0], device, precision)  # warm-up epoch, not counted
        bare_s = bare_loop(cfg, epochs[-1], device, precision)
        checked_s = bare_loop(cfg, epochs[-1], device, precision, host_check=True)
        params = sum(p.numel() for p in build_model(cfg.model).parameters())
        results[precision] = (audio / loop_s, audio / bare_s, flops / loop_s / 1e12)
        print(f"{precision}: {params / 1e6:.1f} M parameters, {audio:.0f} s of audio in {steps} steps, "
              f"{flops / audio / 1e9:.2f} GFLOP per audio-s (model/flops.py); "
              f"loop {audio / loop_s:.0f} audio-s/s = {flops / loop_s / 1e12:.1f} TFLOP/s, "
              f"bare {audio / bare_s:.0f} audio-s/s = {flops / bare_s / 1e12:.1f} TFLOP/s, "
              f"loop/bare {bare_s / loop_s:.3f}; bare with the per-step host check "
              f"{audio / checked_s:.0f} audio-s/s ({bare_s / checked_s:.3f} of bare)", flush=True)
    if "fp32" in results and "bf16" in results:
        print(f"gpu_bf16_over_fp32: {results['bf16'][0] / results['fp32'][0]:.2f}")
    if not args.skip_adpsgd:
        print(f"gpu_adpsgd_step_over_single: {adpsgd_over_single(args, feats, tok, tmp, sets):.2f}", flush=True)
    key = "bf16" if "bf16" in results else next(iter(results))
    print(f"gpu_train_loop_over_bare: {results[key][0] / results[key][1]:.3f}")
    print(f"gpu_{key}_audio_s_per_s: {results[key][0]:.1f}")
    print(f"gpu_{key}_tflop_s: {results[key][2]:.2f}")


if __name__ == "__main__":
    from asrtrain.errors import AsrError
    try:
        main()
    except AsrError as e:  # no CUDA, say: one line, not a traceback
        raise SystemExit(f"bench_gpu: {e}")
