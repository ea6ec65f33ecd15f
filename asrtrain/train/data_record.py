"""``EXP/data.json``: which data a run trained on, written by training at its start so the exp dir describes
itself (the model card of :mod:`asrtrain.transcribe.pack` reads it back).

For the training feature dir and the dev dir (when given): the dir's ``name`` and absolute ``path``, its
``utterances`` (lines of ``feats.scp``), ``frames`` (the sum of ``utt2num_frames``) and ``hours`` (frames
x ``features.frame_shift``; ``null`` both when the dir has no ``utt2num_frames``).

``--resume`` reads it back before anything is rewritten (:func:`check_same_data`): a run continues only on
the dirs it started on, named by their resolved path (a relative or absolute spelling of the same dir is the
same dir) and holding what they held (the same utterances and frames); a dir moved elsewhere is known by
its name, utterances and frames, and is taken with a warning.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, Optional

from asrtrain.errors import AsrError

DATA_RECORD = "data.json"

log = logging.getLogger("asrtrain.train")


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


def _summary(entry: Dict[str, Any]) -> str:
    """``PATH (N utterances, F frames)`` of a data.json entry."""
    frames = "" if entry.get("frames") is None else f", {entry['frames']} frames"
    return f"{entry.get('path')} ({entry.get('utterances')} utterances{frames})"


def check_same_data(exp_dir: Path, train_dir: Path, dev_dir: Optional[Path], frame_shift_ms: float) -> None:
    """On ``--resume``: ``train_dir`` and ``dev_dir`` must be the dirs ``EXP/data.json`` recorded when the
    run started: the same resolved path with the same utterance and frame counts (a dir rewritten in
    place is refused), or a copy of it elsewhere (:func:`moved`, taken with a warning). A step
    checkpoint's position (epoch, batch) indexes the batches of the run's data: on other data it would
    continue from a place that does not exist there, and data.json would then name data the checkpoints
    were not trained on. A run that predates data.json cannot be checked."""
    record = read_data_record(exp_dir)
    path = Path(exp_dir) / DATA_RECORD
    if record is None:
        log.warning(
            "--resume: %s has no %s (the run predates it), so --train-data/--dev-data cannot be checked "
            "against the data the run started on", exp_dir, DATA_RECORD)
        return
    for key, option, given_dir in (("train", "--train-data", train_dir), ("dev", "--dev-data", dev_dir)):
        kept = record.get(key)
        if kept is None and given_dir is None:
            continue
        given = describe_feature_dir(given_dir, frame_shift_ms) if given_dir is not None else None
        if kept is None:
            raise AsrError(f"--resume with {option} {_summary(given)}, but the run started without one", path,
                           fix=f"resume without {option}, or start over with --restart")
        if given is None:
            raise AsrError(f"--resume without {option}, but the run started with {_summary(kept)}", path,
                           fix=f"resume with {option} {kept.get('path')}, or start over with --restart")
        same_content = all(kept.get(k) is None or given[k] == kept.get(k) for k in ("utterances", "frames"))
        if given["path"] == kept.get("path"):
            if same_content:
                continue
            raise AsrError(f"--resume with {option} changed since the run started: {_summary(given)}; the run "
                           f"started on {_summary(kept)}", path,
                           fix=f"restore {kept.get('path')} to the data the run started on, or start over with "
                               "--restart")
        if moved(kept, given):
            log.warning("--resume: %s %s is taken for the run's %s (moved: the same name, utterances and "
                        "frames); %s is rewritten to name it", option, given["path"], kept.get("path"),
                        DATA_RECORD)
            continue
        raise AsrError(f"--resume with a different {option}: {_summary(given)}; the run started on "
                       f"{_summary(kept)}", path,
                       fix=f"resume with {option} {kept.get('path')}, or start over with --restart")


def moved(kept: Dict[str, Any], given: Dict[str, Any]) -> bool:
    """``given`` is ``kept``'s dir at another path (copied to another disk or node): the same name,
    utterance count and frame total (recorded in both; without frames only the path can tell)."""
    return given["frames"] is not None and all(given[k] == kept.get(k) for k in ("name", "utterances", "frames"))
