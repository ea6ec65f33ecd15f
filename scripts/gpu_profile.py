#!/usr/bin/env python
"""Where the 6x512 BLSTM's GPU time goes: one prepared run for a session that has a GPU (issue 56).

Items, in this order (each one JSON line, written and flushed as soon as it is measured, to ``--out`` and to
stdout, so a run cut short keeps everything before the cut):

1. ``env``: torch, CUDA, cuDNN, the GPU's name, SM count and compute capability, whether cuDNN runs bf16
   LSTMs here (:func:`asrtrain.model.rnn_stack.cuda_bf16_lstm_runs`).
2. ``kernels``: the kernel names cuDNN picks for the ``padded`` layout under fp16 at a few batch sizes (is
   a persistent RNN kernel chosen?).
3. ``profile``: ``torch.profiler`` over a few training steps (forward, CTC loss, backward, Adam) at 128
   utterances: the top kernels by GPU time, GPU-busy time (the union of kernel intervals) against wall
   time, and the share of copy/fill/index kernels; for today's stack and the new layouts.
4. ``grid`` at 128 utterances, then ``loop``, then the rest of ``grid``: one BLSTM stack forward+backward
   (no head, no loss), CUDA events, median of ``--reps``, over layout x precision x batch; and the full
   training loop (:func:`asrtrain.train.loop.run`, as ``bench_gpu.py`` runs it) at today's batching
   (``train.max_frames=64000``, at most 128 utterances) and at a fixed 128 utterances a batch.
5. ``done`` (or ``budget`` when ``--budget-s`` stopped the run before the end: the items left are listed).

Precisions: ``tf32`` is torch's default fp32 (cuDNN's TF32 on: what ``train.precision=fp32`` runs);
``fp16`` is autocast (its LSTMs in fp16); ``bf16`` is autocast with the LSTMs in fp32 (today's
``train.precision=bf16``); ``bf16-rnn`` adds ``model.rnn_bf16`` (bf16 LSTMs cast by hand), skipped with
the reason where cuDNN refuses them. Work in TFLOP/s is :mod:`asrtrain.model.flops`'s count.

    python scripts/gpu_profile.py --out /tmp/profile.jsonl            # on the GPU (see docs/gpu_profile.md)
    python scripts/gpu_profile.py --smoke --out /tmp/smoke.jsonl      # on the CPU, tiny sizes, seconds

``--smoke`` runs every item on the CPU at tiny sizes; what only CUDA can show is recorded as skipped, with
the reason. No measurement is made in smoke mode that means anything about a GPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

COPY_LIKE = ("copy", "memcpy", "memset", "fill", "index", "gather", "scatter", "cat", "pack", "elementwise")


class Writer:
    """One JSON object a line, to the file and to stdout, flushed at once."""

    def __init__(self, path: Path):
        self.file = open(path, "w")

    def __call__(self, item: str, **fields) -> None:
        line = json.dumps({"item": item, **fields}, default=str)
        self.file.write(line + "\n")
        self.file.flush()
        print(line, flush=True)


def model_cfg(args):
    from asrtrain.config import ModelConfig
    return ModelConfig(input_dim=40, num_targets=args.targets, stack=3, subsample=3, num_layers=args.layers,
                       hidden=args.hidden, proj=0, dropout=0.1)


def synthetic_batch(cfg, utts: int, lo: int, hi: int, device, seed: int = 0):
    """A Batch of ``utts`` utterances of ``lo``..``hi`` input frames, random features and CTC targets."""
    from asrtrain.features.dataset import Batch
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(lo, hi + 1, (utts,), generator=g)
    feats = torch.randn(utts, int(lens.max()), cfg.input_dim, generator=g)
    tlens = (lens // 40).clamp(min=1)
    targets = torch.randint(1, cfg.num_targets, (utts, int(tlens.max())), generator=g)
    return Batch([f"u{i}" for i in range(utts)], feats, lens, targets, tlens).to(device)


def precision_ctx(precision: str, device):
    """(autocast context, whether LSTMs are cast to bf16 by hand) for a grid precision."""
    import contextlib
    if precision == "tf32":
        return contextlib.nullcontext(), False
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    return torch.autocast(device.type, dtype=dtype), precision == "bf16-rnn"


def skip_reason(precision: str, device) -> str:
    from asrtrain.model.rnn_stack import cuda_bf16_lstm_runs
    if device.type != "cuda":
        return "" if precision == "tf32" else "CUDA only: half-precision cuDNN LSTMs"
    if precision.startswith("bf16") and not torch.cuda.is_bf16_supported(including_emulation=False):
        return "no native bf16 on this GPU"
    if precision == "bf16-rnn" and not cuda_bf16_lstm_runs()[0]:
        return cuda_bf16_lstm_runs()[1]
    return ""


def env_item(out, device) -> None:
    from asrtrain.model.rnn_stack import cuda_bf16_lstm_runs
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": str(device),
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(gpu=p.name, sms=p.multi_processor_count, capability=f"{p.major}.{p.minor}",
                    memory_gib=round(p.total_memory / 2 ** 30, 1), bf16_lstm=cuda_bf16_lstm_runs())
    else:
        info.update(gpu=None, skipped_gpu_fields="no CUDA device")
    out("env", **info)


def stack_inputs(cfg, utts: int, lo: int, hi: int, device):
    """The first LSTM layer's input (N, T', D x stack) and its lengths for a synthetic batch."""
    from asrtrain.model.blstm import stack_frames
    b = synthetic_batch(cfg, utts, lo, hi, device)
    h, lens = stack_frames(b.feats, b.feat_lens.to(device), cfg.stack, cfg.subsample)
    return h, lens


def stack_step(model, h, lens, layout: str, precision: str, device):
    """One forward+backward of the LSTM stack alone (loss: the sum of the last states)."""
    from asrtrain.model.rnn_stack import run_stack
    ctx, bf16 = precision_ctx(precision, device)
    for p in model.parameters():
        p.grad = None
    with ctx:
        out, _ = run_stack(model.layers, model.dropout, h, lens, layout, None, bf16)
    out.float().sum().backward()


def kernel_names(prof, device) -> list:
    """[(name, us, calls)], most time first: the device kernels on CUDA (from the kernel events' own
    intervals), the CPU ops by self time on the CPU."""
    if device.type != "cuda":
        rows = [(e.key, round(e.self_cpu_time_total, 1), e.count) for e in prof.key_averages()
                if e.self_cpu_time_total > 0]
        return sorted(rows, key=lambda r: -r[1])
    total, calls = {}, {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name] = total.get(e.name, 0.0) + (e.time_range.end - e.time_range.start)
            calls[e.name] = calls.get(e.name, 0) + 1
    return sorted(((n, round(t, 1), calls[n]) for n, t in total.items()), key=lambda r: -r[1])


def kernels_item(out, args, device) -> None:
    """The kernels cuDNN runs for the padded layout in fp16 (a persistent kernel's name has "persist")."""
    from torch.profiler import ProfilerActivity, profile
    from asrtrain.model.blstm import build_model
    if device.type != "cuda":
        out("kernels", skipped="CUDA only: which cuDNN kernels the fp16 padded layout gets")
        return
    cfg = model_cfg(args)
    model = build_model(cfg).to(device).train()
    for utts in args.kernel_batches:
        h, lens = stack_inputs(cfg, utts, args.lo, args.hi, device)
        stack_step(model, h, lens, "padded", "fp16", device)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            stack_step(model, h, lens, "padded", "fp16", device)
            torch.cuda.synchronize()
        names = kernel_names(prof, device)
        rnn = [n for n in names if any(k in n[0].lower() for k in ("rnn", "lstm", "persist", "elemwise"))]
        out("kernels", layout="padded", precision="fp16", utts=utts,
            persistent=any("persist" in n[0].lower() for n in names), rnn_kernels=rnn[:12], top=names[:8],
            note="layer 1's input (120) is not a multiple of 128: only layers 2+ can qualify")


def profile_item(out, args, device, layout: str, precision: str) -> None:
    """torch.profiler over a few training steps at ``args.profile_utts`` utterances."""
    from torch.profiler import ProfilerActivity, profile
    from asrtrain.model.blstm import build_model
    from asrtrain.train.loop import compute_loss
    if precision != "fp32" and device.type != "cuda":
        out("profile", layout=layout, precision=precision, skipped="CUDA only")
        return
    cfg = replace(model_cfg(args), rnn_layout=layout)
    model = build_model(cfg).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    batch = synthetic_batch(cfg, args.profile_utts, args.lo, args.hi, device)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def step():
        loss, n = compute_loss(model, batch, "ctc", precision)
        opt.zero_grad(set_to_none=True)
        loss = loss / max(1, n)
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(2):
        step()
    sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        t0 = time.perf_counter()
        for _ in range(args.profile_steps):
            step()
        sync()
        wall_us = (time.perf_counter() - t0) * 1e6
    names = kernel_names(prof, device)
    total = sum(t for _, t, _ in names) or 1.0
    copy_like = sum(t for n, t, _ in names if any(k in n.lower() for k in COPY_LIKE))
    fields = dict(layout=layout, precision=precision, utts=args.profile_utts, steps=args.profile_steps,
                  wall_ms_per_step=round(wall_us / 1e3 / args.profile_steps, 2), top=names[:15],
                  copy_fill_index_share=round(copy_like / total, 4), kernels_distinct=len(names))
    if device.type == "cuda":
        spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                       if e.device_type == torch.autograd.DeviceType.CUDA)
        busy, end = 0.0, float("-inf")
        for s, e in spans:  # the union of kernel intervals
            if e > end:
                busy += e - max(s, end)
                end = e
        fields.update(gpu_busy_ms_per_step=round(busy / 1e3 / args.profile_steps, 2),
                      gpu_busy_over_wall=round(busy / wall_us, 4), kernel_launches=len(spans) // args.profile_steps)
    else:
        fields.update(skipped_gpu_fields="no CUDA: top lists CPU ops by self time")
    out("profile", **fields)


def grid_cell(out, args, device, layout: str, precision: str, utts: int) -> None:
    from asrtrain.model.blstm import build_model
    from asrtrain.model.flops import train_flops_per_frame
    why = skip_reason(precision, device)
    if why:
        out("grid", layout=layout, precision=precision, utts=utts, skipped=why)
        return
    cfg = model_cfg(args)
    torch.manual_seed(0)
    model = build_model(cfg).to(device).train()
    h, lens = stack_inputs(cfg, utts, args.lo, args.hi, device)
    frames = int(lens.sum())
    head = 3 * 2 * 2 * cfg.hidden * cfg.num_targets
    flops = (train_flops_per_frame(cfg).total - head) * frames
    audio = frames * cfg.subsample * 0.01
    try:
        times = []
        for r in range(args.warmup + args.reps):
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                stack_step(model, h, lens, layout, precision, device)
                end.record()
                end.synchronize()
                ms = start.elapsed_time(end)
            else:
                t0 = time.perf_counter()
                stack_step(model, h, lens, layout, precision, device)
                ms = (time.perf_counter() - t0) * 1e3
            if r >= args.warmup:
                times.append(ms)
    except torch.cuda.OutOfMemoryError:
        del h
        torch.cuda.empty_cache()
        out("grid", layout=layout, precision=precision, utts=utts, error="out of GPU memory")
        return
    ms = statistics.median(times)
    out("grid", layout=layout, precision=precision, utts=utts, frames_in=frames * cfg.subsample,
        median_ms=round(ms, 3), min_ms=round(min(times), 3), reps=len(times),
        audio_s_per_s=round(audio / (ms / 1e3), 1), tflop_s=round(flops / (ms / 1e3) / 1e12, 3),
        timer="cuda events" if device.type == "cuda" else "perf_counter (CPU)")


def loop_item(out, args, device, work: Path, name: str, sets: list) -> None:
    """The full training loop (bench_gpu.py's setup): audio-s/s of the last of ``args.loop_epochs``."""
    from bench_gpu import epoch_seconds, make_corpus
    from asrtrain.config import TokenizerConfig
    from asrtrain.distributed.base import Strategy
    from asrtrain.model.flops import train_flops
    from asrtrain.text.tokenizer import train_tokenizer
    from asrtrain.train.job import prepare_job
    from asrtrain.train.loop import run
    feats = work / "train"
    if not hasattr(args, "tokenizer"):  # one corpus and tokenizer for every loop run
        make_corpus(feats, args.loop_utts, 40)
        args.tokenizer = train_tokenizer(feats / "text", work / "tok",
                                         TokenizerConfig(model_type="word", vocab_size=args.targets))
    cfg = model_cfg(args)
    base = [f"train.epochs={args.loop_epochs}", "train.log_every_steps=1000", "train.average_last=1",
            f"model.num_layers={cfg.num_layers}", f"model.hidden={cfg.hidden}", "model.proj=0", "model.stack=3",
            "model.subsample=3", "model.dropout=0.1", "specaug.enabled=false", "train.sortagrad=false",
            f"train.device={device}"]
    job = prepare_job(Path(__file__).resolve().parent.parent / "recipes" / "synth" / "conf" / "train.yaml", [],
                      base + sets, feats, None, work / f"exp_{name}", args.tokenizer, None, False)
    run(0, 1, job, Strategy())
    seconds, steps = epoch_seconds(job.exp_dir)
    lengths = [int(line.split()[1]) for line in (feats / "utt2num_frames").read_text().splitlines()]
    audio = sum(lengths) * job.cfg.features.frame_shift / 1000.0
    sub = job.cfg.model.subsample
    flops = train_flops(job.cfg.model, sum(-(-n // sub) for n in lengths))
    out("loop", name=name, sets=sets, steps=steps, seconds=round(seconds, 3), audio_s=round(audio, 1),
        audio_s_per_s=round(audio / seconds, 1), tflop_s=round(flops / seconds / 1e12, 3))
    shutil.rmtree(job.exp_dir, ignore_errors=True)


LOOPS = [  # (name, overrides); today's first
    ("today_fp32", ["train.max_frames=64000", "train.max_utts=128", "train.precision=fp32"]),
    ("fixed128_fp32", ["train.max_frames=10000000", "train.max_utts=128", "train.precision=fp32"]),
    ("fixed128_fp32_packed_once", ["train.max_frames=10000000", "train.max_utts=128", "train.precision=fp32",
                                   "model.rnn_layout=packed_once"]),
    ("fixed128_fp16_padded", ["train.max_frames=10000000", "train.max_utts=128", "train.precision=fp16",
                              "model.rnn_layout=padded"]),
    ("today_bf16", ["train.max_frames=64000", "train.max_utts=128", "train.precision=bf16"]),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="JSON lines file, written as the run goes")
    ap.add_argument("--smoke", action="store_true", help="the CPU at tiny sizes (seconds): checks the script")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=360.0,
                    help="stop starting new grid cells and loop runs after this many seconds")
    ap.add_argument("--layouts", default="packed_per_layer,packed_once,padded")
    ap.add_argument("--precisions", default="tf32,fp16,bf16-rnn")
    ap.add_argument("--batches", default="128,256,512,64,1024", help="utterances; 128 first, then the loop")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--loops", default=",".join(n for n, _ in LOOPS))
    args = ap.parse_args()
    args.layers, args.hidden, args.targets = 6, 512, 500
    args.lo, args.hi = 500, 599  # input frames: one of the recipe's 100-frame length buckets
    args.warmup, args.profile_utts, args.profile_steps, args.kernel_batches = 3, 128, 3, [64, 128]
    args.loop_utts, args.loop_epochs = 2048, 2
    if args.smoke:
        args.device, args.layers, args.hidden, args.targets, args.lo, args.hi = "cpu", 2, 16, 50, 20, 40
        args.warmup, args.reps, args.profile_utts, args.profile_steps = 1, 2, 4, 1
        args.batches, args.loop_utts, args.loop_epochs = "4,8", 24, 1
        args.loops = "today_fp32,fixed128_fp32"
    logging.basicConfig(level=logging.ERROR)
    torch.manual_seed(0)
    from asrtrain.device import resolve_device
    from asrtrain.errors import AsrError
    try:
        device = resolve_device(args.device)
    except AsrError as e:
        raise SystemExit(f"gpu_profile: {e} (run --smoke on the CPU)")
    out = Writer(args.out)
    t0 = time.monotonic()
    layouts, precisions = args.layouts.split(","), args.precisions.split(",")
    batches = [int(b) for b in args.batches.split(",")]
    cells = [(lay, prec, b) for b in batches for prec in precisions for lay in layouts]
    first = [c for c in cells if c[2] == batches[0]]
    loops = [(n, s) for n, s in LOOPS if n in args.loops.split(",")]
    plan = ([("env", ()), ("kernels", ())]
            + [("profile", (lay, prec)) for lay, prec in (("auto", "fp32"), ("packed_once", "fp32"), ("padded", "fp16"))]
            + [("grid", c) for c in first] + [("loop", lp) for lp in loops]
            + [("grid", c) for c in cells if c not in first])
    work = Path(tempfile.mkdtemp(prefix="gpu_profile."))
    try:
        for i, (kind, what) in enumerate(plan):
            if kind in ("grid", "loop") and time.monotonic() - t0 > args.budget_s:
                out("budget", elapsed_s=round(time.monotonic() - t0, 1), budget_s=args.budget_s,
                    left=[[k, w if k == "grid" else w[0]] for k, w in plan[i:]])
                break
            try:
                if kind == "env":
                    env_item(out, device)
                elif kind == "kernels":
                    kernels_item(out, args, device)
                elif kind == "profile":
                    profile_item(out, args, device, *what)
                elif kind == "grid":
                    grid_cell(out, args, device, *what)
                else:
                    loop_item(out, args, device, work, *what)
            except Exception as e:  # one item's failure must not cost the others' measurements
                out(kind, what=what, error=f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
        else:
            out("done", elapsed_s=round(time.monotonic() - t0, 1), smoke=args.smoke)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
