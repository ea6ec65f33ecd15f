"""Every strategy under the real torchrun, as a cluster user starts it: one node, and two nodes on
this machine (two torchrun agents meeting at a c10d rendezvous on 127.0.0.1); and SSGD as srun starts
it (plain processes with RANK, WORLD_SIZE, MASTER_ADDR ... exported, no agent).

Under torchrun each process runs the whole ``asrtrain train`` command and joins the launcher's group
instead of spawning learners. What must hold there, beside the job finishing: config.yaml records the
learners that ran (WORLD_SIZE, not the default 1), one process per node writes the job files, SSGD's
learners stay identical, and with two nodes H-ADPSGD's super-learners are the nodes (LOCAL_WORLD_SIZE):
identical inside a node, apart across nodes. Each run takes 5-10 s (the processes import torch).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers.featfix import make_task

pytestmark = pytest.mark.slow  # torchrun subprocesses

TASK = ["model.num_layers=1", "model.hidden=32", "model.subsample=2", "model.dropout=0.0",
        "train.max_frames=1500", "train.max_utts=4", "train.warmup_steps=4", "train.lr=0.02",
        "train.epochs=2", "train.average_last=1", "specaug.enabled=false", "dist.timeout_s=60"]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return make_task(tmp_path_factory.mktemp("torchrun"), 96, 30)


def env(force_lo: bool = True) -> dict:
    """The test's environment; ``force_lo=False`` leaves gloo's interface to asrtrain (issue 58/1: the
    route to MASTER_ADDR), as on a cluster where nobody set GLOO_SOCKET_IFNAME."""
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME")
    e = {k: v for k, v in os.environ.items() if k not in drop}
    e.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if force_lo:
        e["GLOO_SOCKET_IFNAME"] = "lo"
    return e


def train_cmd(task, exp: Path, launcher: list, *args: str) -> list:
    train, dev, tok = task
    cmd = [sys.executable, "-m", "torch.distributed.run", *launcher, "-m", "asrtrain", "train",
           "--train-data", str(train), "--dev-data", str(dev), "--tokenizer", str(tok), "--exp-dir", str(exp),
           *args]
    for s in TASK:
        cmd += ["--set", s]
    return cmd


def one_node(task, exp: Path, procs: int, *args: str) -> subprocess.CompletedProcess:
    launcher = ["--standalone", "--nnodes", "1", "--nproc-per-node", str(procs)]
    return subprocess.run(train_cmd(task, exp, launcher, *args), env=env(), capture_output=True, text=True,
                          timeout=300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def weights(exp: Path, rank: int, epoch: int = 2) -> dict:
    return torch.load(exp / "checkpoints" / f"epoch-{epoch:04d}.rank{rank}.pt", weights_only=True)["model"]


def same(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def finished(r: subprocess.CompletedProcess, exp: Path, learners: int) -> None:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert (exp / "final.pt").is_file()
    # The exp dir describes the job that ran, and the final path is printed once, by rank 0.
    assert yaml.safe_load((exp / "config.yaml").read_text())["dist"]["learners"] == learners
    assert r.stdout.count(str(exp / "final.pt")) == 1, r.stdout
    for rank in range(learners):
        assert (exp / "checkpoints" / f"epoch-0002.rank{rank}.pt").is_file()


@pytest.mark.parametrize("name,args", [
    ("ssgd", ["--strategy", "ssgd"]),
    ("adpsgd", ["--strategy", "adpsgd", "--averaging", "random"]),
    ("periodic", ["--strategy", "periodic", "--period", "adaptive"]),
    ("adpsgd-dp", ["--strategy", "adpsgd", "--dp", "--set", "dp.noise_multiplier=0.5", "--set", "dp.delta=1e-3"]),
])
def test_one_node_under_torchrun(task, tmp_path, name, args):
    exp = tmp_path / name
    r = one_node(task, exp, 2, *args)
    finished(r, exp, 2)
    log = (exp / "train.log").read_text()
    assert f"layout: {args[1]}: 2 learners" in log or f"layout: {args[1]}: 2 learner(s)" in log, log
    if name == "ssgd":  # one update on every learner
        assert same(weights(exp, 0), weights(exp, 1))
    if name == "adpsgd-dp":  # each learner accounts for its own epsilon, every epoch
        for rank in (0, 1):
            assert f"[learner {rank}] epoch 2 dp: epsilon" in log, log


def test_two_nodes_hadpsgd_super_learners_are_the_nodes(task, tmp_path):
    exp = tmp_path / "h2"
    port = free_port()
    launcher = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "asrtrain-test"]
    cmd = train_cmd(task, exp, launcher, "--strategy", "h-adpsgd")  # group size from LOCAL_WORLD_SIZE
    nodes = [subprocess.Popen(cmd, env=env(force_lo=False), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in nodes]
    for p, (out, err) in zip(nodes, outs):
        assert p.returncode == 0, out[-3000:] + err[-3000:]
    assert sum(out.count(str(exp / "final.pt")) for out, _ in outs) == 1
    assert yaml.safe_load((exp / "config.yaml").read_text())["dist"]["learners"] == 4
    assert "4 learners in 2 groups of 2 (ranks 0-1, 2-3)" in (exp / "train.log").read_text()
    w = [weights(exp, r) for r in range(4)]
    assert same(w[0], w[1]) and same(w[2], w[3])  # a super-learner steps as one
    assert not same(w[0], w[2])  # two super-learners gossip; they are not one model


def test_as_slurm_starts_it_env_rendezvous_without_an_agent(task, tmp_path):
    """srun starts one plain process per learner with the variables exported (README's Slurm line): no
    torchrun agent, so learner rank 0 hosts the store that the heartbeats use too."""
    exp = tmp_path / "srun"
    port = free_port()
    cmd = train_cmd(task, exp, [], "--strategy", "ssgd")
    cmd = [cmd[0]] + cmd[cmd.index("-m", 3):]  # python -m asrtrain train ..., no launcher
    procs = []
    for rank in range(2):
        e = env(force_lo=False)
        e.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        e.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        procs.append(subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out[-3000:] + err[-3000:]
    assert sum(out.count(str(exp / "final.pt")) for out, _ in outs) == 1
    assert yaml.safe_load((exp / "config.yaml").read_text())["dist"]["learners"] == 2
    assert same(weights(exp, 0), weights(exp, 1))


def test_odd_adpsgd_ring_under_torchrun_is_refused_in_one_line(task, tmp_path):
    r = one_node(task, tmp_path / "odd", 3, "--strategy", "adpsgd")
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("asrtrain: error:")]
    assert lines and all("3" in ln for ln in lines), r.stderr[-3000:]
    assert not (tmp_path / "odd" / "checkpoints").exists()


def test_under_a_launcher_only_local_rank_0_writes_the_job_files(task, tmp_path, monkeypatch):
    """Every process of a node runs prepare_job; one writes (and --restart removes), so they never race."""
    from asrtrain.errors import AsrError
    from asrtrain.train.job import prepare_job

    train, dev, tok = task
    exp = tmp_path / "exp"
    (exp / "checkpoints").mkdir(parents=True)
    (exp / "checkpoints" / "epoch-0001.rank0.pt").write_bytes(b"old")
    for k, v in dict(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500").items():
        monkeypatch.setenv(k, v)

    def prepare(*sets):
        return prepare_job(None, [], list(TASK) + list(sets), train, dev, exp, tok, None, False, restart=True)

    job = prepare()  # local rank 1: neither removes nor writes, and does not refuse the old checkpoint
    assert job.cfg.dist.learners == 2
    assert (exp / "checkpoints" / "epoch-0001.rank0.pt").exists() and not (exp / "config.yaml").exists()
    monkeypatch.setenv("LOCAL_RANK", "0")
    prepare()
    assert not (exp / "checkpoints").exists()
    assert yaml.safe_load((exp / "config.yaml").read_text())["dist"]["learners"] == 2
    assert (exp / "tokenizer.model").is_file()
    with pytest.raises(AsrError, match="WORLD_SIZE=2"):
        prepare("dist.learners=3")


def test_resume_refuses_learners_that_found_different_checkpoints():
    """A node that cannot see rank 0's checkpoint files (no shared file system) finds none and would start
    over while the others continue: every learner is refused in one line instead."""
    from asrtrain.errors import AsrError
    from asrtrain.train.resume import check_resumed_together
    from asrtrain.train.state import LearnerState

    class TwoLearners:  # this learner plus one other, whose (found, epoch, epoch^2) is ``other``
        world_size = 2

        def __init__(self, other):
            self.other = torch.tensor(other, dtype=torch.float64)

        def all_reduce_sum(self, v):
            return v + self.other

    resumed = LearnerState(step=300, epoch=3)
    check_resumed_together(TwoLearners([1, 3, 9]), resumed, Path("exp"))  # both at epoch 3
    check_resumed_together(TwoLearners([0, 0, 0]), LearnerState(), Path("exp"))  # neither found one
    with pytest.raises(AsrError, match="found different checkpoints"):
        check_resumed_together(TwoLearners([0, 0, 0]), resumed, Path("exp"))
    with pytest.raises(AsrError, match="found different checkpoints"):
        check_resumed_together(TwoLearners([1, 2, 4]), resumed, Path("exp"))


KILL_ONCE = '''
import os, signal
if os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0" and os.environ.get("RANK") == "1":
    _replace = os.replace
    def _kill_before_epoch2(src, dst, *a, **k):
        if str(dst).endswith("epoch-0002.rank1.pt"):  # latest names epoch-0001 by now
            os.kill(os.getpid(), signal.SIGKILL)
        return _replace(src, dst, *a, **k)
    os.replace = _kill_before_epoch2
'''


@pytest.mark.slow
def test_max_restarts_carries_the_job_through_a_killed_worker(task, tmp_path):
    """Issue 58/3: torchrun --max-restarts 1, --resume, rank 1 killed once before its epoch-2 checkpoint:
    the restarted attempt reads its own store keys (not the first attempt's verdict or gloo addresses),
    resumes from epoch 1 and finishes."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_ONCE)
    exp = tmp_path / "restart"
    launcher = ["--standalone", "--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "1"]
    e = env()
    e["PYTHONPATH"] = os.pathsep.join([str(hook), e.get("PYTHONPATH", "")])
    r = subprocess.run(train_cmd(task, exp, launcher, "--strategy", "ssgd", "--resume"), env=e,
                       capture_output=True, text=True, timeout=300)
    finished(r, exp, 2)
    assert "exitcode: -9" in r.stderr, r.stderr[-3000:]  # the kill happened, and the attempt after it
    assert "resumed from epoch-0001" in r.stderr, r.stderr[-3000:]


KILL_ONCE_FREEZE_PEER = '''
import os, signal, sys, threading, time
_dir = os.environ["ASRTRAIN_TEST_MARKERS"]


def _once(name):
    try:
        os.close(os.open(os.path.join(_dir, name), os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


if os.environ.get("RANK") == "1":
    _replace = os.replace
    def _kill_before_epoch2(src, dst, *a, **k):
        if str(dst).endswith("epoch-0002.rank1.pt") and _once("killed"):
            os.kill(os.getpid(), signal.SIGKILL)
        return _replace(src, dst, *a, **k)
    os.replace = _kill_before_epoch2
elif os.environ.get("RANK") == "0" and os.environ.get("TORCHELASTIC_RUN_ID") and _once("watching"):
    def _freeze_when_the_peer_dies():
        while not os.path.exists(os.path.join(_dir, "killed")):
            time.sleep(0.05)
        sys.setswitchinterval(1e6)  # keep the interpreter lock: the main thread and the watch stop
        while True:
            pass
    threading.Thread(target=_freeze_when_the_peer_dies, daemon=True).start()
'''


@pytest.mark.slow
def test_max_restarts_on_two_nodes_carries_the_job_through_a_killed_worker(task, tmp_path):
    """Issue 58/3 across two torchrun agents (c10d rendezvous on 127.0.0.1, one learner each). Rank 1 is
    killed once before its epoch-2 checkpoint; rank 0 freezes then, as a learner waiting in an NCCL
    collective does, so its agent restarts it for the membership change, which does not count as a
    restart: the two nodes' TORCHELASTIC_RESTART_COUNT differ (1 and 0). The restarted learners must still
    meet in one namespace of the agent's store, resume from epoch 1 and finish (keyed by the restart count
    they hung until the timeout)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_ONCE_FREEZE_PEER)
    exp = tmp_path / "restart2"
    port = free_port()
    launcher = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--max-restarts", "1",
                "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "asrtrain-restart"]
    e = env()
    e["PYTHONPATH"] = os.pathsep.join([str(hook), e.get("PYTHONPATH", "")])
    e.update(ASRTRAIN_TEST_MARKERS=str(tmp_path), LOGLEVEL="INFO")  # INFO: the agents say why they restart
    cmd = train_cmd(task, exp, launcher, "--strategy", "ssgd", "--resume")
    logs = [(tmp_path / f"node{k}.out", tmp_path / f"node{k}.err") for k in range(2)]
    nodes = []
    for out, err in logs:
        with open(out, "w") as o, open(err, "w") as r:
            nodes.append(subprocess.Popen(cmd, env=e, stdout=o, stderr=r, start_new_session=True))
    try:
        codes = [p.wait(timeout=240) for p in nodes]
    except subprocess.TimeoutExpired:
        codes = None
    finally:
        for p in nodes:  # SIGTERM: the agent stops its workers (killed, it would leave them running)
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
    outs = [(out.read_text(), err.read_text()) for out, err in logs]
    err = "".join(e_ for _, e_ in outs)
    assert codes == [0, 0], f"exit codes {codes}: " + err[-6000:]
    assert (tmp_path / "killed").exists() and "exitcode: -9" in err, err[-3000:]
    assert err.count("resumed from epoch-0001") == 2, err[-3000:]
    assert "new nodes" in err or "membership" in err, err[-3000:]  # the healthy node's agent restarted it
    assert sum(out.count(str(exp / "final.pt")) for out, _ in outs) == 1
    assert same(weights(exp, 0), weights(exp, 1))
