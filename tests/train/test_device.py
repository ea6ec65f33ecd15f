"""Device and precision handling that does not need CUDA: device specs, bf16/fp16 autocast on the CPU,
checkpoints that cannot run code and carry a checksum, non-finite steps, the staging weights, and the
rendezvous socket. The CUDA side of the same paths is in tests/gpu (``pytest -m gpu``)."""

import os
import socket
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from asrtrain.cli import cli
from asrtrain.config.file import load_config
from asrtrain.device import ScaledStep, resolve_device
from asrtrain.errors import AsrError

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import one_error  # noqa: E402
from test_loop import data, params, train  # noqa: E402,F401 - the module fixture is shared


# -- devices ----------------------------------------------------------------------------------------

def test_device_specs():
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        assert resolve_device("auto") == torch.device("cpu")
        with pytest.raises(AsrError, match="CUDA is not available") as info:
            resolve_device("cuda")
        assert "\n" not in str(info.value) and "--device cpu" in str(info.value)
    with pytest.raises(AsrError, match="not one of auto, cpu, cuda, cuda:N"):
        load_config(None, ["train.device=gpu"])
    with pytest.raises(AsrError, match="train.precision"):
        load_config(None, ["train.precision=fp8"])
    assert load_config(None, ["train.device=cuda:1"]).train.device == "cuda:1"


def test_cuda_means_the_local_ranks_gpu_or_the_one_slurm_bound_to_the_task(monkeypatch):
    """(CUDA faked: only device objects are made.) Under torchrun every process sees the node's GPUs and
    takes cuda:LOCAL_RANK; under srun --gpus-per-task=1 each task sees one GPU, device 0, whatever its
    local rank; too few GPUs otherwise is one line naming what the process sees."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert resolve_device("cuda") == torch.device("cuda", 2)
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(AsrError, match="needs cuda:2 but this process sees 1 GPU") as info:
        resolve_device("cuda")
    assert "\n" not in str(info.value) and "--gpus-per-task=1" in str(info.value)
    monkeypatch.setenv("SLURM_PROCID", "6")
    assert resolve_device("cuda") == torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # two GPUs per task: LOCAL_RANK decides
    with pytest.raises(AsrError, match="needs cuda:2"):
        resolve_device("cuda")


def test_torchrun_inside_an_sbatch_job_does_not_take_the_slurm_one_gpu_rule(monkeypatch):
    """torchrun started in a Slurm job step (SLURM_PROCID set) on a process that sees one GPU: the learners
    share the node's GPUs, so local rank 1 is told it lacks cuda:1 (not put on cuda:0 beside rank 0)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(AsrError, match="needs cuda:1 but this process sees 1 GPU"):
        resolve_device("cuda")


def test_empty_or_bad_launcher_variables(monkeypatch):
    """LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE is empty when the job gave only --ntasks: unset, not a
    traceback; a value that is not a number is one line naming the variable."""
    from asrtrain.config import DistConfig
    from asrtrain.device import env_int, local_rank
    from asrtrain.distributed.factory import group_size

    monkeypatch.setenv("LOCAL_WORLD_SIZE", "")
    assert env_int("LOCAL_WORLD_SIZE", 0) == 0
    assert group_size(DistConfig(strategy="h-adpsgd", learners=4, learners_per_node=2), 4) == 2
    monkeypatch.setenv("LOCAL_RANK", " ")
    assert local_rank() == 0
    monkeypatch.setenv("LOCAL_RANK", "two")
    with pytest.raises(AsrError, match="environment variable LOCAL_RANK='two' is not an integer") as info:
        local_rank()
    assert "\n" not in str(info.value)


def test_backend_follows_the_device():
    from asrtrain.distributed.runtime.launch import resolve_backend

    assert resolve_backend("auto", torch.device("cpu")) == "gloo"
    assert resolve_backend("auto", torch.device("cuda", 0)) == "nccl"
    assert resolve_backend("auto", torch.device("cuda", 0), shared_gpu=True) == "gloo"  # 2 ranks, 1 GPU
    with pytest.raises(AsrError):
        resolve_backend("nccl", torch.device("cpu"))


def test_nccl_for_learners_sharing_one_gpu_is_refused_in_one_line(monkeypatch):
    from asrtrain.distributed.runtime.launch import resolve_backend
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    gpu = torch.device("cuda", 0)  # a device object only: nothing runs on it
    assert resolve_backend("auto", gpu, shared_gpu=True) == "gloo"
    assert resolve_backend("auto", gpu, shared_gpu=False) == "nccl"
    with pytest.raises(AsrError, match="share one GPU"):
        resolve_backend("nccl", gpu, shared_gpu=True)


def test_bf16_is_refused_on_a_gpu_without_native_bf16(monkeypatch):
    """torch's own check says yes where bf16 is only emulated (a V100, slower than fp32); ours asks for
    native support and refuses in one line naming the GPU. (CUDA faked: only the two queries.)"""
    from asrtrain.device import check_precision

    asked = []

    def supported(including_emulation=True):
        asked.append(including_emulation)
        return including_emulation  # emulated only
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-32GB")
    with pytest.raises(AsrError, match="Tesla V100-SXM2-32GB has no bf16 support") as err:
        check_precision("bf16", torch.device("cuda", 0))
    assert asked == [False] and "fp16" in err.value.render() and "\n" not in err.value.render()
    check_precision("fp16", torch.device("cuda", 0))  # fp16 (with its scaler) is fine there
    check_precision("bf16", torch.device("cpu"))  # and the CPU path never asks the GPU
    assert asked == [False]


def test_numpy_rng_state_restores_from_a_checkpoint_mapped_onto_a_gpu():
    """--resume loads a checkpoint with map_location=the learner's device, so on a GPU every tensor in it,
    numpy's generator state included, arrives in device memory, where .numpy() raises. Stand-in: a tensor
    that refuses .numpy() as a CUDA tensor does until it is copied to the host."""
    import numpy as np

    from asrtrain.train.checkpoint import rng_state, set_rng_state

    class OnGpu:
        def __init__(self, t):
            self.t = t

        def numpy(self):
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu()")

        def cpu(self):
            return self.t

    np.random.seed(3)
    state = rng_state()
    want = np.random.rand(4)
    state["numpy"][1] = OnGpu(state["numpy"][1])
    np.random.seed(99)
    set_rng_state(state)
    assert np.array_equal(np.random.rand(4), want)


def test_threads_come_from_the_learners_on_this_node(monkeypatch):
    from asrtrain.train.loop import threads_for

    cfg = load_config(None, [])
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert threads_for(cfg, 4) == 4
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")  # torchrun: 8 learners here, whatever dist.learners says
    assert threads_for(cfg, 1) == 2


# -- precision --------------------------------------------------------------------------------------

@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_on_the_cpu(data, tmp_path, precision):
    """Autocast runs on the CPU too; the loss stays fp32 and falls; fp16's scaler is checkpointed."""
    exp = tmp_path / precision
    r = train(data, exp, "--device", "cpu", "--precision", precision, "--set", "train.epochs=6",
              "--set", "train.lr=0.01")
    assert r.exit_code == 0, r.output
    ck = torch.load(exp / "checkpoints" / "epoch-0006.rank0.pt", weights_only=True)
    hist = ck["history"]
    assert hist[-1]["train_loss"] < 0.7 * hist[0]["train_loss"], hist
    assert all(t.dtype == torch.float32 for t in params(exp / "final.pt").values())  # fp32 master weights
    assert ("scaler" in ck) == (precision == "fp16")
    if precision == "fp16":
        assert ck["scaler"]["scale"] > 0


# -- checkpoints ------------------------------------------------------------------------------------

class _Payload:
    """Unpickling this runs a command that creates a marker file: what a malicious checkpoint does."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_no_command_runs_a_pickle_payload(data, tmp_path):
    exp = tmp_path / "exp"
    assert train(data, exp, "--set", "train.epochs=1").exit_code == 0
    tr, dev, _ = data
    marker = tmp_path / "pwned"
    evil = {"model": _Payload(marker), "avg_model": _Payload(marker)}
    torch.save(evil, exp / "final.pt")
    (exp / "final.pt.sha256").unlink()
    ck = exp / "checkpoints" / "epoch-0001.rank0.pt"
    torch.save(dict(evil, step=1, epoch=1, batch_index=0, optimizer={}, rng={}), ck)
    (exp / "checkpoints" / "epoch-0001.rank0.pt.sha256").unlink()
    runner = CliRunner()
    calls = [["decode", exp, dev, tmp_path / "d"], ["decode", exp, dev, tmp_path / "d2", "--checkpoint", ck],
             ["forward", exp, dev, tmp_path / "f.ark"], ["average", exp, "--last", "1", "--out", tmp_path / "a.pt"]]
    for call in calls:
        line = one_error(runner.invoke(cli, [str(a) for a in call]))
        assert "refused to load" in line and "pickle" in line, line
    # (a finished run's --resume loads nothing: extend it, so the checkpoint is read)
    r = train(data, exp, "--set", "train.epochs=2", "--resume")
    assert r.exit_code == 1 and "refused to load" in r.output and "Traceback" not in r.output
    assert not marker.exists()


def test_a_corrupt_checkpoint_is_named_not_resumed(data, tmp_path):
    exp = tmp_path / "exp"
    assert train(data, exp, "--set", "train.epochs=2").exit_code == 0
    ck = exp / "checkpoints" / "epoch-0002.rank0.pt"
    blob = bytearray(ck.read_bytes())
    for i in range(len(blob) // 2, len(blob) // 2 + 400):  # flip 400 bytes in the middle
        blob[i] ^= 0xFF
    ck.write_bytes(bytes(blob))
    r = train(data, exp, "--set", "train.epochs=3", "--resume")  # extended: the finished run is read on
    assert r.exit_code == 1 and "checksum mismatch" in r.output and "epoch-0002.rank0.pt" in r.output


def test_resume_without_latest_is_an_error_and_restart_starts_over(data, tmp_path):
    exp = tmp_path / "exp"
    assert train(data, exp, "--set", "train.epochs=1").exit_code == 0
    (exp / "checkpoints" / "latest").unlink()
    r = train(data, exp, "--set", "train.epochs=1", "--resume")
    assert r.exit_code == 1 and "latest is missing" in r.output and "--restart" in r.output
    r = train(data, exp)  # a fresh run must not overwrite them either
    assert r.exit_code == 1 and "already holds a training run" in r.output
    (exp / "checkpoints" / ".epoch-0001.rank0.pt.abc.tmp").write_bytes(b"half")
    r = train(data, exp, "--set", "train.epochs=1", "--restart")
    assert r.exit_code == 0, r.output
    assert not list((exp / "checkpoints").glob(".*.tmp"))
    assert (exp / "checkpoints" / "latest").read_text().strip() == "epoch-0001"


def test_epoch_checkpoints_are_pruned_but_averaging_keeps_its_own(data, tmp_path):
    exp = tmp_path / "exp"
    r = train(data, exp, "--set", "train.epochs=5", "--set", "train.keep_checkpoints=1",
              "--set", "train.average_last=2")
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in (exp / "checkpoints").glob("epoch-*.pt"))
    assert names == ["epoch-0004.rank0.pt", "epoch-0005.rank0.pt"]


# -- non-finite numbers -----------------------------------------------------------------------------

def test_non_finite_steps_are_skipped_counted_and_stop_training():
    from asrtrain.distributed.base import Strategy
    from asrtrain.train.loop import step_or_skip
    from asrtrain.train.state import Learner

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    learner = Learner(model, model, opt, ScaledStep(opt, None), torch.device("cpu"), "fp32")
    t = load_config(None, ["train.max_bad_steps=3"]).train
    before = model.weight.detach().clone()
    for k in range(2):
        model.weight.grad = torch.full_like(model.weight, float("nan"))
        model.bias.grad = torch.zeros_like(model.bias)
        assert step_or_skip(learner, Strategy(), torch.tensor(1.0), t, k) is None
    assert torch.equal(model.weight, before) and learner.bad_steps == 2  # nothing reached the weights
    model.weight.grad = torch.ones_like(model.weight)
    model.bias.grad = torch.zeros_like(model.bias)
    assert step_or_skip(learner, Strategy(), torch.tensor(2.0), t, 2) == 2.0
    assert learner.bad_steps == 0 and not torch.equal(model.weight, before)
    with pytest.raises(AsrError, match="3 steps in a row had a non-finite loss"):
        for k in range(3):
            step_or_skip(learner, Strategy(), torch.tensor(float("inf")), t, 3 + k)


def test_in_a_sync_group_the_reduced_gradients_alone_decide_the_skip():
    """SSGD / H-ADPSGD members hold the same all-reduced gradients: one member's own non-finite loss must
    not make it skip a step the others take (the replicas would part). Its loss is not counted."""
    from asrtrain.config import DistConfig
    from asrtrain.distributed.base import Strategy
    from asrtrain.distributed.factory import make_strategy
    from asrtrain.train.loop import step_or_skip
    from asrtrain.train.state import Learner

    def shares_of(name):
        return make_strategy(DistConfig(strategy=name, learners=4, learners_per_node=2), 0, 4).shares_gradients()

    shares = {name: shares_of(name) for name in ("ssgd", "h-adpsgd", "adpsgd", "periodic")}
    assert shares == {"ssgd": True, "h-adpsgd": True, "adpsgd": False, "periodic": False}

    class Member(Strategy):
        def shares_gradients(self):
            return True

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    learner = Learner(model, model, opt, ScaledStep(opt, None), torch.device("cpu"), "fp32")
    t = load_config(None, []).train
    for strategy, steps in ((Strategy(), False), (Member(), True)):
        before = model.weight.detach().clone()
        model.weight.grad = torch.ones_like(model.weight)
        model.bias.grad = torch.zeros_like(model.bias)
        assert step_or_skip(learner, strategy, torch.tensor(float("nan")), t, 0) is None
        assert (not torch.equal(model.weight, before)) == steps
    assert learner.bad_steps == 0
    model.weight.grad = torch.full_like(model.weight, float("inf"))  # the group's gradients: all skip
    before = model.weight.detach().clone()
    assert step_or_skip(learner, Member(), torch.tensor(1.0), t, 1) is None
    assert torch.equal(model.weight, before) and learner.bad_steps == 1


@pytest.mark.parametrize("scale", [0.01, 100.0])
def test_clipping_matches_torch_clip_grad_norm(scale):
    """step_or_skip scales the gradients only when their norm exceeds train.grad_clip; the update is
    torch's clip_grad_norm_ either way, to the bit."""
    from asrtrain.distributed.base import Strategy
    from asrtrain.train.loop import step_or_skip
    from asrtrain.train.state import Learner

    t = load_config(None, ["train.grad_clip=5.0"]).train
    g = torch.Generator().manual_seed(0)
    models = [torch.nn.Linear(4, 3) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    grads = [torch.randn(p.shape, generator=g) * scale for p in models[0].parameters()]
    for m in models:
        for p, gr in zip(m.parameters(), grads):
            p.grad = gr.clone()
    ref = torch.optim.SGD(models[1].parameters(), lr=0.1)
    torch.nn.utils.clip_grad_norm_(list(models[1].parameters()), 5.0)
    ref.step()
    opt = torch.optim.SGD(models[0].parameters(), lr=0.1)
    learner = Learner(models[0], models[0], opt, ScaledStep(opt, None), torch.device("cpu"), "fp32")
    assert step_or_skip(learner, Strategy(), torch.tensor(1.0), t, 0) == 1.0
    norm = torch.nn.utils.get_total_norm([p.grad for p in models[0].parameters()])
    assert float(norm) <= 5.0 + 1e-4
    if scale < 1:  # under the bound: the gradients are untouched
        assert all(torch.equal(p.grad, gr) for p, gr in zip(models[0].parameters(), grads))
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        assert torch.equal(a, b)


def test_a_non_finite_final_model_is_never_written(tmp_path):
    from types import SimpleNamespace

    from asrtrain.train.loop import write_final

    job = SimpleNamespace(cfg=load_config(None, ["train.average_last=1"]), exp_dir=tmp_path)
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    with pytest.raises(AsrError, match="non-finite weights"):
        write_final(job, model)
    assert not (tmp_path / "final.pt").exists()


# -- ADPSGD state, staging and the rendezvous ------------------------------------------------------

@pytest.mark.parametrize("kind", ["host", "staged"])
def test_pending_averaging_survives_a_checkpoint(kind, monkeypatch):
    """What landed but is not folded is saved with the strategy state: x + D is kept exactly."""
    from asrtrain.distributed import gossip as comm, gossip_weights as weights

    if kind == "staged":
        monkeypatch.setattr(comm, "make_weights", weights.DeviceWeights)
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(4))]
    g = comm.Gossip(params, [0, 1], 0, group=None)
    g.stage()
    msg, step = g._snapshot()
    g._write_back(msg[:-1], msg[:-1] + torch.randn(msg.numel() - 1), step)
    eff = g.effective()
    state = g.pending_state()
    fresh = [torch.nn.Parameter(p.detach().clone()) for p in params]
    g2 = comm.Gossip(fresh, [0, 1], 0, group=None)
    g2.load_pending_state(state)
    assert torch.equal(g2.effective(), eff)
    assert g2.fold()
    torch.testing.assert_close(g2.effective(), eff, rtol=0, atol=1e-12)


def test_staged_snapshots_never_overwrite_the_claimed_buffer():
    from asrtrain.distributed.gossip_weights import DeviceWeights

    p = torch.nn.Parameter(torch.zeros(4))
    w = DeviceWeights([p])
    with torch.no_grad():
        p.fill_(1.0)
    w.stage()
    w.claim()  # the thread holds the snapshot of 1s ...
    with torch.no_grad():
        p.fill_(2.0)
    w.stage()
    w.stage()  # ... while the main thread stages twice more
    out = torch.empty(4)
    w.wait_claimed()
    w.snapshot_into(out)
    assert torch.equal(out, torch.ones(4))
    w.claim()
    w.snapshot_into(out)
    assert torch.equal(out, torch.full((4,), 2.0))


def test_a_fold_between_claim_and_read_is_not_left_out_of_the_snapshot(monkeypatch):
    """The gossip thread claims a staged copy, waits for it without the lock, then reads copy + D. A fold
    in that gap moves D into the weights after the copy was taken and zeroes D: the thread must read
    a copy taken after the fold, so the pair still averages x + D (what the learner holds)."""
    from asrtrain.distributed import gossip as comm, gossip_weights as weights

    monkeypatch.setattr(comm, "make_weights", weights.DeviceWeights)  # the GPU path's staging, on the CPU
    p = torch.nn.Parameter(torch.ones(4))
    g = comm.Gossip([p], [0, 1], 0, None)
    g.stage()
    with g.locked():
        g.weights.delta += 0.5  # an averaging that landed and is not folded yet
        g._pending = True
    wait = g.weights.wait_claimed
    folds = []

    def wait_then_fold():  # the main thread reaches a step boundary while the thread waits
        wait()
        if not folds:
            folds.append(g.fold())

    monkeypatch.setattr(g.weights, "wait_claimed", wait_then_fold)
    msg, _ = g._snapshot()
    assert folds == [True] and torch.equal(p.detach(), torch.full((4,), 1.5))
    assert torch.equal(msg[:-1], torch.full((4,), 1.5))


def _listening_addresses(port: int):
    """Local addresses with a listening TCP socket on ``port`` (from /proc/net/tcp and tcp6)."""
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(name):
            continue
        for line in open(name).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.rsplit(":", 1)
            if int(p, 16) == port and state == "0A":  # LISTEN
                found.append(addr)
    return found


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc/net/tcp")
def test_local_rendezvous_listens_on_loopback_only():
    import datetime

    from asrtrain.distributed.runtime.launch import local_store

    store = local_store(datetime.timedelta(seconds=5))
    try:
        addrs = _listening_addresses(store.port)
        assert addrs == ["0100007F"], addrs  # 127.0.0.1, nothing on 0.0.0.0 or ::
        client = socket.create_connection(("127.0.0.1", store.port), timeout=5)
        client.close()
    finally:
        del store


def test_spawned_learners_sockets_stay_on_loopback_unless_the_user_chose():
    from asrtrain.distributed.runtime.launch import keep_sockets_on_loopback, loopback_interface

    lo = loopback_interface()
    assert lo in [name for _, name in socket.if_nameindex()]
    env = {}
    keep_sockets_on_loopback(env)
    assert env == {"GLOO_SOCKET_IFNAME": lo, "NCCL_SOCKET_IFNAME": lo}
    env = {"NCCL_SOCKET_IFNAME": "ib0"}
    keep_sockets_on_loopback(env)
    assert env == {"GLOO_SOCKET_IFNAME": lo, "NCCL_SOCKET_IFNAME": "ib0"}


def test_prefetch_thread_binds_the_learners_gpu_before_it_pins(tmp_path, monkeypatch):
    """A new thread starts on GPU 0: the prefetch thread must make the learner's GPU current before it
    pins a batch, or every learner of a node opens a context on GPU 0. (CUDA faked: set_device and pin
    are recorded with the thread that called them.) On the CPU nothing is bound and nothing pinned."""
    import threading

    from featfix import make_feat_dir
    from asrtrain.features.dataset import AsrDataset, Batch, prefetch

    calls = []

    def note(what):
        calls.append((threading.current_thread().name, what))

    monkeypatch.setattr(torch.cuda, "set_device", lambda d: note(str(d)))
    monkeypatch.setattr(Batch, "pin", lambda self: note("pin") or self)
    ds = AsrDataset(make_feat_dir(tmp_path / "f", 6), 1)
    batches = [[u] for u in sorted(ds.lengths)[:3]]
    assert len(list(prefetch(ds, batches, depth=2, device=torch.device("cpu")))) == 3
    assert calls == []
    assert len(list(prefetch(ds, batches, depth=2, device=torch.device("cuda", 1)))) == 3
    assert calls == [("prefetch", "cuda:1")] + [("prefetch", "pin")] * 3
