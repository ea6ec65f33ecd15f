"""``EXP/data.json``: which data a run trained on, written by training at its start so the exp dir describes
itself (the model card of :mod:`asrtrain.transcribe.pack` reads it back).

For the training feature dir and the dev dir (when given): the dir's ``name`` and absolute ``path``, its
``utterances`` (lines of ``feats.scp``), ``frames`` (the sum of ``utt2num_frames``) and ``hours`` (frames
x ``features.frame_shift``; ``null`` both when the dir has no ``utt2num_frames``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

from asrtrain.errors import AsrError

DATA_RECORD = "data.json"


def describe_feature_dir(feat_dir: Path, frame_shift_ms: float) -> Dict[str, Any]:
    """``{name, path, utterances, frames, hours}`` of one feature dir, from its small tables only."""
    from asrtrain.data.table import read_table

    feat_dir = Path(feat_dir)
    out: Dict[str, Any] = {"name": feat_dir.resolve().name, "path": str(feat_dir.resolve()),
                           "utterances": len(read_table(feat_dir / "feats.scp")),
                           "frames": None, "hours": None}
    frames_path = feat_dir / "utt2num_frames"
    counts = list(read_table(frames_path).values()) if frames_path.is_file() else []
    if counts and all(c.strip().isdigit() for c in counts):  # training names a malformed table
        frames = sum(int(c) for c in counts)
        out["frames"] = frames
        out["hours"] = round(frames * frame_shift_ms / 1000.0 / 3600.0, 6)
    return out


def write_data_record(exp_dir: Path, train_dir: Path, dev_dir: Optional[Path], frame_shift_ms: float) -> None:
    """Write ``EXP/data.json`` (atomically) for a run on ``train_dir`` (and ``dev_dir``)."""
    from asrtrain.atomic import atomic_write_text

    record = {"train": describe_feature_dir(train_dir, frame_shift_ms)}
    if dev_dir is not None:
        record["dev"] = describe_feature_dir(dev_dir, frame_shift_ms)
    atomic_write_text(Path(exp_dir) / DATA_RECORD, json.dumps(record, indent=1) + "\n")


def read_data_record(exp_dir: Path) -> Optional[Dict[str, Any]]:
    """``EXP/data.json`` as written by :func:`write_data_record`; None when the run predates it."""
    path = Path(exp_dir) / DATA_RECORD
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise AsrError(f"not readable json ({' '.join(str(err).split())[:120]})", path,
                       fix="delete it (it is only the record of the training data) or restore it") from None
    if not isinstance(record, dict) or not isinstance(record.get("train"), dict):
        raise AsrError("no 'train' entry", path, fix="delete it, or restore the file training wrote")
    return record
