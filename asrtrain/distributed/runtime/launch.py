"""Start the learners of one job: join a torchrun / Slurm group, or spawn N local processes.

One process, one learner::

    run_learners(fn, args, learners=1)                      # in this process, a group of 1

One node, N learners (this module spawns them, rendezvous on 127.0.0.1)::

    run_learners(fn, args, learners=4)

Several nodes: start the same command under torchrun (or srun with RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT exported); :func:`run_learners` sees those variables and joins that group
(``init_process_group`` with the ``env://`` rendezvous) instead of spawning::

    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint host0:29400 \\
        -m asrtrain train ...

    # Slurm: one task per learner; export what torchrun would
    srun --nodes 2 --ntasks-per-node 4 bash -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS \\
        LOCAL_RANK=$SLURM_LOCALID LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE MASTER_PORT=29500 \\
        MASTER_ADDR=$(scontrol show hostnames "$SLURM_STEP_NODELIST" | head -n 1) \\
        python -m asrtrain train ...'

(LOCAL_WORLD_SIZE is the default H-ADPSGD group size when ``learners_per_node`` is 0. MASTER_ADDR is the
step's first node, where SLURM_PROCID 0 runs: the job's node list need not start with it. See
docs/guide/multinode.md.)

Every learner runs ``fn(rank, world_size, args)``. Faults never hang: each learner runs a
:class:`PeerWatch` thread that keeps a heartbeat counter in the rendezvous store (torch's TCPStore) and
watches everybody else's. A learner whose counter stops for ``min(timeout_s / 2, 30)`` seconds (killed,
even with ``kill -9``, or hung) is named in an :class:`AsrError` raised in every other learner's main thread; a
learner whose main thread does not leave within a few more seconds is ended with ``os._exit(1)``. The
parent of locally spawned learners waits for all of them and raises one :class:`AsrError` naming the
first learner that died.
"""

from __future__ import annotations

import datetime
import logging
import multiprocessing.connection
import os
import signal
import socket
import sys
import time
from typing import Any, Callable, NoReturn, Optional

import torch
import torch.distributed as dist

from asrtrain.distributed.runtime.backend import agree_backend, resolve_backend
from asrtrain.distributed.runtime.netif import choose_gloo_interface, loopback_interface
from asrtrain.distributed.runtime.attempt import PREFIX_ENV, join_attempt
from asrtrain.distributed.runtime.peerwatch import VERDICT_KEY, PeerWatch, get_verdict, set_verdict
from asrtrain.errors import AsrError

log = logging.getLogger(__name__)

ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")
# What the env:// rendezvous needs (MASTER_PORT included: torch has no default for it).
LAUNCH_KEYS = ENV_KEYS + ("MASTER_PORT",)
LOCAL_HOST = "127.0.0.1"
# A silent peer is declared dead after min(timeout_s / 2, this): the survivors leave within 60 s even
# when timeout_s (the collectives' patience) is long. Survivors still alive this long after the first
# failure are killed by the parent.
MAX_DEAD_AFTER_S = 30.0
LEFTOVER_KILL_S = 60.0
# The collectives wait this long past dist.hang_timeout_s, so the hang detector names a hung learner first.
HANG_MARGIN_S = 60.0


def in_launched_group() -> bool:
    """True under torchrun (or srun with the variables exported): join that group, do not spawn.

    Raises:
        AsrError: a launcher environment exported in part (some of RANK, WORLD_SIZE, LOCAL_RANK,
            MASTER_ADDR, MASTER_PORT, not all), or an ``srun`` step of several tasks with none of them: each
            task would otherwise spawn a job of its own, all on ``cuda:0``, all writing rank 0's files.
    """
    present = [k for k in LAUNCH_KEYS if k in os.environ]
    if len(present) == len(LAUNCH_KEYS):
        return True
    if present:
        missing = [k for k in LAUNCH_KEYS if k not in os.environ]
        raise AsrError(f"a launcher environment exported in part: {', '.join(present)} set but "
                       f"{', '.join(missing)} not", fix="export all of " + ", ".join(LAUNCH_KEYS)
                       + " (torchrun does; see the srun line in docs/guide/multinode.md), or none")
    tasks = os.environ.get("SLURM_STEP_NUM_TASKS", "").strip()
    if "SLURM_PROCID" in os.environ and tasks.isdigit() and int(tasks) > 1:
        raise AsrError(f"an srun step of SLURM_STEP_NUM_TASKS={tasks} tasks without RANK, WORLD_SIZE, LOCAL_RANK, "
                       "MASTER_ADDR, MASTER_PORT: each task would run a job of its own",
                       fix="export them from SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID ... as in "
                           "docs/guide/multinode.md, or run one task that spawns --learners N")
    return False


def launched_learners(requested: int, default_ok: bool = True) -> int:
    """Under torchrun/srun, the job's learner count: WORLD_SIZE. ``requested`` (dist.learners) may be 0
    (take WORLD_SIZE), the config's default 1 when ``default_ok``, or must equal it. Outside a launched
    group, ``requested``."""
    if not in_launched_group():
        return requested
    world = int(os.environ["WORLD_SIZE"])
    if requested not in ((0, 1, world) if default_ok else (0, world)):
        raise AsrError(f"--learners {requested} but the launcher started WORLD_SIZE={world} learners",
                       fix="drop --learners under torchrun/srun or make them agree")
    return world


def writes_job_files() -> bool:
    """Whether this process writes the exp dir's job files (config.yaml, tokenizer.model, --restart's
    removals): always outside a launched group; under torchrun/srun only each node's LOCAL_RANK 0, so the
    processes of a node do not race over one directory, and a node without a shared file system still
    gets the config and tokenizer it trains with (``--resume`` needs a shared one: only rank 0 marks the
    latest checkpoint, and a learner that finds none is refused). The rendezvous orders it: no learner
    starts before every process has joined."""
    return not in_launched_group() or os.environ.get("LOCAL_RANK", "0") == "0"


def is_job_leader() -> bool:
    """The one process of the whole job that reports for it (prints the final model's path)."""
    return not in_launched_group() or os.environ.get("RANK", "0") == "0"


def local_store(timeout: datetime.timedelta) -> "dist.TCPStore":
    """The rendezvous store of a locally spawned job, listening on 127.0.0.1 only.

    TCPStore's server binds every interface when it opens its own socket; handing it a socket already
    bound to the loopback address keeps the heartbeats and batch claims unreachable from other hosts.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((LOCAL_HOST, 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    # The store takes the descriptor over (and closes it when it goes).
    return dist.TCPStore(LOCAL_HOST, port, None, True, timeout=timeout, wait_for_workers=False,
                         master_listen_fd=sock.detach())


def run_learners(fn: Callable[[int, int, Any], Any], args: Any, learners: int, backend: str = "auto",
                 timeout_s: float = 60.0, threads: int = 1, device: str = "cpu", hang_after: float = 0.0,
                 process_group: bool = True) -> None:
    """Run ``fn(rank, world_size, args)`` on every learner of the job.

    Args:
        fn: a module-level function (it is pickled by name for spawned processes).
        args: one picklable argument handed to ``fn`` (a Config, a namespace ...).
        learners: N. Under torchrun it must equal WORLD_SIZE (or be 0: take WORLD_SIZE).
        backend: ``auto`` | ``gloo`` | ``nccl`` (DistConfig.backend).
        timeout_s: process-group timeout (DistConfig.timeout_s); a silent learner is declared dead after
            min(timeout_s / 2, 30) s.
        threads: torch intra-op threads per learner.
        device: ``auto | cpu | cuda | cuda:N`` (:mod:`asrtrain.device`): each learner binds its device before
            it creates any process group.
        hang_after: name a learner whose main thread made no progress for this many seconds while its
            heartbeat went on (:mod:`asrtrain.distributed.runtime.beacon`); 0 = off.
        process_group: False when ``fn`` makes no collective call (strategy single): a job of one learner
            in this process then makes no process group (no gloo threads to tear down, no ``[Gloo]``
            line on the terminal). Spawned and torchrun learners always make one.

    Raises:
        AsrError: one line naming the first learner that died or failed.
    """
    if in_launched_group():
        world = launched_learners(learners, default_ok=False)  # train() passes WORLD_SIZE already
        _learner_entry(int(os.environ["RANK"]), world, fn, args, backend, timeout_s, threads, None, device,
                       hang_after)
        return
    if learners < 1:
        raise AsrError(f"--learners must be >= 1, got {learners}")
    # The parent hosts the rendezvous store: it outlives any learner, so a dead rank 0 is named too.
    tmo = datetime.timedelta(seconds=timeout_s)
    store = local_store(tmo)
    if learners == 1:
        _learner_entry(0, 1, fn, args, backend, timeout_s, threads, (LOCAL_HOST, store.port), device,
                       hang_after, in_process=True, process_group=process_group)
        return
    keep_sockets_on_loopback(os.environ)
    ctx = None
    try:
        # Ctrl-C reaches the whole process group: the parent stops the learners and says so in one line.
        # The learners start with SIGINT ignored (an ignored signal stays ignored through exec, and Python
        # then installs no handler of its own), so one still importing torch prints no KeyboardInterrupt
        # traceback. (A blocked mask would not do: multiprocessing's spawn clears it in the child.) A
        # Ctrl-C in the moment the learners are being started is lost; the next one is seen.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            ctx = torch.multiprocessing.start_processes(
                _learner_entry, args=(learners, fn, args, backend, timeout_s, threads, (LOCAL_HOST, store.port),
                                      device, hang_after, False, logging.getLogger().getEffectiveLevel()),
                nprocs=learners, join=False, start_method="spawn")
        finally:
            signal.signal(signal.SIGINT, previous)
        _supervise(ctx.processes, timeout_s, store)
    except KeyboardInterrupt:
        for p in ctx.processes if ctx is not None else ():
            if p.is_alive():
                p.terminate()
        for p in ctx.processes if ctx is not None else ():
            p.join(10)
        raise AsrError("interrupted (SIGINT / Ctrl-C); the learners were stopped",
                       fix="continue from the last checkpoint with --resume") from None
    finally:
        del store


def group_timeout_s(timeout_s: float, hang_after: float) -> float:
    """How long a collective may wait: ``timeout_s``, but past the hang detector's ``hang_after`` by
    :data:`HANG_MARGIN_S` when that is longer. NCCL's watchdog aborts a learner whose collective outlives
    its group's timeout (SIGABRT): were it shorter, a hang would kill the healthy learners waiting on the
    hung one before the detector named it."""
    return max(timeout_s, hang_after + HANG_MARGIN_S) if hang_after > 0 else timeout_s


def _supervise(procs, timeout_s: float, store=None) -> None:
    """Wait for every learner; after the first failure give the others time to exit, then kill them.

    A learner that dies is known here at once (its process sentinel): the verdict goes into the store,
    where every survivor's :class:`PeerWatch` reads it within a heartbeat period, instead of waiting for
    the dead learner's heartbeat to go stale. When the first learner to exit was only a messenger (it
    exited 1 after naming a hung peer), the verdict its watch wrote names the real culprit.
    """
    alive = {p.sentinel: rank for rank, p in enumerate(procs)}
    first: Optional[tuple] = None  # (rank, exitcode, time)
    while alive:
        ready = multiprocessing.connection.wait(list(alive), timeout=1.0)
        # A learner killed by a signal is the cause; learners that exit 1 in the same instant are effects.
        done = [alive.pop(s) for s in ready]
        for rank in done:
            procs[rank].join()
        for rank in sorted(done, key=lambda r: procs[r].exitcode >= 0):
            if procs[rank].exitcode != 0 and first is None:
                first = (rank, procs[rank].exitcode, time.monotonic())
                code = procs[rank].exitcode
                if store is not None:
                    set_verdict(store, f"learner rank {rank} died (killed by signal {signal.Signals(-code).name})"
                                 if code < 0 else f"learner rank {rank} failed (its error is logged above)")
        if first is not None and alive and time.monotonic() - first[2] > LEFTOVER_KILL_S:
            for s, rank in alive.items():
                log.error("learner rank %d did not exit after rank %d failed; killing it", rank, first[0])
                procs[rank].kill()
    log.debug("learner exit codes: %s", [p.exitcode for p in procs])
    if first is not None:
        rank, code, _ = first
        # A learner aborted (SIGABRT: NCCL's watchdog ending a collective that timed out) was waiting
        # on the cause, not the cause: a watch's verdict, when there is one, names it.
        told = code > 0 or code == -signal.SIGABRT
        verdict = get_verdict(store) if store is not None and told else None
        if verdict:
            raise AsrError(f"{verdict}; the other learners stopped")
        if code < 0:
            raise AsrError(f"learner rank {rank} died (killed by signal {signal.Signals(-code).name}); "
                           "the other learners stopped")
        raise AsrError(f"learner rank {rank} failed with exit code {code} (its error is logged above); "
                       "the other learners stopped")


def _learner_entry(rank: int, world_size: int, fn, args, backend: str, timeout_s: float, threads: int,
                   store_addr, device_spec: str = "cpu", hang_after: float = 0.0, in_process: bool = False,
                   log_level: int = logging.INFO, process_group: bool = True) -> None:
    """Body of one learner: bind its device, join the group, watch the peers, run ``fn``, report one
    line on error."""
    from asrtrain.device import bind_device, env_int, resolve_device, shares_gpu
    from asrtrain.distributed.base import native_stdout_to_stderr, set_group_timeout
    from asrtrain.progress import console_log

    if not in_process:
        console_log(log_level, f"%(asctime)s %(levelname)s rank{rank} %(name)s: %(message)s")
        if store_addr is not None:  # spawned here: our rank is our index on this node
            os.environ["LOCAL_RANK"] = str(rank)
            os.environ["LOCAL_WORLD_SIZE"] = str(world_size)
    if store_addr is not None and not in_process:
        # Ctrl-C reaches the whole process group: the parent stops the learners it spawned and says so in
        # one line; a learner that reported it too would add a line per rank (a race with the parent).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(max(1, threads))
    try:
        device = resolve_device(device_spec)
        # Learners share a GPU when this node runs several of them on one cuda:N (one per node does not).
        local = env_int("LOCAL_WORLD_SIZE", world_size)
        shared = shares_gpu(device_spec) and local > 1
        backend = resolve_backend(backend, device, shared) if world_size == 1 else backend
    except AsrError as err:
        _leave(rank, err, in_process, store_addr)
    bind_device(device)  # before any process group: NCCL's communicator is made for this GPU
    tmo = datetime.timedelta(seconds=group_timeout_s(timeout_s, hang_after))
    set_group_timeout(tmo)  # the strategies' own groups wait as long as the default one
    process_group = process_group or not in_process or world_size > 1
    if store_addr is None:  # torchrun / srun: the env:// rendezvous
        choose_gloo_interface(os.environ)  # before any gloo group: they read it when they are made
        host, port = os.environ["MASTER_ADDR"], int(os.environ.get("MASTER_PORT", "29500"))
        # torchrun's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE); bare env:// makes rank 0 host it
        agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        os.environ.pop(PREFIX_ENV, None)
        if agent:  # the agent's store outlives --max-restarts attempts: this attempt's keys apart
            raw = dist.TCPStore(host, port, None, False, timeout=tmo)
            store = dist.PrefixStore(join_attempt(raw, rank, world_size, tmo), raw)
        else:  # what init_method="env://" would make: rank 0 hosts it
            store, _, _ = next(dist.rendezvous("env://", rank, world_size, timeout=tmo))
        store_owner = "the torchrun agent" if agent else "learner rank 0"
    else:
        host, port = store_addr
        os.environ.pop(PREFIX_ENV, None)  # a store of this job's own: no namespace in it
        if not in_process:  # in-process, they would make the next run_learners think it is under torchrun
            os.environ.update(MASTER_ADDR=host, MASTER_PORT=str(port), RANK=str(rank),
                              WORLD_SIZE=str(world_size))
        store = dist.TCPStore(host, port, None, False, timeout=tmo) if process_group else None
        store_owner = "the parent process"
    if world_size > 1:
        try:  # one backend for the whole job: rank 0's (nodes may differ; see runtime/backend.py)
            backend = agree_backend(store, rank, world_size, backend, device, shared, tmo)
        except AsrError as err:
            _leave(rank, err, in_process, store_addr)
    if rank == 0:
        log.info("default process group: %s, learners on %s", backend, device_spec)
    if process_group:
        with native_stdout_to_stderr():  # gloo's connection line is not the command's output
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=tmo)
    watch = PeerWatch(host, port, rank, world_size, dead_after=min(timeout_s / 2, MAX_DEAD_AFTER_S),
                      store_owner=store_owner, hang_after=hang_after,
                      parent_reports=store_addr is not None and not in_process)
    watch.start_watching()
    try:
        fn(rank, world_size, args)
    except BaseException as err:  # noqa: B902 - every way out must name the cause in one line
        watch.muted = True  # no PeerFailure inside this handler: it is already on its way out
        message = watch.explain(err)
        if in_process:
            watch.stop()
            if process_group:
                dist.destroy_process_group()  # the caller may run another job in this process
            fix = "continue from the last checkpoint with --resume" if isinstance(err, KeyboardInterrupt) else None
            raise AsrError(message, fix=fix) from None
        _report(rank, message, store_addr, consequence=watch.failure is not None)
        os._exit(1)  # a dead peer can make process-group teardown hang: leave now
    watch.stop()
    if store_addr is None or process_group:
        dist.destroy_process_group()


def _report(rank: int, message: str, store_addr, consequence: bool = False) -> None:
    """A spawned learner's failure, told once: posted as the verdict in the parent's store (unless one is
    there: the first explanation wins), where the parent reads it and prints the job's one line, and the
    other learners' watches read it and stop. Under torchrun/srun (no parent of ours), or when the store
    cannot be reached, the learner prints its own line. ``consequence``: ``message`` names a peer's
    failure (the watch's verdict), so it needs no ``learner rank N:`` of its own."""
    line = message if consequence else f"learner rank {rank}: {message}"
    if store_addr is not None:
        try:
            client = dist.TCPStore(store_addr[0], store_addr[1], None, False,
                                   timeout=datetime.timedelta(seconds=10))
            set_verdict(client, line)
            client.get(VERDICT_KEY)  # a round trip: the verdict is stored before this process exits
            return
        except Exception:  # noqa: BLE001 - the parent is gone: say it here
            pass
    sys.stderr.write(f"asrtrain: error: {line}\n")
    sys.stderr.flush()


def _leave(rank: int, err: AsrError, in_process: bool, store_addr) -> NoReturn:
    """A learner's set-up error: raised in this process; from a learner process, reported once
    (:func:`_report`) and exit 1."""
    if in_process:
        raise err
    _report(rank, err.render(), store_addr)
    os._exit(1)


def keep_sockets_on_loopback(env) -> None:
    """Spawned learners' own sockets (gloo pairs, NCCL bootstrap) stay on the loopback interface, as the
    rendezvous store does; a user's GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME is kept."""
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        env.setdefault(var, loopback_interface())
