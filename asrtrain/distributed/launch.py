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
        MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) \\
        python -m asrtrain train ...'

(LOCAL_WORLD_SIZE is the default H-ADPSGD group size when ``learners_per_node`` is 0.)

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
import threading
import time
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist

from asrtrain.errors import AsrError

log = logging.getLogger(__name__)

ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")
LOCAL_HOST = "127.0.0.1"
# A silent peer is declared dead after min(timeout_s / 2, this): the survivors leave within 60 s even
# when timeout_s (the collectives' patience) is long. Survivors still alive this long after the first
# failure are killed by the parent.
MAX_DEAD_AFTER_S = 30.0
LEFTOVER_KILL_S = 60.0


def in_launched_group() -> bool:
    """True under torchrun (or srun with the variables exported): join that group, do not spawn."""
    return all(k in os.environ for k in ENV_KEYS)


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


def resolve_backend(backend: str, device: Optional[torch.device] = None, shared_gpu: bool = False) -> str:
    """The default process group's backend for a learner computing on ``device``.

    ``auto`` -> nccl when the learner computes on its own GPU, gloo on the CPU or when the learners of a
    node share one GPU (NCCL refuses two ranks on one device). Asking for nccl without CUDA, or for a
    learner on the CPU, is an error. (The ADPSGD gossip ring and the small host-side collectives always
    use gloo groups of their own, beside this one.)
    """
    if backend not in ("auto", "gloo", "nccl"):
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
                 timeout_s: float = 60.0, threads: int = 1, device: str = "cpu", hang_after: float = 0.0) -> None:
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
            heartbeat went on (:mod:`asrtrain.distributed.progress`); 0 = off.

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
                       hang_after, in_process=True)
        return
    # Spawned learners' own sockets (gloo pairs, NCCL bootstrap) also stay on the loopback interface.
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        os.environ.setdefault(var, loopback_interface())
    ctx = torch.multiprocessing.start_processes(
        _learner_entry, args=(learners, fn, args, backend, timeout_s, threads, (LOCAL_HOST, store.port), device,
                              hang_after),
        nprocs=learners, join=False, start_method="spawn")
    try:
        _supervise(ctx.processes, timeout_s, store)
    except KeyboardInterrupt:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
        for p in ctx.processes:
            p.join(10)
        raise AsrError("interrupted (SIGINT / Ctrl-C); the learners were stopped",
                       fix="continue from the last checkpoint with --resume") from None
    finally:
        del store


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
                    _set_verdict(store, f"learner rank {rank} died (killed by signal {signal.Signals(-code).name})"
                                 if code < 0 else f"learner rank {rank} failed (its error is logged above)")
        if first is not None and alive and time.monotonic() - first[2] > LEFTOVER_KILL_S:
            for s, rank in alive.items():
                log.error("learner rank %d did not exit after rank %d failed; killing it", rank, first[0])
                procs[rank].kill()
    log.debug("learner exit codes: %s", [p.exitcode for p in procs])
    if first is not None:
        rank, code, _ = first
        verdict = _get_verdict(store) if store is not None and code > 0 else None
        if verdict:
            raise AsrError(f"{verdict}; the other learners stopped")
        if code < 0:
            raise AsrError(f"learner rank {rank} died (killed by signal {signal.Signals(-code).name}); "
                           "the other learners stopped")
        raise AsrError(f"learner rank {rank} failed with exit code {code} (its error is logged above); "
                       "the other learners stopped")


VERDICT_KEY = "asrtrain/hb/verdict"


def _set_verdict(store, message: str) -> None:
    """Record the first explanation of a failure (later ones do not overwrite it)."""
    try:
        store.compare_set(VERDICT_KEY, "", message)
    except Exception:  # noqa: BLE001 - the store itself may be gone
        pass


def _get_verdict(store) -> Optional[str]:
    try:
        if store.check([VERDICT_KEY]):
            return store.get(VERDICT_KEY).decode(errors="replace") or None
    except Exception:  # noqa: BLE001
        pass
    return None


def _learner_entry(rank: int, world_size: int, fn, args, backend: str, timeout_s: float, threads: int,
                   store_addr, device_spec: str = "cpu", hang_after: float = 0.0, in_process: bool = False) -> None:
    """Body of one learner: bind its device, join the group, watch the peers, run ``fn``, report one
    line on error."""
    from asrtrain.device import bind_device, resolve_device, shares_gpu
    from asrtrain.distributed.base import set_group_timeout

    if not in_process:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format=f"%(asctime)s %(levelname)s rank{rank} %(name)s: %(message)s",
                            datefmt="%H:%M:%S")
        if store_addr is not None:  # spawned here: our rank is our index on this node
            os.environ["LOCAL_RANK"] = str(rank)
            os.environ["LOCAL_WORLD_SIZE"] = str(world_size)
    torch.set_num_threads(max(1, threads))
    try:
        device = resolve_device(device_spec)
        # Learners share a GPU when this node runs several of them on one cuda:N (one per node does not).
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
        backend = resolve_backend(backend, device, shares_gpu(device_spec) and local > 1)
    except AsrError as err:
        if in_process:
            raise
        sys.stderr.write(f"asrtrain: error: learner rank {rank}: {err.render()}\n")
        sys.stderr.flush()
        os._exit(1)
    bind_device(device)  # before any process group: NCCL's communicator is made for this GPU
    tmo = datetime.timedelta(seconds=timeout_s)
    set_group_timeout(tmo)  # the strategies' own groups wait as long as the default one
    if store_addr is None:  # torchrun / srun: the env:// rendezvous
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world_size, timeout=tmo)
        host, port = os.environ["MASTER_ADDR"], int(os.environ.get("MASTER_PORT", "29500"))
        # torchrun's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE); bare env:// makes rank 0 host it
        agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        store_owner = "the torchrun agent" if agent else "learner rank 0"
    else:
        host, port = store_addr
        if not in_process:  # in-process, they would make the next run_learners think it is under torchrun
            os.environ.update(MASTER_ADDR=host, MASTER_PORT=str(port), RANK=str(rank),
                              WORLD_SIZE=str(world_size))
        store = dist.TCPStore(host, port, None, False, timeout=tmo)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=tmo)
        store_owner = "the parent process"
    watch = PeerWatch(host, port, rank, world_size, dead_after=min(timeout_s / 2, MAX_DEAD_AFTER_S),
                      store_owner=store_owner, hang_after=hang_after)
    watch.start_watching()
    try:
        fn(rank, world_size, args)
    except BaseException as err:  # noqa: B902 - every way out must name the cause in one line
        watch.muted = True  # no PeerFailure inside this handler: it is already on its way out
        message = watch.explain(err)
        if in_process:
            watch.stop()
            dist.destroy_process_group()  # the caller may run another job in this process
            raise AsrError(message) from None
        sys.stderr.write(f"asrtrain: error: learner rank {rank}: {message}\n")
        sys.stderr.flush()
        os._exit(1)  # a dead peer can make process-group teardown hang: leave now
    watch.stop()
    dist.destroy_process_group()


def loopback_interface() -> str:
    """The name of the loopback interface (``lo`` on Linux), for GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME."""
    try:
        for _, name in socket.if_nameindex():
            if name == "lo" or name.startswith("lo"):
                return name
    except OSError:
        pass
    return "lo"


class PeerFailure(AsrError):
    """Raised in a learner's main thread when another learner stopped responding."""


def suspended_for(prev: float, now: float, period: float) -> float:
    """Seconds this process was suspended between two heartbeat ticks ``prev`` and ``now`` (monotonic)
    that ``period`` apart were due; 0 unless the gap exceeds anything a busy scheduler causes (30 s, or
    10 periods)."""
    gap = now - prev - period
    return gap if gap > max(30.0, 10 * period) else 0.0


class PeerWatch:
    """Heartbeats in the rendezvous store; names a learner whose heartbeat stops.

    Every ``period`` seconds learner r increments its counter ``asrtrain/hb/<r>`` and reads all others.
    A counter unchanged for ``dead_after`` seconds means that learner died or hung. The main thread
    then gets a :class:`PeerFailure` (via SIGUSR1, so even a blocking sleep is interrupted); if it is
    stuck in a collective that does not return, the process exits after ``grace`` more seconds.
    """

    def __init__(self, host: str, port: int, rank: int, world_size: int, dead_after: float,
                 store_owner: str = "the parent process", period: float = 0.5, hang_after: float = 0.0):
        self.rank, self.world_size = rank, world_size
        self.hang_after = hang_after
        self.dead_after = max(2.0, dead_after)
        self.grace = min(10.0, self.dead_after)
        self.period = period
        self.failure: Optional[str] = None
        self.muted = False
        self._stop = threading.Event()
        self._where = f"{host}:{port}"
        self._owner = store_owner
        # Our own client connection: the process group's store is used by other threads meanwhile.
        self._raw_store = dist.TCPStore(host, port, None, False,
                                        timeout=datetime.timedelta(seconds=self.dead_after))
        self._store = dist.PrefixStore("asrtrain/hb", self._raw_store)
        self._thread = threading.Thread(target=self._run, name=f"peerwatch{rank}", daemon=True)

    def start_watching(self) -> None:
        self._old_handler = None
        if threading.current_thread() is threading.main_thread():
            self._old_handler = signal.signal(signal.SIGUSR1, self._raise_in_main)
        self._main_ident = threading.main_thread().ident
        self._store.set(str(self.rank), "0")
        # Every learner is past init_process_group, so all keys appear within moments.
        self._store.wait([str(r) for r in range(self.world_size)], datetime.timedelta(seconds=60))
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._old_handler is not None:
            signal.signal(signal.SIGUSR1, self._old_handler)

    def explain(self, err: BaseException) -> str:
        """The one-line cause of ``err``: a dead peer if one is (or soon is) known, else ``err`` itself."""
        if isinstance(err, PeerFailure):
            return err.message
        if not isinstance(err, (AsrError, KeyboardInterrupt)):
            # A collective that failed because a peer vanished: wait for the heartbeat verdict.
            deadline = time.monotonic() + self.dead_after + 2 * self.period
            while self.failure is None and time.monotonic() < deadline and self._thread.is_alive():
                time.sleep(self.period / 2)
        if self.failure is not None:
            return self.failure
        if isinstance(err, AsrError):
            return err.render()
        if isinstance(err, KeyboardInterrupt):
            return "interrupted (SIGINT / Ctrl-C, or the parent process was stopped)"
        return " ".join(f"{type(err).__name__}: {err}".split())

    def _raise_in_main(self, signum, frame):
        if self.failure is not None and not self._stop.is_set() and not self.muted:
            raise PeerFailure(self.failure)

    def _declare(self, message: str) -> None:
        self.failure = message
        log.error("%s", message)
        _set_verdict(self._raw_store, message)
        if self._main_ident is not None:
            signal.pthread_kill(self._main_ident, signal.SIGUSR1)
        if self._stop.wait(self.grace):
            return
        sys.stderr.write(f"asrtrain: error: learner rank {self.rank}: {message} "
                         f"(main thread stuck for {self.grace:.0f} s; exiting)\n")
        sys.stderr.flush()
        os._exit(1)

    def _run(self) -> None:
        from asrtrain.distributed.progress import Progress, find_hung, mine, note_progress

        count = 0
        others = [r for r in range(self.world_size) if r != self.rank]
        seen = {r: (None, time.monotonic()) for r in others}
        last = resumed = time.monotonic()
        while not self._stop.wait(self.period):
            count += 1
            now = time.monotonic()
            away = suspended_for(last, now, self.period)
            last = now
            if away:
                # The whole process was stopped (Ctrl-Z, SIGSTOP, Slurm's scontrol suspend): its own clocks ran
                # on while nothing could move. Restart them instead of blaming itself or its peers.
                log.warning("learner %d resumed after %.0f s suspended: the heartbeat and hang clocks restart",
                            self.rank, away)
                note_progress()
                seen = {r: (value, now) for r, (value, _) in seen.items()}
                resumed = now
            me = mine(self._main_ident)
            try:
                self._store.set(str(self.rank), me.encode(count))
                values = self._store.multi_get([str(r) for r in others]) if others else []
            except Exception as err:  # noqa: BLE001 - the store itself is gone
                if self._stop.is_set():
                    return
                self._declare(f"{self._owner}, which hosts the rendezvous store at {self._where}, "
                              "died or hung "
                              f"({' '.join(str(err).split())[:100]})")
                return
            verdict = _get_verdict(self._raw_store)
            if verdict:  # the parent (or another learner) already knows who failed
                self._declare(verdict)
                return
            for r, value in zip(others, values):
                if value != seen[r][0]:
                    seen[r] = (value, now)
                elif value != b"done" and now - seen[r][1] > self.dead_after:
                    self._declare(f"learner rank {r} stopped responding for {now - seen[r][1]:.0f} s "
                                  "(killed or hung)")
                    return
            if self.hang_after > 0 and now - resumed > 4 * self.period:  # peers resume and report too
                progress = {r: p for r, v in zip(others, values) if (p := Progress.decode(v)) is not None}
                progress[self.rank] = me
                hung = find_hung(progress, time.time(), self.hang_after)
                if hung is not None:
                    self._declare(f"learner rank {hung} made no progress for "
                                  f"{time.time() - progress[hung].wall:.0f} s while its heartbeat went on "
                                  "(its main thread is stuck)")
                    return
        try:  # a learner that finished normally must not be mistaken for a dead one
            self._store.set(str(self.rank), "done")
        except Exception:  # noqa: BLE001
            pass
