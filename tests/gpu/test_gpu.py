"""CUDA checks (``pytest -m gpu``): they skip, saying why, where CUDA is missing (CI has no GPU).

What runs on the CPU in the normal suite (device handling, bf16/fp16 autocast, staged gossip, checkpoints)
is tested in tests/train/test_device.py and tests/distributed; these add what only a GPU shows: cuDNN's
LSTM against the CPU, autocast on CUDA, device-mapped checkpoints, and ADPSGD staged through pinned memory
on a side stream.
"""

import sys

import pytest
import torch
from click.testing import CliRunner

from tests.helpers import collective_checks as cc
from tests.helpers import dist_toyloop as toyloop
from tests.helpers.featfix import make_feat_dir
from tests.helpers.train_runs import data, params, train  # noqa: F401 - the module fixture is shared

from asrtrain.cli import cli
from asrtrain.config import DistConfig, ModelConfig

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="needs a CUDA GPU (run pytest -m gpu on a GPU machine)")]


@pytest.mark.parametrize("att_weight, frontend", [(0.0, "stack"), (0.3, "stack"), (0.0, "conv")])
def test_one_cuda_step_matches_the_cpu_step(tmp_path, att_weight, frontend):
    """att_weight 0.3: joint CTC/attention (the decoder on CUDA too); conv: model.frontend conv."""
    from asrtrain.features.dataset import AsrDataset
    from asrtrain.train.loop import compute_loss
    from asrtrain.model.blstm import build_model

    feats = make_feat_dir(tmp_path / "f", 8)
    data_ = AsrDataset(feats, 2, None, None)
    batch = data_.collate(sorted(data_.lengths))
    batch.targets = torch.randint(1, 20, (len(batch.utts), 4))
    batch.target_lens = torch.full((len(batch.utts),), 4)
    cfg = ModelConfig(input_dim=13, num_targets=20, num_layers=2, hidden=32, subsample=2, dropout=0.0,
                      att_weight=att_weight, att_dim=16, frontend=frontend,
                      stack=1 if frontend == "conv" else 3)
    torch.manual_seed(0)
    cpu = build_model(cfg)
    gpu = build_model(cfg)
    gpu.load_state_dict(cpu.state_dict())
    gpu = gpu.cuda()
    out = {}
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    # Full fp32 on the GPU for this comparison: TF32 (torch's default for cuDNN on Ampere and later)
    # rounds inputs to 10 mantissa bits by design; on an H200 it moved 1.5% of these gradients by more
    # than 1e-3 relative, while the loss still agreed to 1e-4.
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for name, model in (("cpu", cpu), ("cuda", gpu)):
            loss, _ = compute_loss(model, batch.to(next(model.parameters()).device), "ctc")
            loss.backward()
            out[name] = (loss.item(), {k: p.grad.detach().cpu() for k, p in model.named_parameters()})
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    # Gradients, not the weights after an optimizer step: Adam's first step moves every weight by about
    # +-lr whatever the gradient's size, so a gradient within rounding of zero could flip its sign.
    assert out["cpu"][0] == pytest.approx(out["cuda"][0], rel=1e-4)
    for k, g in out["cpu"][1].items():
        torch.testing.assert_close(out["cuda"][1][k], g, rtol=1e-4, atol=1e-5 * float(g.abs().max()))


@pytest.mark.parametrize("precision,lstm_dtype", [("bf16", torch.float32), ("fp16", torch.float16)])
def test_lstms_never_run_in_fp16_without_a_scaler(precision, lstm_dtype):
    """torch's cuDNN-RNN autocast casts to fp16 whatever the autocast dtype; under bf16 (no gradient
    scaler) our LSTMs therefore run outside autocast in fp32, while the head still runs in bf16."""
    from asrtrain.device import autocast
    from asrtrain.model.blstm import build_model

    cfg = ModelConfig(input_dim=13, num_targets=20, num_layers=1, hidden=16, subsample=1, dropout=0.0)
    model = build_model(cfg).cuda()
    seen = {}

    def record(name, tensor):  # a forward hook that returns something replaces the module's output
        def hook(module, inputs, output):
            seen.setdefault(name, tensor(output).dtype)
        return hook

    model.layers[0].register_forward_hook(record("lstm", lambda o: o[0].data))
    model.head.register_forward_hook(record("head", lambda o: o))
    x, lens = torch.randn(2, 7, 13, device="cuda"), torch.tensor([7, 5])
    with autocast(torch.device("cuda"), precision):
        model(x, lens)
    assert seen["lstm"] == lstm_dtype
    assert seen["head"] == (torch.bfloat16 if precision == "bf16" else torch.float16)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_mixed_precision_learns_on_cuda(data, tmp_path, precision):
    exp = tmp_path / precision
    r = train(data, exp, "--device", "cuda", "--precision", precision, "--set", "train.epochs=6",
              "--set", "train.lr=0.01")
    assert r.exit_code == 0, r.output
    hist = torch.load(exp / "checkpoints" / "epoch-0006.rank0.pt", weights_only=True)["history"]
    assert hist[-1]["train_loss"] < 0.7 * hist[0]["train_loss"], hist


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_dp_trains_on_cuda_and_accounts_epsilon(data, tmp_path, precision):
    """A(DP)-SGD's per-example clipping and noise with the parameters on the GPU (the noise is drawn on
    the host and copied), fp16 through the gradient scaler too: trains, logs epsilon within the target,
    and writes a finite model."""
    import re

    exp = tmp_path / precision
    r = train(data, exp, "--device", "cuda", "--precision", precision, "--dp", "--set", "dp.epsilon=8",
              "--set", "dp.delta=1e-3", "--set", "dp.clip=1.0", "--set", "train.epochs=2",
              "--set", "train.max_frames=800")
    assert r.exit_code == 0, r.output
    eps = [float(x) for x in re.findall(r"epoch \d dp: epsilon ([\d.e+-]+)", (exp / "train.log").read_text())]
    assert len(eps) == 2 and 0 < eps[0] < eps[1] <= 8.0, eps
    final = torch.load(exp / "final.pt", map_location="cpu", weights_only=True)["model"]
    assert all(torch.isfinite(t).all() for t in final.values())


def test_a_cuda_checkpoint_resumes_on_cuda_and_decodes_on_the_cpu(data, tmp_path):
    exp = tmp_path / "exp"
    r = train(data, exp, "--device", "cuda", "--set", "train.checkpoint_every_steps=4", "--stop-after-steps", "6")
    assert r.exit_code == 0, r.output
    ck = torch.load(exp / "checkpoints" / "step-00000004.rank0.pt", weights_only=True, map_location="cpu")
    assert "cuda" in ck["rng"]  # the CUDA generator is checkpointed
    r = train(data, exp, "--device", "cuda", "--set", "train.checkpoint_every_steps=4", "--resume")
    assert r.exit_code == 0, r.output
    dev = data[1]
    ids = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / f"dec_{device}"
        r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(out), "--device", device])
        assert r.exit_code == 0, r.output
        ids[device] = [line.split()[0] for line in (out / "text").read_text().splitlines()]
    assert ids["cpu"] == ids["cuda"] == sorted(ids["cpu"]) and len(ids["cpu"]) == 12
    # The texts themselves may differ where two labels tie to rounding in this 9-step model, so the
    # posteriors are compared instead: the same checkpoint gives the same log-probs on both devices.
    from asrtrain.decode.run import load_model, log_probs_by_utt

    lps = {}
    for device in ("cpu", "cuda"):
        cfg, model = load_model(exp, device=device)
        lps[device] = dict(log_probs_by_utt(model, cfg, dev, 4000))
    assert sorted(lps["cpu"]) == sorted(lps["cuda"]) == ids["cpu"]
    for utt, lp in lps["cpu"].items():
        torch.testing.assert_close(torch.from_numpy(lps["cuda"][utt]), torch.from_numpy(lp), rtol=1e-3, atol=2e-3)


def adpsgd_pair_conserves_the_weight_sum(tmp_path, device: str) -> list:
    """Two ADPSGD learners (and with delay-by-one) on ``device``: lr 0 and different initial weights must
    end exactly at the initial mean. Returns each job's per-rank results."""
    from asrtrain.distributed.runtime.launch import run_learners

    jobs = [toyloop.ToyArgs(str(tmp_path / f"j{d}"),
                            DistConfig(strategy="adpsgd", learners=2, delay_by_one=bool(d)),
                            zero_grad=True, distinct_init=True, num_batches=2 * 60, batch=2, device="cuda")
            for d in (0, 1)]
    run_learners(toyloop.train, jobs, learners=2, timeout_s=60, device=device)
    out = []
    for job in jobs:
        res = toyloop.load(job.out, 2)
        mean = torch.stack([r["initial"] for r in res]).mean(0)
        assert float((res[0]["initial"] - mean).abs().max()) > 0.1
        for r in res:
            assert r["metrics"]["exchanges"] > 0
            torch.testing.assert_close(r["final"], mean, rtol=0, atol=1e-6)
        out.append(res)
    return out


def test_two_adpsgd_learners_sharing_one_gpu_conserve_the_weight_sum(tmp_path):
    """Parameters on the GPU, gossip through pinned host buffers on a gloo ring."""
    adpsgd_pair_conserves_the_weight_sum(tmp_path, "cuda:0")


def run_and_check(job, learners: int, device: str, check, backend: str) -> list:
    """Run a toy job of tests/helpers/collective_checks.py on ``device`` and check it there (the same bodies
    run over gloo on the CPU in tests/distributed/test_collective_checks.py)."""
    from asrtrain.distributed.runtime.launch import run_learners

    run_learners(toyloop.train, [job], learners=learners, timeout_s=60, device=device)
    check(job)
    res = toyloop.load(job.out, learners)
    assert {r["backend"] for r in res} == {backend}
    return res


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (NCCL refuses two ranks on one GPU)")
def test_ssgd_over_nccl_equals_one_learner(tmp_path):
    """DDP's all-reduce over NCCL, lr 0.05 with momentum: every step's reduced gradient is one learner's over
    the global batch, and the final weights are one learner's."""
    run_and_check(cc.ssgd_job(tmp_path / "ssgd", 2, "cuda"), 2, "cuda", cc.check_ssgd, "nccl")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (one per learner)")
def test_adpsgd_over_nccl_broadcasts_learns_conserves_and_leaves_gpu0_alone(tmp_path):
    """ADPSGD with NCCL as the default group, a GPU per learner: setup's NCCL broadcast gives every learner
    rank 0's weights (they were made apart), the gossip conserves the sum while they learn (lr 0.05), and
    learner 1's gossip thread (CUDA events, pinned copies) opened no context on GPU 0."""
    res = run_and_check(cc.adpsgd_job(tmp_path / "adpsgd", 2, "cuda"), 2, "cuda", cc.check_adpsgd, "nccl")
    assert res[1]["foreign_gpus"] == [], res[1]["foreign_gpus"]


@pytest.mark.parametrize("name", ["ssgd", "adpsgd", "hadpsgd"])
def test_the_collective_checks_with_learners_sharing_one_gpu(tmp_path, name):
    """The same bodies with CUDA tensors over gloo (four learners on cuda:0): what a one-GPU machine runs."""
    job = {"ssgd": lambda: cc.ssgd_job(tmp_path / name, 4, "cuda"),
           "adpsgd": lambda: cc.adpsgd_job(tmp_path / name, 4, "cuda"),
           "hadpsgd": lambda: cc.hadpsgd_job(tmp_path / name, "cuda")}[name]()
    check = {"ssgd": cc.check_ssgd, "adpsgd": cc.check_adpsgd, "hadpsgd": cc.check_hadpsgd}[name]
    run_and_check(job, 4, "cuda:0", check, "gloo")


@pytest.mark.parametrize("strategy", ["ssgd", "periodic"])
def test_learners_sharing_one_gpu_over_gloo_equal_one_learner(tmp_path, strategy):
    """Two learners on cuda:0 (so the default group is gloo) with CUDA tensors in its collectives: SSGD's
    DDP all-reduce and periodic averaging's all-reduce of the weights (period 1 with plain SGD momentum is
    SSGD). Both equal one learner on the whole batches, and the two learners hold the same bits."""
    cfg = DistConfig(strategy=strategy, learners=2, period="1")
    two_learners_equal_one(tmp_path / strategy, cfg, "cuda:0")


def two_learners_equal_one(out, cfg, device: str) -> None:
    """Two learners on half batches each (the toy loop's) end with the same bits, equal to one learner on
    the whole batches."""
    from asrtrain.distributed.runtime.launch import run_learners

    job = toyloop.ToyArgs(str(out), cfg, batch=4, num_batches=8, device="cuda")
    run_learners(toyloop.train, [job], learners=2, timeout_s=60, device=device)
    single = toyloop.single_reference(toyloop.ToyArgs("", None, batch=8, num_batches=8))
    res = toyloop.load(job.out, 2)
    assert torch.equal(res[0]["final"], res[1]["final"])
    for r in res:
        torch.testing.assert_close(r["final"], single, rtol=0, atol=1e-10)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (NCCL refuses two ranks on one GPU)")
def test_periodic_over_nccl_with_period_1_equals_one_learner(tmp_path):
    """Periodic averaging's all-reduce of the weights (and of its float64 statistics) over NCCL."""
    cfg = DistConfig(strategy="periodic", learners=2, period="1")
    two_learners_equal_one(tmp_path / "periodic", cfg, "cuda")


@pytest.mark.skipif(torch.cuda.device_count() < 4, reason="needs 4 GPUs (two H-ADPSGD groups of two, a GPU each)")
def test_hadpsgd_over_nccl_group_gradients_are_the_groups_and_the_sum_is_conserved(tmp_path):
    """Two groups of two learners, one GPU each, lr 0.05 with momentum: DDP's all-reduce and the leader's
    broadcast inside a group over NCCL subgroups, the counts over their gloo twins, the leaders' gossip over
    gloo through pinned memory. Every step's reduced gradient is one learner's over the group's batch, a
    group's members hold the same bits after every step, the gossip conserves the sum, and every group
    waits dist.timeout_s."""
    res = run_and_check(cc.hadpsgd_job(tmp_path / "hadpsgd", "cuda"), 4, "cuda", cc.check_hadpsgd, "nccl")
    for r in res:
        assert r["group_timeouts"] and set(r["group_timeouts"].values()) == {60.0}, r["group_timeouts"]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (whether a thread opens a context on "
                                                          "GPU 0 shows only from another GPU)")
def test_prefetch_pins_batches_without_touching_gpu0(tmp_path):
    """In a fresh process bound to cuda:1, the prefetch thread pins batches and no context opens on GPU 0."""
    import subprocess

    feats = make_feat_dir(tmp_path / "f", 6)
    code = (f"import torch\nfrom asrtrain.device import bind_device\n"
            f"from asrtrain.features.dataset import AsrDataset, prefetch\n"
            f"dev = torch.device('cuda', 1)\nbind_device(dev)\n"
            f"ds = AsrDataset({str(feats)!r}, 1)\n"
            f"out = list(prefetch(ds, [[u] for u in sorted(ds.lengths)], device=dev))\n"
            f"assert out and all(b.feats.is_pinned() for b in out)\n"
            f"print('gpu0', torch._C._cuda_hasPrimaryContext(0))\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    assert "gpu0 False" in got.stdout


def test_checkpoint_snapshot_copies_cuda_tensors_to_the_host():
    """The background writer's snapshot of a CUDA LSTM (cuDNN's weights are views of one flat buffer):
    host tensors, equal to the device's, unaffected by later steps, storages shared as on the device."""
    from asrtrain.train.checkpoint import snapshot

    lstm = torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True).cuda()
    lstm.flatten_parameters()
    state = lstm.state_dict()
    snap = snapshot({"model": state, "avg_model": state})
    want = {k: v.detach().cpu().clone() for k, v in state.items()}
    with torch.no_grad():
        for p in lstm.parameters():
            p.add_(1.0)
    torch.cuda.synchronize()
    for k, v in snap["model"].items():
        assert v.device.type == "cpu" and torch.equal(v, want[k])
        assert v.untyped_storage().data_ptr() == snap["avg_model"][k].untyped_storage().data_ptr()


def test_attention_rescoring_on_cuda_matches_the_cpu():
    """Encoder states cached on the host (as tune-lm keeps them) are scored by a CUDA decoder: the same
    per-hypothesis log-probabilities as on the CPU."""
    import copy

    from asrtrain.decode.rescore import attention_scores
    from asrtrain.model.blstm import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(input_dim=4, num_targets=6, hidden=8, num_layers=2, stack=1, subsample=1, att_weight=0.3,
                      att_dim=8)
    cpu = build_model(cfg).eval()
    with torch.no_grad():
        enc, _, _ = cpu.encode(torch.randn(1, 9, 4), torch.tensor([9]))
    hyps = [[1, 2, 3], [], [5, 4]]
    want = attention_scores(cpu, enc[0], hyps)
    got = attention_scores(copy.deepcopy(cpu).cuda(), enc[0], hyps)  # enc stays on the host
    assert got == pytest.approx(want, rel=1e-4, abs=1e-4)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs (one learner per GPU over NCCL)")
def test_asrtrain_train_on_two_gpus_over_nccl_checkpoints_and_resumes(data, tmp_path, capfd):
    """Issue 58/12: ``asrtrain train`` itself on 2 GPUs: cuDNN LSTM under DDP over NCCL, pinned prefetch,
    validation, per-rank checkpoints, then ``--resume``. SSGD's learners end with the same bits, the
    losses fall and the model is finite."""
    exp = tmp_path / "nccl"
    common = ["--device", "cuda", "--learners", "2", "--strategy", "ssgd", "--set", "dist.backend=auto",
              "--set", "train.checkpoint_every_steps=4", "--set", "train.epochs=3", "--set", "train.lr=0.01"]
    r = train(data, exp, *common, "--stop-after-steps", "6")
    assert r.exit_code == 0, r.output
    assert "default process group: nccl" in capfd.readouterr().err
    assert (exp / "checkpoints" / "step-00000004.rank1.pt").is_file()
    r = train(data, exp, *common, "--resume")
    assert r.exit_code == 0, r.output
    last = sorted((exp / "checkpoints").glob("epoch-*.rank0.pt"))[-1]
    w = [torch.load(str(last).replace("rank0", f"rank{k}"), map_location="cpu", weights_only=True) for k in (0, 1)]
    assert all(torch.equal(w[0]["model"][k], w[1]["model"][k]) for k in w[0]["model"])
    hist = w[0]["history"]
    assert hist[-1]["train_loss"] < hist[0]["train_loss"], hist
    assert all("dev_loss" in h for h in hist), hist
    final = torch.load(exp / "final.pt", map_location="cpu", weights_only=True)["model"]
    assert all(torch.isfinite(t).all() for t in final.values())
