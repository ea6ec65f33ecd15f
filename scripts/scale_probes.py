"""The two machine probes of ``scripts/bench_scale.py`` (issue 13), measured apart from its timed runs:
gloo's latency and bandwidth between 2 processes (:func:`measure_gloo`), and what oversubscribing the cores
costs the runs' own training step (:func:`measure_oversub`), free-running or meeting at a barrier every
step."""

from __future__ import annotations

import os
import time
from pathlib import Path

from asrtrain.simulate.model import Link


def _pingpong(rank: int, world: int, port: int, nbytes: int, q) -> None:
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    res = {}
    for size in (4, nbytes):
        buf = torch.zeros(max(1, size // 4))
        reps = 200 if size == 4 else 20
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            else:
                dist.recv(buf, 0)
                dist.send(buf, 0)
        res[size] = (time.perf_counter() - t0) / reps / 2  # one way
    if rank == 0:
        q.put(res)
    dist.destroy_process_group()


def measure_gloo(nbytes: int) -> Link:
    """Latency and bandwidth of one gloo message on this machine (2 processes, 127.0.0.1)."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=_pingpong, args=(r, 2, port, nbytes, q)) for r in range(2)]
    for p in procs:
        p.start()
    res = q.get(timeout=120)
    for p in procs:
        p.join()
    lat = res[4]
    bw = nbytes / max(1e-9, res[nbytes] - lat)
    print(f"gloo on this machine: latency {lat * 1e6:.0f} us, bandwidth {bw / 1e9:.2f} GB/s "
          f"({nbytes / 1e6:.1f} MB messages)")
    return Link(lat, bw)


def _oversub_worker(train_dir: str, tokenizer: str, sets: list, exp: str, seconds: float, barrier, q,
                    rank: int = 0, stop=None) -> None:
    """One process of :func:`measure_oversub`: the bench runs' own training step (their config and model,
    the corpus's batches collated from its features, the summed loss over its count, clipping, the
    optimizer step; no communication) on one torch thread, for ``seconds`` after every process is ready;
    puts (steps done, seconds they took). With ``stop`` (a shared flag) every step ends at ``barrier``, as
    the runs' learners meet at an all-reduce or an averaging round: rank 0 raises the flag before the
    barrier once ``seconds`` are up, and everyone leaves after the same step."""
    import torch
    from asrtrain.distributed.base import Strategy
    from asrtrain.features.dataset import AsrDataset
    from asrtrain.text.tokenizer import Tokenizer
    from asrtrain.train.batching import BatchSpec, learner_batches
    from asrtrain.train.job import prepare_job
    from asrtrain.train.loop import compute_loss, make_optimizer
    from asrtrain.model.blstm import build_model
    from bench_common import RECIPE
    torch.set_num_threads(1)
    job = prepare_job(RECIPE / "train.yaml", [], sets, Path(train_dir), None, Path(exp), Path(tokenizer),
                      None, False)
    cfg = job.cfg
    torch.manual_seed(cfg.train.seed)
    data = AsrDataset(Path(train_dir), cfg.model.subsample, Tokenizer(Path(tokenizer)))
    spec = BatchSpec(cfg.train.max_frames, cfg.train.max_utts, cfg.train.bucket_width, cfg.train.seed)
    batches = learner_batches(data.lengths, spec, 1, Strategy().partition())
    model = build_model(cfg.model)
    opt = make_optimizer(model, cfg)
    model.train()

    def step(i: int) -> None:
        loss, count = compute_loss(model, data.collate(batches[i % len(batches)]), cfg.model.loss)
        opt.zero_grad()
        (loss / max(1, count)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip)
        opt.step()

    for i in range(2):  # warm-up: allocations, first-call paths
        step(i)
    barrier.wait()
    t0 = time.perf_counter()
    done, last = 0, t0
    if stop is None:  # free-running
        while last - t0 < seconds:
            step(done)
            done, last = done + 1, time.perf_counter()
    else:  # every step ends at the barrier; rank 0 raises the flag before it once the time is up
        while not stop.value:
            step(done)
            if rank == 0 and time.perf_counter() - t0 >= seconds:
                stop.value = 1
            barrier.wait()
            done, last = done + 1, time.perf_counter()
    q.put((done, last - t0))


def measure_oversub(work: Path, corpus, sets: list, cores: int, seconds: float = 6.0,
                    sync: bool = False) -> float:
    """What oversubscribing this machine's cores costs (``Cluster.oversub_overhead``, c), measured apart
    from the timed runs: N = k, 2k and 4k processes (one torch thread each) run the runs' own training
    step (:func:`_oversub_worker`) at once for ``seconds``; the time per step of N processes over N / k
    times that of k is the slow-down the model reads as ``1 + c (N / k - 1)``
    (:func:`asrtrain.simulate.engine.fit_overhead`). With ``sync`` the processes meet at a barrier
    after every step (no communication otherwise), so each step costs its slowest process: what the
    scheduler's imbalance on oversubscribed cores costs learners that wait for each other, which a
    free-running probe averages away. Nothing else may run."""
    import torch.multiprocessing as mp
    from asrtrain.simulate.engine import fit_overhead
    ctx = mp.get_context("spawn")
    per_step = {}
    for n in (cores, 2 * cores, 4 * cores):
        q, barrier = ctx.Queue(), ctx.Barrier(n)
        stop = ctx.Value("i", 0) if sync else None
        exps = [str(work / "probe" / f"{'s' if sync else 'n'}{n}_{i}") for i in range(n)]
        procs = [ctx.Process(target=_oversub_worker, args=(str(corpus.train), str(corpus.tokenizer), sets,
                                                           exp, seconds, barrier, q, i, stop))
                 for i, exp in enumerate(exps)]
        for p in procs:
            p.start()
        res = [q.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        per_step[n] = n / sum(done / took for done, took in res)  # wall seconds per step, all together
    points = [(n / cores, per_step[n] / per_step[cores] / (n / cores)) for n in per_step]
    c = fit_overhead(points)
    print(f"oversubscription on this machine (the runs' training step, no communication, 1 thread per "
          f"process{', a barrier after every step' if sync else ''}): "
          + ", ".join(f"{n} processes {per_step[n] * 1000:.1f} ms a step together, slow-down {s:.3f}"
                      for n, (_, s) in zip(per_step, points))
          + f"; fitted c = {c:.3f} (a job's work x (1 + c (m / k - 1)) while m > k share k cores)",
          flush=True)
    return c
