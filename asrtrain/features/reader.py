"""Read a features dir (the output of ``asrtrain features``) with CMVN applied as its config says.

Training and decoding use :class:`FeatureReader`; it reads the config the features were made with
(``features.yaml``), so the CMVN kind and ``norm_vars`` can never disagree with the stats on disk.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import numpy as np

from asrtrain.config import FeatureConfig
from asrtrain.configfile import load_section
from asrtrain.data.table import read_table
from asrtrain.errors import AsrError
from asrtrain.features import cmvn

PathLike = Union[str, Path]


class FeatureReader:
    """Lazy access to ``feats.scp`` of a features dir.

    Construction reads only the small text tables (feats.scp, utt2num_frames, utt2spk, features.yaml),
    so it is cheap for 100k utterances; matrices are read on :meth:`load`. Picklable, and safe in
    DataLoader workers: the cached ark file handles are dropped on pickling and after a fork.

    Attributes:
        dim: feature dimension D.
        config: the FeatureConfig the features were computed with.
    """

    def __init__(self, feat_dir: PathLike):
        self.feat_dir = Path(feat_dir)
        for name in ("feats.scp", "features.yaml"):
            if not (self.feat_dir / name).exists():
                raise AsrError(f"not a features dir: {name} is missing", self.feat_dir / name,
                               fix="run asrtrain features DATA_DIR OUT_DIR and use OUT_DIR")
        self.config: FeatureConfig = load_section(FeatureConfig, self.feat_dir / "features.yaml")
        self._scp: Dict[str, str] = read_table(self.feat_dir / "feats.scp")
        frames_path = self.feat_dir / "utt2num_frames"
        self._frames: Optional[Dict[str, int]] = (
            _int_table(frames_path) if frames_path.exists() else None)
        dim_path = self.feat_dir / "feat_dim"
        self.dim = _read_dim(dim_path) if dim_path.exists() else None
        self._utt2spk: Dict[str, str] = {}
        self._spk_scp: Dict[str, str] = {}
        self._global: Optional[Tuple[np.ndarray, np.ndarray]] = None
        if self.config.cmvn == "global":
            self._global = cmvn.transform(cmvn.read_stats(str(self._need("cmvn_global.ark"))),
                                          self.config.cmvn_norm_vars)
        elif self.config.cmvn == "speaker":
            self._utt2spk = read_table(self._need("utt2spk"))
            self._spk_scp = read_table(self._need("cmvn.scp"))
        self._transforms: Dict[str, Tuple[np.ndarray, np.ndarray]] = {}
        self._fds: Dict = {}
        self._pid = os.getpid()
        if self.dim is None and self._scp:
            self.dim = self.load_raw(next(iter(self._scp))).shape[1]

    def _need(self, name: str) -> Path:
        path = self.feat_dir / name
        if not path.exists():
            raise AsrError(f"features.yaml says cmvn: {self.config.cmvn} but {name} is missing", path,
                           fix="recompute the features with asrtrain features")
        return path

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fds"] = {}  # open files do not travel between processes
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self._scp)

    def __contains__(self, utt: str) -> bool:
        return utt in self._scp

    def keys(self) -> List[str]:
        """Utterance ids in sorted (feats.scp) order."""
        return list(self._scp)

    def num_frames(self, utt: str) -> int:
        if self._frames is not None:
            return self._frames[utt]
        return self.load_raw(utt).shape[0]

    def load_raw(self, utt: str) -> np.ndarray:
        """Features as stored, float32 [T, D], without CMVN."""
        import kaldiio
        if os.getpid() != self._pid:  # forked DataLoader worker: handles shared with the parent would race
            self._fds, self._pid = {}, os.getpid()
        try:
            spec = self._scp[utt]
        except KeyError:
            raise AsrError(f"utterance '{utt}' is not in feats.scp", self.feat_dir / "feats.scp") from None
        try:
            mat = np.asarray(kaldiio.load_mat(spec, fd_dict=self._fds), dtype=np.float32)
        except Exception as err:  # kaldiio: AssertionError, struct.error, EOFError, ... on a cut ark
            why = " ".join(str(err).split()) or type(err).__name__
            raise AsrError(f"cannot read features of '{utt}' from {spec} (truncated or corrupt ark? {why})",
                           self.feat_dir / "feats.scp", self._line_of(utt),
                           fix="recompute the features with asrtrain features") from None
        if mat.ndim != 2 or (self.dim is not None and mat.shape[1] != self.dim):
            raise AsrError(f"features of '{utt}' have shape {mat.shape}, want [frames, {self.dim}]",
                           self.feat_dir / "feats.scp", self._line_of(utt),
                           fix="recompute the features with asrtrain features")
        want = self._frames.get(utt) if self._frames is not None else None
        if want is not None and want != mat.shape[0]:  # batching and the too-short check read the table
            raise AsrError(f"utt2num_frames says '{utt}' has {want} frames but its ark holds {mat.shape[0]}",
                           self.feat_dir / "utt2num_frames", self._line_of(utt, "utt2num_frames"),
                           fix="recompute the features with asrtrain features (or delete utt2num_frames)")
        if not np.isfinite(mat).all():
            raise AsrError(f"features of '{utt}' hold NaN or Inf ({spec})", self.feat_dir / "feats.scp",
                           self._line_of(utt),
                           fix="recompute the features with asrtrain features (it drops such utterances)")
        return mat

    def _line_of(self, utt: str, table: str = "feats.scp") -> Optional[int]:
        """The line of ``table`` that names ``utt`` (looked up only when an error is raised)."""
        from asrtrain.data.table import read_table_lines
        try:
            return next((no for no, key, _ in read_table_lines(self.feat_dir / table) if key == utt), None)
        except (OSError, AsrError):
            return None

    def _transform(self, utt: str) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        if self._global is not None or self.config.cmvn == "none":
            return self._global
        spk = self._utt2spk.get(utt)
        if spk is None or spk not in self._spk_scp:
            raise AsrError(f"no speaker CMVN stats for utterance '{utt}' (speaker {spk!r})",
                           self.feat_dir / "cmvn.scp", fix="recompute the features with asrtrain features")
        if spk not in self._transforms:
            self._transforms[spk] = cmvn.transform(cmvn.read_stats(self._spk_scp[spk]),
                                                   self.config.cmvn_norm_vars)
        return self._transforms[spk]

    def load(self, utt: str) -> np.ndarray:
        """Features with CMVN applied per the config: float32 [T, D]."""
        feats = self.load_raw(utt)
        tr = self._transform(utt)
        if tr is None:
            return feats
        scale, offset = tr
        with np.errstate(over="ignore", invalid="ignore"):
            out = feats * scale.astype(np.float32) + offset.astype(np.float32)
            out = out.astype(np.float32, copy=False)
        if not np.isfinite(out).all():
            raise AsrError(f"CMVN makes the features of '{utt}' overflow (corrupt CMVN stats?)",
                           self.feat_dir / ("cmvn_global.ark" if self._global is not None else "cmvn.scp"),
                           fix="recompute the features with asrtrain features")
        return out

    def close(self) -> None:
        for fd in self._fds.values():
            fd.close()
        self._fds = {}


def _read_dim(path: Path) -> int:
    """The number in ``feat_dim``; anything else is an AsrError naming the file."""
    try:
        text = path.read_text(encoding="utf-8").split()
        dim = int(text[0])
    except (ValueError, IndexError, UnicodeDecodeError):
        raise AsrError("feat_dim does not hold a feature dimension (a positive integer)", path, 1,
                       fix="recompute the features with asrtrain features") from None
    if dim < 1:
        raise AsrError(f"feat_dim holds {dim}, not a positive dimension", path, 1,
                       fix="recompute the features with asrtrain features")
    return dim


def _int_table(path: Path) -> Dict[str, int]:
    """``utt2num_frames``: utterance -> frames, each a non-negative integer."""
    from asrtrain.data.table import iter_lines

    out: Dict[str, int] = {}
    for no, line in iter_lines(path):
        parts = line.split()
        if len(parts) != 2 or not parts[1].isascii() or not parts[1].isdigit():
            raise AsrError("expected '<utt-id> <num-frames>'", path, no,
                           fix="recompute the features with asrtrain features")
        out[parts[0]] = int(parts[1])
    return out
