"""Where a learner computes and in what precision: device binding, autocast, the fp16 gradient scaler.

Device (``train.device`` or ``--device``):

- ``auto``: ``cuda:LOCAL_RANK`` when CUDA is available, else the CPU;
- ``cuda``: ``cuda:LOCAL_RANK`` (an error without CUDA, or with more learners on a node than GPUs); under
  Slurm a task that sees exactly one GPU (``srun --gpus-per-task=1``) uses it, whatever its local rank;
- ``cuda:N``: GPU N for every learner of the node (learners may share a GPU: their default process group is
  then gloo, since NCCL refuses two ranks on one GPU);
- ``cpu``.

Precision (``train.precision``): ``fp32``; ``bf16`` (``torch.autocast``, no scaler: bf16 has fp32's
exponent range); ``fp16`` (autocast plus a :class:`torch.amp.GradScaler` whose state is checkpointed).
The parameters and the optimizer state stay fp32 in every mode, and the CTC/CE loss is computed in fp32
from fp32 log-probabilities (see :func:`asrtrain.train.loop.compute_loss`).
"""

from __future__ import annotations

import contextlib
import os
from typing import Optional

import torch

from asrtrain.errors import AsrError

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("fp32", "bf16", "fp16")


def check_device_spec(spec: str, key: str = "train.device") -> None:
    """``auto | cpu | cuda | cuda:N``; raises a one-line error otherwise."""
    if spec in DEVICES:
        return
    if spec.startswith("cuda:") and spec[5:].isdigit():
        return
    err = AsrError(f"{key} = {spec!r} is not one of auto, cpu, cuda, cuda:N", fix="e.g. --device cuda")
    err.key = key
    raise err


def env_int(name: str, default: int) -> int:
    """An integer that torchrun, srun or our spawner exports (LOCAL_RANK, LOCAL_WORLD_SIZE): unset or empty
    is ``default`` (``LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE`` is empty when the job gave only --ntasks);
    anything else that is not an integer is a one-line error."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise AsrError(f"environment variable {name}={raw!r} is not an integer",
                       fix=f"export {name} as a number, or unset it (torchrun sets it for each learner)"
                       ) from None


def local_rank() -> int:
    """This learner's index on its node (torchrun's / our spawner's LOCAL_RANK; 0 for one process)."""
    return env_int("LOCAL_RANK", 0)


def resolve_device(spec: str) -> torch.device:
    """The device a learner computes on (see the module docstring)."""
    check_device_spec(spec)
    if spec == "cpu" or (spec == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise AsrError(f"device {spec} asked for but CUDA is not available "
                       f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})",
                       fix="use --device cpu (or auto), or install a CUDA build of torch")
    count = torch.cuda.device_count()
    if spec.startswith("cuda:"):
        index = int(spec[5:])
    else:
        index = local_rank()
        if slurm_task_gpu(count):
            index = 0
    if index >= count:
        raise AsrError(f"learner needs cuda:{index} but this process sees {count} GPU(s) "
                       f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})",
                       fix=f"run at most {count} learners per node, give each Slurm task its own GPU "
                           f"(srun --gpus-per-task=1), or share one GPU with --device cuda:0")
    return torch.device("cuda", index)


def slurm_task_gpu(count: int) -> bool:
    """True for an srun task that sees exactly one GPU: ``srun --gpus-per-task=1`` (or
    ``--gpu-bind=single:1``) shows each task its own GPU as device 0 while SLURM_LOCALID counts the tasks
    of the node, so that GPU is this learner's. Not under torchrun inside an sbatch job, nor for the
    learners our spawner starts inside one task (``sbatch --gres=gpu:1``): they inherit the task's
    SLURM_LOCALID but have LOCAL_RANKs of their own, and must not all take cuda:0."""
    env = os.environ
    localid = env.get("SLURM_LOCALID")
    spawned = localid is not None and env.get("LOCAL_RANK", localid) != localid
    return count == 1 and "SLURM_PROCID" in env and "TORCHELASTIC_RUN_ID" not in env and not spawned


def shares_gpu(spec: str) -> bool:
    """True when every learner of a node is told to use the same GPU (``cuda:N``); not for an srun task
    that sees its own one GPU (:func:`slurm_task_gpu`): ``--device cuda:0`` there is that task's GPU, and
    NCCL (not gloo) is its default group's backend."""
    if not spec.startswith("cuda:"):
        return False
    return not (torch.cuda.is_available() and slurm_task_gpu(torch.cuda.device_count()))


def bind_device(device: torch.device) -> None:
    """Make ``device`` this process's current CUDA device (before any process group is created, so
    NCCL's communicators and every ``torch.cuda`` default land on it)."""
    if device.type == "cuda":
        torch.cuda.set_device(device)


def bind_thread(device: Optional[torch.device]) -> None:
    """Make ``device`` the calling thread's current CUDA device (nothing for the CPU). The current device is
    per thread and a new thread starts on GPU 0 whatever its process's is, so a helper thread that touches
    CUDA (pinned memory, an event) would open a second context on GPU 0 for every learner of a node; torch's
    DataLoader binds its pin-memory thread the same way. Call it first in every thread that may touch CUDA."""
    if device is not None and device.type == "cuda":
        torch.cuda.set_device(device)


def autocast(device: torch.device, precision: str):
    """The forward pass's autocast context (a no-op for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def check_precision(precision: str, device: torch.device) -> None:
    if precision not in PRECISIONS:
        raise AsrError(f"train.precision = {precision!r} is not one of {', '.join(PRECISIONS)}")
    # Native bf16 only: torch's default also says yes where bf16 is emulated (a V100), slower than fp32.
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported(including_emulation=False):
        raise AsrError(f"train.precision = bf16 but {torch.cuda.get_device_name(device)} has no bf16 support",
                       fix="use train.precision=fp16 (with its gradient scaler) or fp32")


class ScaledStep:
    """What strategies call ``.step()`` on: the optimizer, through the fp16 gradient scaler when there is
    one. ``scaler.step`` skips a step whose gradients overflowed; ``update`` then lowers the scale."""

    def __init__(self, optimizer: torch.optim.Optimizer, scaler: Optional["torch.amp.GradScaler"]):
        self.optimizer, self.scaler = optimizer, scaler
        self.skip = False  # set by the loop for one step whose gradients are not finite (no scaler)

    def step(self) -> None:
        if self.skip:
            self.skip = False
            return
        if self.scaler is None:
            self.optimizer.step()
            return
        self.scaler.step(self.optimizer)
        self.scaler.update()


def make_scaler(precision: str, device: torch.device) -> Optional["torch.amp.GradScaler"]:
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None


def rng_state(device: torch.device) -> dict:
    """The CUDA generator of this learner's GPU (empty on the CPU), as a tensor: loads with weights_only."""
    return {"cuda": torch.cuda.get_rng_state(device)} if device.type == "cuda" else {}


def set_rng_state(state: dict, device: torch.device) -> None:
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)


__all__ = ["resolve_device", "bind_device", "autocast", "check_device_spec", "check_precision", "ScaledStep",
           "make_scaler", "shares_gpu", "local_rank", "rng_state", "set_rng_state"]
