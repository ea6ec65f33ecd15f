"""The config a model was trained under, saved inside every model file training writes.

An exp dir describes its model by ``config.yaml``; the weights alone do not say everything about it.
``model.subsample``, ``model.frontend`` or a feature option can be changed in ``config.yaml`` without
changing a single weight's shape, and the model then decodes garbage. So every model file asrtrain writes
(epoch and step checkpoints, ``final.pt``, ``average``'s ``avgK.pt``; a pack's ``model.safetensors`` as JSON in its metadata) holds the
``model`` and ``features`` sections it was trained with under the key :data:`STAMP_KEY`, as plain values
(loadable with ``weights_only=True``), and :func:`check_stamp` compares them with the exp dir's config when
the file is loaded. A file without the entry (written before it existed) is checked by its shapes only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from asrtrain.errors import AsrError

#: the payload entry holding ``{"model": {...}, "features": {...}}``
STAMP_KEY = "config"
Stamp = Dict[str, Dict[str, Any]]

#: model keys that do not change what a trained model computes: training-only weights and regularisers,
#: and the layout/precision of the LSTM kernels (a checkpoint runs under any of them)
MODEL_NOT_DEFINING = frozenset({"dropout", "inter_ctc", "att_weight", "rnn_layout", "rnn_bf16"})

FIX = "restore config.yaml, or pass --checkpoint of a model trained with it"


def config_stamp(cfg: Any) -> Dict[str, Dict[str, Any]]:
    """``{"model": ..., "features": ...}`` of a :class:`~asrtrain.config.Config`, as plain values."""
    from asrtrain.config.file import to_dict

    return {"model": to_dict(cfg.model), "features": to_dict(cfg.features)}


def stamp_of(payload: Any, path: Path) -> Optional[Dict[str, Dict[str, Any]]]:
    """The saved config of a loaded model file, None when it has none (an older file). A malformed
    entry (not a mapping of the two sections) is refused: a file asrtrain wrote always has a whole one."""
    if not isinstance(payload, dict) or STAMP_KEY not in payload:
        return None
    stamp = payload[STAMP_KEY]
    if not (isinstance(stamp, dict) and all(isinstance(stamp.get(s), dict) for s in ("model", "features"))):
        raise AsrError(f"the model file's saved config ('{STAMP_KEY}' entry) is not a mapping of the model "
                       "and features sections", path, fix="use a model file written by asrtrain")
    return stamp


def stamp_differences(stamp: Dict[str, Dict[str, Any]], cfg: Any) -> List[Tuple[str, Any, Any]]:
    """``(section.key, value in the model file, value in cfg)`` for each defining key that differs."""
    return _differences(stamp, config_stamp(cfg))


def _differences(saved: Stamp, here: Stamp) -> List[Tuple[str, Any, Any]]:
    """``(section.key, saved value, here value)`` for each defining key of two stamps that differs; keys
    only one side knows (a config of another asrtrain version) are not compared."""
    from asrtrain.config.file import NOT_FEATURE_DEFINING

    skip = {"model": MODEL_NOT_DEFINING, "features": NOT_FEATURE_DEFINING}
    return [(f"{section}.{key}", saved[section][key], value)
            for section in ("model", "features") for key, value in here[section].items()
            if key in saved[section] and key not in skip[section] and saved[section][key] != value]


def check_stamp(payload: Any, cfg: Any, cfg_path: Path, model_path: Path) -> None:
    """Refuse a model file trained under another model or features config than ``cfg`` (read from
    ``cfg_path``): one line naming the first key that differs, both values and the fix."""
    stamp = stamp_of(payload, model_path)
    if stamp is None:
        return
    diff = stamp_differences(stamp, cfg)
    if diff:
        key, saved, here = diff[0]
        more = f" (and {len(diff) - 1} more: {', '.join(d[0] for d in diff[1:4])})" if len(diff) > 1 else ""
        raise AsrError(f"{key} is {here!r} here but the model file {Path(model_path).name} was trained with "
                       f"{key} {saved!r}{more}", cfg_path, line=_line_of(cfg_path, key), fix=FIX)


def check_same_stamp(first: Path, a: Optional[Stamp], path: Path, b: Optional[Stamp]) -> None:
    """Refuse averaging two model files whose saved configs differ in a defining key."""
    if a is None or b is None:
        return
    diff = _differences(a, b)
    if diff:
        key, va, vb = diff[0]
        raise AsrError(f"the models of {first.name} and {path.name} were trained under different configs: "
                       f"{key} {va!r} in the first, {vb!r} in the second", path,
                       fix="average epoch checkpoints of one training run, or fewer with --last")


def _line_of(cfg_path: Path, key: str) -> Optional[int]:
    """The line of ``section.key`` in a config.yaml as save_config writes it (None if not found)."""
    section, name = key.split(".", 1)
    try:
        lines = Path(cfg_path).read_text(errors="replace").splitlines()
    except OSError:
        return None
    inside = False
    for i, text in enumerate(lines, 1):
        if text and not text[0].isspace():
            inside = text.split(":", 1)[0].strip() == section
        elif inside and text.strip().split(":", 1)[0] == name:
            return i
    return None
