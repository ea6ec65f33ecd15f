"""Issue 58/10: ``dist.backend = auto`` is decided once for the job (learner rank 0) and adopted by every
learner through the rendezvous store, so nodes that differ (one sees a GPU, one does not) never mix NCCL
and gloo ranks in one default group: they agree, or every learner stops with one line naming the learner
that cannot follow rank 0's choice."""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import threading

import pytest
import torch
import torch.distributed as dist

from asrtrain.distributed.runtime import backend as be
from asrtrain.errors import AsrError

TMO = datetime.timedelta(seconds=20)


def _agree_on_threads(devices, wanted="auto"):
    """Two learners in threads of this process, each with its own client of one real TCPStore; returns
    each learner's backend or its AsrError."""
    server = dist.TCPStore("127.0.0.1", 0, None, True, timeout=TMO, wait_for_workers=False)
    out = [None, None]

    def learner(rank):
        store = dist.TCPStore("127.0.0.1", server.port, None, False, timeout=TMO)
        try:
            out[rank] = be.agree_backend(store, rank, 2, wanted, devices[rank], False, TMO,
                                         host=f"node{rank}")
        except AsrError as err:
            out[rank] = err

    threads = [threading.Thread(target=learner, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_a_learner_that_cannot_follow_rank0s_nccl_stops_every_learner_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    out = _agree_on_threads([torch.device("cuda", 0), torch.device("cpu")])
    assert all(isinstance(o, AsrError) for o in out), out
    assert out[0].render() == out[1].render()  # the same line on every learner
    line = out[0].render()
    assert "\n" not in line and "rank 1 (host node1)" in line and "dist.backend=gloo" in line, line


def test_rank0s_gloo_is_adopted_by_a_learner_that_would_choose_nccl(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert _agree_on_threads([torch.device("cpu"), torch.device("cuda", 0)]) == ["gloo", "gloo"]
    assert _agree_on_threads([torch.device("cuda", 0), torch.device("cuda", 1)]) == ["nccl", "nccl"]


def test_rank0_that_cannot_resolve_the_backend_stops_the_others_too():
    out = _agree_on_threads([torch.device("cpu"), torch.device("cpu")], wanted="nccl")
    assert all(isinstance(o, AsrError) for o in out), out
    assert "learner rank 0 could not resolve dist.backend=nccl" in out[1].render()


# Two srun-style learner processes (RANK, WORLD_SIZE, MASTER_ADDR ... exported, rank 0 hosts the store);
# FAKE_CUDA=1 makes one of them "see" a GPU (torch.cuda answers as on a one-GPU node).
LEARNER = r'''
import os, sys
import torch
if os.environ.get("FAKE_CUDA") == "1":
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.set_device = lambda device: None
import torch.distributed as dist
from asrtrain.distributed.runtime.launch import run_learners
from asrtrain.errors import AsrError


def record(rank, world_size, out):
    total = torch.ones(1)
    dist.all_reduce(total)
    with open(os.path.join(out, f"rank{rank}.txt"), "w") as f:
        f.write(f"{dist.get_backend()} {int(total.item())}")


try:
    run_learners(record, sys.argv[1], learners=2, backend="auto", device="auto", timeout_s=30)
except AsrError as err:
    sys.stderr.write(f"asrtrain: error: {err.render()}\n")
    sys.exit(1)
'''


def _run_pair(tmp_path, fake_rank: int):
    script = tmp_path / "learner.py"
    script.write_text(LEARNER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in (0, 1):
        drop = ("GLOO_SOCKET_IFNAME", "TORCHELASTIC_USE_AGENT_STORE")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        # two one-learner "nodes": each LOCAL_RANK 0, so the one that sees CUDA takes cuda:0
        env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
                   FAKE_CUDA="1" if rank == fake_rank else "0")
        procs.append(subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p.returncode, err) for p, (_, err) in zip(procs, outs)]


@pytest.mark.slow
def test_a_node_without_cuda_refuses_rank0s_nccl_in_one_line(tmp_path):
    """Rank 0 sees a GPU (auto -> nccl), rank 1 does not: both stop, each with one line naming rank 1 and
    the fix, no traceback, and no process group is made (before, rank 0 made an NCCL group and rank 1 a
    gloo one)."""
    for code, err in _run_pair(tmp_path, fake_rank=0):
        assert code == 1, err[-3000:]
        lines = [ln for ln in err.splitlines() if ln.startswith("asrtrain: error:")]
        assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
        assert "rank 1 (host" in lines[0] and "CUDA is not available" in lines[0], lines[0]
        assert "dist.backend=gloo" in lines[0], lines[0]
    assert not list(tmp_path.glob("rank*.txt"))


@pytest.mark.slow
def test_a_node_with_cuda_adopts_rank0s_gloo(tmp_path):
    """Rank 1 sees a GPU (auto alone would say nccl), rank 0 does not: both make a gloo group and run."""
    for code, err in _run_pair(tmp_path, fake_rank=1):
        assert code == 0, err[-3000:]
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)] == ["gloo 2", "gloo 2"]
