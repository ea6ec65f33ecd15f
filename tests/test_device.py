"""The device a learner trains on, from its launcher's variables, and the precisions it can run
(asrtrain/device.py), without CUDA. The CUDA side is in tests/gpu (``pytest -m gpu``)."""

import pytest
import torch

from asrtrain.config.file import load_config
from asrtrain.device import resolve_device
from asrtrain.errors import AsrError


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


def test_threads_follow_cpu_affinity_not_host_cores(monkeypatch):
    """Issue 58/7: under Slurm's --cpus-per-task a learner may use its affinity set, not every host core."""
    import os
    from asrtrain import limits
    from asrtrain.decode.options import resolve_threads
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert limits.usable_cores() == 4
    assert resolve_threads(0) == 4


def test_slurm_gpu_selection_spawned_learners_and_per_task_gpus(monkeypatch):
    """Issue 58/8. Inside ``sbatch --gres=gpu:1`` our spawner's learners inherit SLURM_PROCID/SLURM_LOCALID
    but not the task's one-GPU rule: learner 1 is told it lacks cuda:1 (not put on cuda:0 beside learner
    0). Under ``srun --gpus-per-task=1`` (one GPU per task, LOCAL_RANK=$SLURM_LOCALID) ``--device cuda:0``
    is the task's own GPU, not a shared one: NCCL, not gloo."""
    from asrtrain.device import shares_gpu
    from asrtrain.distributed.runtime.backend import resolve_backend
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_LOCALID", "0")
    monkeypatch.setenv("LOCAL_RANK", "1")  # set by our spawner for its learner 1
    with pytest.raises(AsrError, match="needs cuda:1 but this process sees 1 GPU"):
        resolve_device("cuda")
    assert shares_gpu("cuda:0")  # spawned learners on cuda:0 do share it: gloo
    monkeypatch.setenv("SLURM_PROCID", "5")
    monkeypatch.setenv("SLURM_LOCALID", "5")
    monkeypatch.setenv("LOCAL_RANK", "5")  # srun task 5 of the node, its own GPU
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert not shares_gpu("cuda:0")
    assert resolve_backend("auto", torch.device("cuda", 0), shares_gpu("cuda:0")) == "nccl"
