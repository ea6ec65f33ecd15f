"""The default process group's backend, one for the whole job.

``dist.backend = auto`` means NCCL for a learner that computes on a GPU of its own, gloo otherwise. Each
learner can only see its own node, and nodes can differ (one without CUDA, one whose learners share a
GPU): were every learner to decide for itself, some would make an NCCL group and some a gloo group,
and group creation would hang. So learner rank 0 decides and every learner adopts its choice, through the
rendezvous store, before the default group is made (:func:`agree_backend`):

1. rank 0 resolves ``dist.backend`` for itself and writes the choice (or its own error) under
   :data:`CHOICE_KEY`;
2. every learner reads it and checks that it can use it: one that resolved NCCL for itself and got gloo
   takes gloo (gloo moves GPU tensors through the host); one that cannot use NCCL (no CUDA, the CPU, a
   GPU shared with another learner) writes a refusal that names its rank and host;
3. every learner waits for all the answers; if any refused, every learner stops with the same one-line
   error naming the first refusing learner, and no process group is made.
"""

from __future__ import annotations

import logging
import socket
from datetime import timedelta
from typing import Optional

import torch

from asrtrain.errors import AsrError

log = logging.getLogger(__name__)

BACKENDS = ("auto", "gloo", "nccl")
CHOICE_KEY = "asrtrain/backend/choice"
ANSWER_KEY = "asrtrain/backend/rank{}"
READ_KEY = "asrtrain/backend/read{}"
FIX = ("set dist.backend=gloo (--set dist.backend=gloo) for the whole job, "
       "or give every node a GPU per learner")


def resolve_backend(backend: str, device: Optional[torch.device] = None, shared_gpu: bool = False) -> str:
    """This learner's own answer for ``backend`` when it computes on ``device``.

    ``auto`` -> nccl when the learner computes on its own GPU, gloo on the CPU or when the learners of a
    node share one GPU (NCCL refuses two ranks on one device). Asking for nccl without CUDA, or for a
    learner on the CPU, is an error. (The ADPSGD gossip ring and the small host-side collectives always
    use gloo groups of their own, beside this one.)
    """
    if backend not in BACKENDS:
        raise AsrError(f"dist.backend = {backend!r} is not one of auto, gloo, nccl")
    on_gpu = torch.cuda.is_available() if device is None else device.type == "cuda"
    if backend == "auto":
        return "nccl" if on_gpu and not shared_gpu else "gloo"
    if backend == "nccl" and not torch.cuda.is_available():
        raise AsrError("dist.backend = nccl but CUDA is not available", fix="use dist.backend=gloo or auto")
    if backend == "nccl" and shared_gpu:
        raise AsrError("dist.backend = nccl but the learners of a node share one GPU (--device cuda:N), "
                       "and NCCL refuses two ranks on one device",
                       fix="use dist.backend=auto (gloo then) or one GPU per learner (--device cuda)")
    if backend == "nccl" and not on_gpu:
        raise AsrError("dist.backend = nccl but the learners compute on the CPU",
                       fix="use --device cuda, or dist.backend=gloo")
    return backend


def why_not_nccl(device: torch.device, shared_gpu: bool) -> Optional[str]:
    """Why a learner on ``device`` cannot be a rank of an NCCL group, or None when it can."""
    if not torch.cuda.is_available():
        return "CUDA is not available there"
    if device.type != "cuda":
        return "it computes on the CPU"
    if shared_gpu:
        return f"its node's learners share {device} (NCCL refuses two ranks on one GPU)"
    return None


def agree_backend(store, rank: int, world_size: int, backend: str, device: torch.device, shared_gpu: bool,
                  timeout: timedelta, host: Optional[str] = None) -> str:
    """The default group's backend, the same on every learner: rank 0's (see the module docstring).

    Args:
        store: the job's rendezvous store (every learner's view of it, with the same key namespace).
        backend: ``dist.backend`` (``auto`` | ``gloo`` | ``nccl``), the same on every learner.
        device, shared_gpu: this learner's device and whether its node's learners share it.
        timeout: how long to wait for rank 0's choice and for the other learners' answers.
        host: this learner's host name, for the refusal (default: ``socket.gethostname()``).

    Raises:
        AsrError: one line, the same on every learner, when a learner cannot use rank 0's choice (or rank
            0 could not resolve ``backend``); when the others do not answer within ``timeout``.
    """
    host = host or socket.gethostname()
    if rank == 0:
        try:
            choice = resolve_backend(backend, device, shared_gpu)
        except AsrError as err:
            store.set(CHOICE_KEY, "!" + err.render())
            _all_read(store, rank, world_size, timeout)
            raise
        store.set(CHOICE_KEY, choice)
    else:
        choice = _get(store, [CHOICE_KEY], timeout, "learner rank 0's choice of backend")[0]
        if choice.startswith("!"):
            _all_read(store, rank, world_size, timeout)
            raise AsrError(f"learner rank 0 could not resolve dist.backend={backend}: {choice[1:]}")
    refusal = ""
    if choice == "nccl":
        reason = why_not_nccl(device, shared_gpu)
        if reason:
            refusal = f"learner rank {rank} (host {host}) cannot use it: {reason}"
    elif choice != resolve_backend("auto", device, shared_gpu) and rank != 0:
        log.info("rank %d: the default group is %s, rank 0's choice (this learner alone would use nccl)",
                 rank, choice)
    store.set(ANSWER_KEY.format(rank), refusal)
    answers = _get(store, [ANSWER_KEY.format(r) for r in range(world_size)], timeout,
                   "the answers of all learners to rank 0's choice of backend")
    _all_read(store, rank, world_size, timeout)
    refused = [a for a in answers if a]
    if refused:
        more = f" (and {len(refused) - 1} more learners)" if len(refused) > 1 else ""
        raise AsrError(f"learner rank 0 chose dist.backend={backend} -> {choice} for the default process "
                       f"group, but {refused[0]}{more}", fix=FIX)
    return choice


def _all_read(store, rank: int, world_size: int, timeout: timedelta) -> None:
    """Say this learner has read what it needs; rank 0 waits for everybody's word: under srun it hosts the
    store, and leaving at once (a refusal) would take the answers away from learners still reading."""
    store.set(READ_KEY.format(rank), "")
    if rank == 0:
        try:
            store.wait([READ_KEY.format(r) for r in range(world_size)], timeout)
        except (RuntimeError, ValueError):  # a learner that went away has nothing left to read
            pass


def _get(store, keys, timeout: timedelta, what: str) -> list:
    """The values of ``keys``, waiting for them up to ``timeout``; a one-line error after it."""
    try:
        store.wait(keys, timeout)
        return [v.decode(errors="replace") for v in store.multi_get(keys)]
    except (RuntimeError, ValueError) as err:  # DistStoreError (a RuntimeError): timeout, store gone
        raise AsrError(f"{what} did not come within {timeout.total_seconds():g} s ({type(err).__name__}: "
                       f"{str(err).splitlines()[0] if str(err) else 'no detail'})",
                       fix="check that every node runs the same command; see docs/guide/multinode.md"
                       ) from None
