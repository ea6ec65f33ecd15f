"""CMVN statistics in Kaldi's format, and applying them as Kaldi's ``apply-cmvn`` does.

Stats are a float64 matrix [2, D+1], as ``compute-cmvn-stats`` writes: row 0 holds the per-dimension
sums and the frame count in column D; row 1 holds the sums of squares (column D is 0).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

import numpy as np

from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_open

log = logging.getLogger(__name__)
PathLike = Union[str, Path]
VAR_FLOOR = 1.0e-20  # Kaldi's floor on the variance in apply-cmvn


def accumulate(feats: np.ndarray, stats: np.ndarray = None) -> np.ndarray:
    """Add features [T, D] to stats [2, D+1] (new stats if None); returns the stats."""
    feats = np.asarray(feats, dtype=np.float64)
    dim = feats.shape[1]
    if stats is None:
        stats = np.zeros((2, dim + 1), dtype=np.float64)
    elif stats.shape != (2, dim + 1):
        raise AsrError(f"CMVN stats of shape {stats.shape} do not fit features of dim {dim}")
    if not np.isfinite(feats).all():
        raise AsrError("features holding NaN or Inf cannot enter CMVN stats",
                       fix="drop the utterance (asrtrain features --skip-bad)")
    stats[0, :dim] += feats.sum(axis=0)
    stats[1, :dim] += np.square(feats).sum(axis=0)
    stats[0, dim] += feats.shape[0]
    return stats


def transform(stats: np.ndarray, norm_vars: bool) -> Tuple[np.ndarray, np.ndarray]:
    """Stats [2, D+1] -> (scale [D], offset [D]) with normalised = feats * scale + offset."""
    stats = np.asarray(stats, dtype=np.float64)
    dim = stats.shape[1] - 1
    count = stats[0, dim]
    if not np.isfinite(stats).all():
        raise AsrError("CMVN stats hold NaN or Inf", fix="recompute the features with asrtrain features")
    if count < 1.0:
        raise AsrError(f"insufficient CMVN stats: frame count {count}",
                       fix="recompute features; an empty speaker or set has no statistics")
    mean = stats[0, :dim] / count
    if not norm_vars:
        if not np.isfinite(mean).all():
            raise AsrError("CMVN stats give a non-finite mean (corrupt stats?)",
                           fix="recompute the features with asrtrain features")
        return np.ones(dim), -mean
    with np.errstate(over="ignore", invalid="ignore"):
        var = stats[1, :dim] / count - mean * mean
    if np.any(var < VAR_FLOOR):
        log.warning("CMVN: flooring %d variances to %g", int(np.sum(var < VAR_FLOOR)), VAR_FLOOR)
        var = np.maximum(var, VAR_FLOOR)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scale = 1.0 / np.sqrt(var)
        offset = -mean * scale
    if not (np.isfinite(scale).all() and np.isfinite(offset).all()):
        raise AsrError("CMVN stats give a non-finite normalisation (corrupt stats?)",
                       fix="recompute the features with asrtrain features")
    return scale, offset


def apply(feats: np.ndarray, stats: np.ndarray, norm_vars: bool) -> np.ndarray:
    """Normalise features [T, D] with stats [2, D+1]; returns float32 [T, D]."""
    scale, offset = transform(stats, norm_vars)
    return (np.asarray(feats, dtype=np.float64) * scale + offset).astype(np.float32)


def write_global(path: PathLike, stats: np.ndarray) -> None:
    """Write global stats as a bare Kaldi binary matrix, as ``compute-cmvn-stats scp:feats.scp FILE``
    does; Kaldi reads it with ``apply-cmvn FILE scp:feats.scp ark:-``, kaldiio with ``load_mat``."""
    from kaldiio.matio import write_array
    with atomic_open(Path(path), "wb") as fh:
        write_array(fh, np.asarray(stats, dtype=np.float64))


def read_stats(spec: str) -> np.ndarray:
    """Read stats from a bare matrix file or an ``ark:offset`` scp value -> float64 [2, D+1]."""
    import kaldiio
    try:
        stats = np.asarray(kaldiio.load_mat(str(spec)), dtype=np.float64)
    except Exception as err:  # kaldiio: AssertionError, struct.error, ... on a cut or corrupt file
        why = " ".join(str(err).split()) or type(err).__name__
        raise AsrError(f"cannot read CMVN stats from {spec} (truncated or corrupt? {why})",
                       fix="recompute the features") from None
    if stats.ndim != 2 or stats.shape[0] != 2:
        raise AsrError(f"{spec} does not hold CMVN stats (shape {stats.shape}, want [2, D+1])")
    if not np.isfinite(stats).all():
        raise AsrError(f"CMVN stats in {spec} hold NaN or Inf", fix=RECOMPUTE)
    _check_range(stats, spec)
    return stats


#: the fix for damaged stats
RECOMPUTE = "recompute CMVN: asrtrain features DATA_DIR OUT_DIR"
F32_MAX = float(np.finfo(np.float32).max)


def _check_range(stats: np.ndarray, spec: str) -> None:
    """Refuse finite stats [2, D+1] whose count is below one frame, or whose sums, mean or normalisation
    (either ``cmvn_norm_vars``) lie beyond float32, where CMVN is applied: cast there they would overflow to
    Inf (and NaN) features. Real stats are sums over frames of fbank values, far below that range."""
    dim = stats.shape[1] - 1
    count = stats[0, dim]
    if count < 1.0:
        raise AsrError(f"insufficient CMVN stats in {spec}: frame count {count}",
                       fix="recompute features; an empty speaker or set has no statistics")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        mean = stats[0, :dim] / count
        var = np.maximum(stats[1, :dim] / count - mean * mean, VAR_FLOOR)
        scale = 1.0 / np.sqrt(var)
        parts = (stats, mean, scale, mean * scale)
    worst = max((float(np.max(np.abs(p), initial=0.0)) for p in parts), key=lambda v: (math.isnan(v), v))
    if not (math.isfinite(worst) and worst <= F32_MAX):
        raise AsrError(f"CMVN stats in {spec} overflow: a sum, mean or normalisation reaches {worst:.3g}, "
                       f"beyond float32's {F32_MAX:.3g} (damaged stats?)", fix=RECOMPUTE)


def write_speaker(out_dir: PathLike, stats: Dict[str, np.ndarray], scp_dir: PathLike = None) -> None:
    """Write per-speaker stats as ``cmvn.ark`` + ``cmvn.scp`` (keys sorted; scp holds absolute paths,
    into ``scp_dir`` if given: where ``out_dir`` will be once moved into place)."""
    from kaldiio.matio import write_array
    out_dir = Path(out_dir).resolve()
    ark = out_dir / "cmvn.ark"
    named = Path(scp_dir or out_dir).resolve() / "cmvn.ark"
    lines = []
    with atomic_open(ark, "wb") as fh:
        for spk in sorted(stats):
            fh.write(f"{spk} ".encode("utf-8"))
            lines.append(f"{spk} {named}:{fh.tell()}\n")
            write_array(fh, np.asarray(stats[spk], dtype=np.float64))
    with atomic_open(out_dir / "cmvn.scp") as fh:
        fh.writelines(lines)


def training_stats(model_dir: Path, cmvn: str, cmvn_stats: Optional[Path] = None) -> Optional[np.ndarray]:
    """The global CMVN stats a model was trained with ([2, D+1]; ``MODEL/cmvn_global.ark``, which training
    copies into the exp dir, or ``cmvn_stats``); None for a model whose ``features.cmvn`` is not global,
    which refuses ``cmvn_stats`` (as ``transcribe --utt2spk`` is refused for a global-CMVN model)."""
    if cmvn != "global":
        if cmvn_stats is not None:
            how = ("normalises each file with its own stats, or each speaker's with --utt2spk"
                   if cmvn == "speaker" else "uses no CMVN")
            raise AsrError(f"--cmvn-stats is for a model trained with global CMVN; this model's CMVN is {cmvn}",
                           cmvn_stats, fix=f"drop --cmvn-stats (this model {how})")
        return None
    path = Path(cmvn_stats) if cmvn_stats else Path(model_dir) / "cmvn_global.ark"
    if not path.is_file():
        raise AsrError("the model uses global CMVN and its training stats are not here", path,
                       fix="pass --cmvn-stats TRAIN_FEATS/cmvn_global.ark (or copy it into the exp dir)")
    return read_stats(str(path))
