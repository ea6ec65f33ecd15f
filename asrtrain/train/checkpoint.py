"""Checkpoints: atomic, one file per learner and tag, a ``latest`` pointer written last.

Layout in ``<exp>/checkpoints/``::

    epoch-0003.rank0.pt          end of epoch 3 (position: epoch 4, batch 0)
    step-00001200.rank0.pt       mid-epoch, every ``train.checkpoint_every_steps``
    latest                       the tag of the newest complete checkpoint (all ranks written)

Each file holds the model, optimizer, step, sampler position (epoch, batch index), the RNG states
(CUDA's included), the fp16 gradient scaler, the strategy state and the learner's history; epoch files
also hold the averaged model of all learners (``avg_model``), which ``average_last`` uses for ``final.pt``.

Files hold only tensors and plain Python values, and are loaded with ``weights_only=True``: a checkpoint
someone hands you cannot run code. Each ``X.pt`` has a ``X.pt.sha256`` beside it, written at save and
checked at load, so a corrupted file is named instead of resumed from. Loading maps tensors to the
learner's device (``map_location``), so a GPU checkpoint resumes or decodes on a CPU and back.
"""

from __future__ import annotations

import logging
import queue
import random
import re
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_write_text
from asrtrain.model.files import load_checked, save_checked
from asrtrain.model.stamp import STAMP_KEY, check_same_stamp, check_stamp, stamp_of

log = logging.getLogger(__name__)


def rng_state(device: Optional[torch.device] = None) -> Dict[str, Any]:
    """Every generator a learner draws from, as tensors and plain values (loadable with weights_only)."""
    from asrtrain.device import rng_state as device_rng_state

    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(), "python": random.getstate(),
            "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
            **device_rng_state(device or torch.device("cpu"))}


def set_rng_state(state: Dict[str, Any], device: Optional[torch.device] = None) -> None:
    from asrtrain.device import set_rng_state as set_device_rng_state

    torch.set_rng_state(state["torch"].cpu())
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    # The checkpoint may have been loaded with map_location onto a GPU: numpy needs host memory.
    np.random.set_state((name, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached))
    set_device_rng_state(state, device or torch.device("cpu"))


def ckpt_dir(exp_dir: Path) -> Path:
    return Path(exp_dir) / "checkpoints"


def ckpt_path(exp_dir: Path, tag: str, rank: int) -> Path:
    return ckpt_dir(exp_dir) / f"{tag}.rank{rank}.pt"


def save(exp_dir: Path, tag: str, rank: int, state: Dict[str, Any]) -> Path:
    path = ckpt_path(exp_dir, tag, rank)
    save_checked(state, path)
    return path


def snapshot(obj: Any, memo: Optional[Dict[int, torch.UntypedStorage]] = None) -> Any:
    """A host copy of ``obj``'s tensors (in dicts, lists and tuples; other values as they are), safe to
    write while training goes on changing the originals in place. Tensors that share a storage share
    the copy's, so ``torch.save`` still writes it once (the one-learner epoch checkpoint's ``avg_model``
    is the ``model`` entry's storage)."""
    memo = {} if memo is None else memo
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        storage = t.untyped_storage()
        key = storage.data_ptr() if storage.nbytes() else id(t)
        if key not in memo:
            memo[key] = storage.cpu() if storage.device.type != "cpu" else storage.clone()
        out = torch.empty(0, dtype=t.dtype)
        out.set_(memo[key], t.storage_offset(), t.size(), t.stride())
        return out
    if isinstance(obj, dict):
        return {k: snapshot(v, memo) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        seq = [snapshot(v, memo) for v in obj]
        return seq if isinstance(obj, list) else tuple(seq)
    return obj


#: a write for the worker, and the event it sets when the write is done (or failed)
_WriteJob = Tuple[Callable[[], None], threading.Event]


class AsyncWriter:
    """Writes checkpoints on a background thread while training goes on (one learner's run).

    ``submit`` copies the payload's tensors to the host (:func:`snapshot`: one memory copy, ~15 ms for
    55 MB here) and returns; the thread serialises, hashes and atomically writes the file, then runs
    ``then`` (``mark_latest``), so ``latest`` still names only complete checkpoints. At most one write is in
    flight: the next ``submit`` waits for the previous one. A failed write (a full disk) is raised in the
    training thread by the next ``submit`` or ``wait``. Why: on 2 CPU threads a 55 MB epoch checkpoint
    stalled training 0.36 s (serialising, sha256, fsync), 4% of a 4,000-utterance synthetic epoch."""

    def __init__(self) -> None:
        # One worker for the whole run, started here, before training: ``submit`` only queues a job. A
        # thread started per checkpoint could be caught by Ctrl-C inside ``Thread.start`` (launched, not yet
        # marked started), and ``close`` then could neither join it nor tell whether it was writing.
        self._jobs: "queue.SimpleQueue[Optional[_WriteJob]]" = queue.SimpleQueue()
        self._done: Optional[threading.Event] = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._work, name="asrtrain-ckpt", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            write, done = job
            try:
                write()
            except BaseException as err:  # noqa: BLE001 - handed to the training thread
                self._error = err
            finally:
                done.set()

    def submit(self, path: Path, payload: Dict[str, Any], then: Optional[Callable[[], None]] = None) -> None:
        self.wait()
        if self._thread is None:
            raise RuntimeError("checkpoint writer used after close()")
        copy = snapshot(payload)

        def write() -> None:
            save_checked(copy, path)
            if then is not None:
                then()

        done = threading.Event()
        self._jobs.put((write, done))
        self._done = done

    def wait(self) -> None:
        """Block until the write in flight (if any) is on disk; raise its error if it failed."""
        if self._done is not None:
            self._done.wait()
            self._done = None
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def close(self) -> None:
        """Finish every queued write and end the worker; also the way out of a failed or interrupted run,
        so a write's error is logged, not raised (the run's own error is the one to report). The worker
        takes jobs in order, so the stop sign queued here comes after any write, even one queued by a
        ``submit`` that Ctrl-C cut short."""
        if self._thread is None:
            return
        self._jobs.put(None)
        self._thread.join()
        self._thread, self._done = None, None
        if self._error is not None:
            err, self._error = self._error, None
            log.error("checkpoint write failed: %s", err)


def mark_latest(exp_dir: Path, tag: str, keep: int, world_size: int, keep_epochs: int = 0) -> None:
    """Point ``latest`` at ``tag`` (call after every rank has written it), then prune (:func:`prune`)."""
    atomic_write_text(ckpt_dir(exp_dir) / "latest", tag + "\n")
    prune(exp_dir, tag, keep, world_size, keep_epochs)


def prune(exp_dir: Path, tag: str, keep: int, world_size: int, keep_epochs: int = 0) -> None:
    """Remove step files beyond the newest ``keep``, epoch files beyond the newest ``max(keep,
    keep_epochs)`` (``final.pt`` averages the last ``train.average_last`` epochs, so those stay), never
    ``tag``'s. The tags come from every rank's files, not rank 0's alone: on a node without a shared file
    system, whose disk holds only its own ranks' files, its local leader prunes them too."""
    names = [p.name for p in ckpt_dir(exp_dir).glob("*.rank*.pt")]
    tags = {n.split(".rank")[0] for n in names}
    steps = sorted(t for t in tags if t.startswith("step-"))
    epochs = sorted((t for t in tags if t.startswith("epoch-")), key=lambda t: int(t[6:]))
    old = steps[:-max(1, keep)] + epochs[:-max(1, keep, keep_epochs)]
    for old_tag in old:
        if old_tag == tag:
            continue
        for r in range(world_size):
            p = ckpt_path(exp_dir, old_tag, r)
            p.unlink(missing_ok=True)
            Path(str(p) + ".sha256").unlink(missing_ok=True)


def clean_stale(exp_dir: Path) -> int:
    """Remove ``.*.tmp`` files that a killed write left in the checkpoint dir; returns how many."""
    n = 0
    for p in ckpt_dir(exp_dir).glob(".*.tmp"):
        p.unlink(missing_ok=True)
        n += 1
    return n


def latest_tag(exp_dir: Path) -> Optional[str]:
    """The newest complete checkpoint's tag, None when the run has none. Checkpoint files without a
    readable ``latest`` are an error: resuming from scratch would overwrite them."""
    p = ckpt_dir(exp_dir) / "latest"
    files = sorted(ckpt_dir(exp_dir).glob("*.rank0.pt"))
    tag = p.read_text(errors="replace").strip() if p.is_file() else ""
    if tag and ckpt_path(exp_dir, tag, 0).is_file():
        return tag
    if files:
        what = f"names {tag!r}, which does not exist" if tag else "is missing or empty"
        raise AsrError(f"{p.name} {what}, but {len(files)} checkpoint file(s) are there (newest "
                       f"{files[-1].name})", p,
                       fix=f"write the tag to resume from into it (e.g. echo {files[-1].name.split('.rank')[0]} > {p}), "
                           "or train with --restart to start over")
    return None


def load(exp_dir: Path, tag: str, rank: int, map_location: Any = "cpu") -> Dict[str, Any]:
    path = ckpt_path(exp_dir, tag, rank)
    if not path.is_file():
        raise AsrError(f"checkpoint for learner {rank} missing", path,
                       fix="resume with the same --learners as the interrupted run")
    payload = load_checked(path, map_location)
    missing = [k for k in ("model", "optimizer", "step", "epoch", "batch_index", "rng") if k not in payload] \
        if isinstance(payload, dict) else ["everything"]
    if missing:
        raise AsrError(f"not a training checkpoint (no {', '.join(missing)})", path,
                       fix="use a checkpoint from <exp>/checkpoints")
    return payload


def epoch_of(path: Path) -> int:
    """The epoch an ``epoch-NNNN.rankR.pt`` checkpoint was written at the end of."""
    return int(re.findall(r"epoch-(\d+)", path.name)[0])


_EPOCH_NAME = re.compile(r"epoch-\d+\.rank0\.pt")


def epoch_checkpoints(exp_dir: Path) -> List[Path]:
    """Learner 0's ``epoch-NNNN.rank0.pt`` checkpoints, oldest first. Other files that the glob matches
    (a user's ``epoch-best.rank0.pt`` copy) are not training's and are left out, with a warning."""
    found = ckpt_dir(exp_dir).glob("epoch-*.rank0.pt")
    ours, other = [], []
    for p in found:
        (ours if _EPOCH_NAME.fullmatch(p.name) else other).append(p)
    if other:
        log.warning(
            "%s: %d file(s) named like an epoch checkpoint but not epoch-NNNN.rank0.pt are not used, e.g. %s",
            ckpt_dir(exp_dir), len(other), sorted(other)[0].name)
    return sorted(ours, key=epoch_of)


def average_last(exp_dir: Path, k: int, device: Optional[torch.device] = None) -> Dict[str, torch.Tensor]:
    """Average the ``avg_model`` of the last ``k`` epoch checkpoints (floating tensors only), summing on
    ``device`` (default the CPU); the result is on the host. Models of different shapes or saved configs
    (checkpoints of two runs) are refused, naming both files."""
    return _average(exp_dir, k, device)[0]


def _average(exp_dir: Path, k: int, device: Optional[torch.device] = None
             ) -> Tuple[Dict[str, torch.Tensor], Optional[Dict[str, Any]]]:
    """:func:`average_last`, and the saved config of the checkpoints averaged (None for older files)."""
    if k < 1:
        raise AsrError(f"--last {k}: must be >= 1 (the number of epoch checkpoints to average)",
                       ckpt_dir(exp_dir), fix="e.g. --last 3")
    paths = epoch_checkpoints(exp_dir)[-k:]
    if not paths:
        raise AsrError("no epoch checkpoints to average", ckpt_dir(exp_dir), fix="train first")
    total: Dict[str, torch.Tensor] = {}
    stamp: Optional[Dict[str, Any]] = None
    for p in paths:
        payload = load_checked(p, device or "cpu")
        if not isinstance(payload, dict) or "avg_model" not in payload:
            raise AsrError("epoch checkpoint without the learner-averaged model (avg_model)", p,
                           fix="average epoch checkpoints written by asrtrain train")
        state = payload["avg_model"]
        this = stamp_of(payload, p)
        if total:
            _check_same_model(paths[0], total, p, state)
            check_same_stamp(paths[0], stamp, p, this)
        stamp = stamp if stamp is not None else this
        for name, t in state.items():
            if name not in total:
                total[name] = t.clone().double() if t.is_floating_point() else t.clone()
            elif t.is_floating_point():
                total[name] += t.double()
    out = {n: ((t / len(paths)).float() if t.is_floating_point() else t).cpu() for n, t in total.items()}
    bad = [n for n, t in out.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise AsrError(f"the average of {len(paths)} checkpoint(s) has non-finite weights ({', '.join(bad[:3])}); "
                       "nothing written", ckpt_dir(exp_dir),
                       fix="average fewer, earlier checkpoints (--last), or retrain with a lower train.lr")
    log.info("averaged %d checkpoints: %s", len(paths), ", ".join(p.name for p in paths))
    return out, stamp


def average_exp(exp_dir: Path, k: Optional[int] = None, out: Optional[Path] = None, force: bool = False,
                device: Optional[torch.device] = None) -> Path:
    """``asrtrain average``: average the last ``k`` epoch checkpoints of ``exp_dir`` into ``out``.

    ``k`` defaults to the run's ``train.average_last`` (its ``config.yaml``); when fewer epoch checkpoints
    exist, as many as there are are averaged with a warning (``train`` does the same for ``final.pt``),
    but an explicit ``k`` above the count is an error. ``out`` defaults to ``EXP/avg<N>.pt`` (N averaged),
    like ESPnet's ``valid.acc.ave_Nbest.pth``: ``final.pt``, which ``train`` wrote, is left alone. An
    existing ``out`` is replaced only with ``force``. Returns the path written."""
    exp_dir = Path(exp_dir)
    if k is not None and k < 1:
        raise AsrError(f"--last {k}: must be >= 1 (the number of epoch checkpoints to average)",
                       ckpt_dir(exp_dir), fix="e.g. --last 3")
    found = epoch_checkpoints(exp_dir)
    asked = k if k is not None else _average_last_of(exp_dir)
    if not found:
        raise AsrError("no epoch checkpoints to average", ckpt_dir(exp_dir), fix="train first")
    if k is not None and k > len(found):
        raise AsrError(f"--last {k}: only {len(found)} epoch checkpoint(s) in {ckpt_dir(exp_dir)} "
                       f"({found[0].name.split('.rank')[0]} .. {found[-1].name.split('.rank')[0]})",
                       fix=f"use --last {len(found)} or less")
    if k is None and asked > len(found):
        log.warning("%s: train.average_last is %d but only %d epoch checkpoint(s) exist: averaging %d",
                    exp_dir, asked, len(found), len(found))
        asked = len(found)
    path = Path(out) if out is not None else exp_dir / f"avg{asked}.pt"
    if path.is_dir():
        raise AsrError("is a directory; --out must be a model file name", path,
                       fix=f"give a file name, e.g. --out {path / f'avg{asked}.pt'}")
    if path.exists() and not force:
        raise AsrError("exists already; average does not replace a model file", path,
                       fix="add --force to replace it, or give another --out")
    model, stamp = _average(exp_dir, asked, device)
    payload: Dict[str, Any] = {"model": model, "averaged": asked, "epochs": epoch_of(found[-1])}
    if stamp is not None:
        _check_exp_config(exp_dir, stamp, epoch_checkpoints(exp_dir)[-1])
        payload[STAMP_KEY] = stamp
    save_checked(payload, path)
    return path


def _check_exp_config(exp_dir: Path, stamp: Dict[str, Any], newest: Path) -> None:
    """Refuse averaging checkpoints trained under another model or features config than the exp dir's
    config.yaml says (an edited file): the average would be decoded under the edited one."""
    from asrtrain.config.file import load_config

    stored = Path(exp_dir) / "config.yaml"
    if stored.is_file():
        check_stamp({STAMP_KEY: stamp}, load_config(stored), stored, newest)


def _average_last_of(exp_dir: Path) -> int:
    """The run's ``train.average_last`` (its config.yaml; the default when the file has none)."""
    from asrtrain.config import TrainConfig
    from asrtrain.config.yamlio import read_yaml_mapping

    stored = Path(exp_dir) / "config.yaml"
    if not stored.is_file():
        return TrainConfig().average_last
    value = (read_yaml_mapping(stored).get("train") or {}).get("average_last", TrainConfig().average_last)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AsrError(f"train.average_last is {value!r}, not a whole number >= 1", stored,
                       fix="give --last K, or restore the file")
    return value


def _check_same_model(first: Path, total: Dict[str, torch.Tensor], path: Path, state: Dict[str, Any]) -> None:
    """Refuse averaging ``path``'s model into ``first``'s unless they have the same keys and shapes."""
    fix = "average epoch checkpoints of one training run (one model config), or fewer with --last"
    extra = sorted(set(total) ^ set(state))
    if extra:
        where = first.name if extra[0] in total else path.name
        raise AsrError(f"the models of {first.name} and {path.name} differ: '{extra[0]}' is only in {where}",
                       path, fix=fix)
    for name, t in state.items():
        if tuple(t.shape) != tuple(total[name].shape):
            raise AsrError(f"the models of {first.name} and {path.name} differ: '{name}' has shape "
                           f"{list(total[name].shape)} in the first, {list(t.shape)} in the second", path,
                           fix=fix)
