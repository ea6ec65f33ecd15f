"""Which torchrun attempt a learner belongs to, agreed by every learner of the job.

torchrun's agent keeps one store across ``--max-restarts`` attempts, so a restarted learner would read the
old attempt's keys: its verdict (and exit at once), heartbeats, batch claims, and the default group's gloo
addresses of processes that are gone. Each attempt therefore keeps its keys under a namespace of its own.
``TORCHELASTIC_RESTART_COUNT`` cannot name it: it is each node's own count. The agent whose workers failed
counts a restart; the agent of a healthy node that restarts its workers because the other rejoined the
rendezvous does not ("membership changes do not count as retries", torch 2.9
``elastic/agent/server/api.py``), so the nodes of one attempt can disagree (seen on two agents here: 1 on
the node whose worker was killed, 0 on the other, and the job hung).

The namespace is agreed instead (:func:`join_attempt`): learner rank 0 draws a fresh id and writes it
under :data:`ID_KEY`; every other learner reads that key, says hello under the id with a fresh token of
its own, and waits for rank 0 to answer that token. A stale id, the previous attempt's, is never answered
(its rank 0 is gone: an agent stops all its workers before it rejoins the rendezvous, and the new
attempt's workers start only when every agent has rejoined), so the learner reads the key again and says
hello under the new id.
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import timedelta

import torch.distributed as dist

from asrtrain.errors import AsrError

ID_KEY = "asrtrain/attempt/id"
PREFIX_ENV = "ASRTRAIN_STORE_PREFIX"  # the agreed namespace, for the store clients a learner opens later
POLL_S = 2.0  # how long a learner waits for rank 0's answer before it reads the id again


def attempt_store(store):
    """``store`` seen through this attempt's agreed namespace (:func:`join_attempt`); the store itself
    where none was agreed (spawned learners, srun: their store is new with every job)."""
    prefix = os.environ.get(PREFIX_ENV, "")
    return dist.PrefixStore(prefix, store) if prefix else store


def join_attempt(store, rank: int, world_size: int, timeout: timedelta, poll_s: float = POLL_S) -> str:
    """Agree with every learner on this attempt's namespace in the agent's ``store`` (see the module
    docstring); returns it and exports it in :data:`PREFIX_ENV` for :func:`attempt_store`.

    Raises:
        AsrError: the learners did not all meet within ``timeout``.
    """
    deadline = time.monotonic() + timeout.total_seconds()
    if rank == 0:
        attempt = uuid.uuid4().hex
        store.set(ID_KEY, attempt)
        for r in range(1, world_size):
            hello = f"{ID_KEY}/{attempt}/hello{r}"
            _wait(store, hello, deadline, f"learner rank {r}")
            token = store.get(hello).decode()
            store.set(f"{ID_KEY}/{attempt}/welcome{r}/{token}", "")
    else:
        token = uuid.uuid4().hex
        while True:
            _wait(store, ID_KEY, deadline, "learner rank 0")
            attempt = store.get(ID_KEY).decode()
            store.set(f"{ID_KEY}/{attempt}/hello{rank}", token)
            try:
                store.wait([f"{ID_KEY}/{attempt}/welcome{rank}/{token}"],
                           timedelta(seconds=max(0.1, min(poll_s, deadline - time.monotonic()))))
                break
            except RuntimeError:  # DistStoreError: no answer; the id may be a previous attempt's
                if time.monotonic() >= deadline:
                    raise AsrError(f"learner rank 0 did not answer within {timeout.total_seconds():g} s at "
                                   "the start of this torchrun attempt",
                                   fix="check that every node runs the same command") from None
    prefix = f"asrtrain/attempt/{attempt}"
    os.environ[PREFIX_ENV] = prefix
    return prefix


def _wait(store, key: str, deadline: float, who: str) -> None:
    left = deadline - time.monotonic()
    try:
        store.wait([key], timedelta(seconds=max(0.1, left)))
    except RuntimeError:  # DistStoreError: timeout, or the store is gone
        raise AsrError(f"{who} did not join this torchrun attempt in time",
                       fix="check that every node runs the same command") from None
