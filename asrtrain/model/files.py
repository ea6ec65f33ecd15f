"""Model and checkpoint files on disk: :func:`save_checked` writes atomically with a ``.sha256`` beside the
file; :func:`load_checked` checks it and loads with ``weights_only=True``, so a file someone hands you cannot
run code. Training (:mod:`asrtrain.train.checkpoint`) and decoding (:mod:`asrtrain.decode.run`) both use it.

A packed model (:mod:`asrtrain.transcribe.pack`) holds its weights as ``model.safetensors`` instead
(:func:`save_safetensors`, :func:`load_safetensors`): a flat table of tensors that any framework reads and
whose loading runs no code at all. :func:`load_state` reads either kind of file.
"""

from __future__ import annotations

import hashlib
import io
import pickle
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch

from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_open, atomic_write_text


def save_checked(obj: Any, path: Path) -> None:
    """``torch.save`` atomically, with the file's sha256 in ``path.sha256`` (written first: a kill
    between the two leaves a mismatch that :func:`load_checked` names, never a silent bad load)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    atomic_write_text(Path(str(path) + ".sha256"), hashlib.sha256(data).hexdigest() + "\n")
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def load_checked(path: Path, map_location: Any = "cpu") -> Any:
    """Load a file written by :func:`save_checked` (or any torch file without a ``.sha256``), never
    running code (``weights_only=True``); one-line errors for a missing, corrupt or foreign file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AsrError("model file not found", path, fix="check the path") from None
    except OSError as err:
        raise AsrError(f"cannot read: {err.strerror}", path) from None
    sums = Path(str(path) + ".sha256")
    if sums.is_file():
        want = sums.read_text(errors="replace").strip()
        if hashlib.sha256(data).hexdigest() != want:
            raise AsrError("checksum mismatch: the file is corrupt or was changed after it was written", path,
                           fix=f"use an earlier checkpoint, or delete {sums.name} if you changed it on purpose")
    try:
        return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        first = " ".join(str(err).split())[:160]
        raise AsrError(f"refused to load: the file holds more than tensors and plain values ({first})", path,
                       fix="only load checkpoints written by asrtrain; a pickle can run code") from None
    except Exception as err:  # noqa: BLE001 - truncated or not a torch file at all
        raise AsrError(f"cannot read checkpoint ({type(err).__name__}: {' '.join(str(err).split())[:120]})",
                       path, fix="use an earlier checkpoint") from None


SAFETENSORS = "model.safetensors"


def save_safetensors(state: Dict[str, torch.Tensor], path: Path, metadata: Optional[Dict[str, str]] = None
                     ) -> None:
    """A model's state dict as safetensors (CPU copies, so the file is the same whatever device trained
    it), written atomically."""
    from safetensors.torch import save

    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in state.items()}
    with atomic_open(Path(path), "wb") as fh:
        fh.write(save(tensors, metadata=metadata))


def load_safetensors(path: Path, map_location: Any = "cpu") -> Dict[str, torch.Tensor]:
    """A state dict from a safetensors file, on ``map_location``; one line for a corrupt or foreign file."""
    return _read_safetensors(Path(path), map_location)[0]


def _read_safetensors(path: Path, map_location: Any) -> Tuple[Dict[str, torch.Tensor], Dict[str, str]]:
    """(state dict on ``map_location``, the header's string metadata)."""
    import json
    try:
        from safetensors.torch import load
    except ImportError:
        raise AsrError("reading model.safetensors needs the safetensors package", path,
                       fix="pip install safetensors") from None
    try:
        data = path.read_bytes()
    except OSError as err:
        raise AsrError(f"cannot read: {err.strerror}", path) from None
    try:
        state = load(data)
        n = int.from_bytes(data[:8], "little")
        meta = json.loads(data[8:8 + n]).get("__metadata__") or {}
    except Exception as err:  # noqa: BLE001 - safetensors' SafetensorError on a cut or foreign file
        raise AsrError(f"not a safetensors file ({' '.join(str(err).split())[:120]})", path,
                       fix="re-copy the packed model") from None
    return {k: v.to(map_location) for k, v in state.items()}, meta


def safetensors_metadata(path: Path) -> Dict[str, str]:
    """The string metadata of a safetensors file (``{}`` when it holds none)."""
    return _read_safetensors(Path(path), "cpu")[1]


def load_with_payload(path: Path, map_location: Any = "cpu") -> Tuple[Dict[str, Any], Any]:
    """(model state dict, the file's payload for :func:`asrtrain.model.stamp.check_stamp`): a
    :func:`save_checked` file's whole dict, or for a safetensors file ``{"config": ...}`` from its
    metadata (``{}`` when it holds no saved config)."""
    import json

    from asrtrain.model.stamp import STAMP_KEY
    path = Path(path)
    if path.suffix == ".safetensors":
        state, meta = _read_safetensors(path, map_location)
        if STAMP_KEY not in meta:
            return state, {}
        try:
            return state, {STAMP_KEY: json.loads(meta[STAMP_KEY])}
        except ValueError:
            raise AsrError("the saved config in the safetensors metadata is not JSON", path,
                           fix="re-copy the packed model") from None
    payload = load_checked(path, map_location)
    state = (payload.get("avg_model") or payload.get("model")) if isinstance(payload, dict) else None
    if not isinstance(state, dict):
        raise AsrError("no model in this file (expected a 'model' or 'avg_model' entry)", path,
                       fix="pass final.pt or a checkpoint written by asrtrain train")
    return state, payload


def load_state(path: Path, map_location: Any = "cpu") -> Dict[str, Any]:
    """The model state dict of ``path``: a ``.safetensors`` file, or a file of :func:`save_checked` (a
    final model, or a training checkpoint: its learner-averaged model if it has one), on ``map_location``
    whatever device wrote it."""
    return load_with_payload(path, map_location)[0]
