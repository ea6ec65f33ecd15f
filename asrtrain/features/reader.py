"""Read a features dir (the output of ``asrtrain features``) with CMVN applied as its config says.

Training and decoding use :class:`FeatureReader`; it reads the config the features were made with
(``features.yaml``), so the CMVN kind and ``norm_vars`` can never disagree with the stats on disk.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import struct
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from asrtrain.config import FeatureConfig
from asrtrain.config.file import load_section
from asrtrain.data.table import read_table
from asrtrain.errors import AsrError
from asrtrain.features import cmvn
from asrtrain.limits import check_regular_file

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
            self._global = _float32(cmvn.transform(cmvn.read_stats(str(self._need("cmvn_global.ark"))),
                                                   self.config.cmvn_norm_vars))
        elif self.config.cmvn == "speaker":
            self._utt2spk = read_table(self._need("utt2spk"))
            self._spk_scp = read_table(self._need("cmvn.scp"))
        self._transforms: Dict[str, Tuple[np.ndarray, np.ndarray]] = {}  # speaker -> float32 (scale, offset)
        self._fds: Dict = {}
        self._maps: Dict[str, Optional[tuple]] = {}  # ark path -> (read-only map, its file); None: kaldiio
        self._regular: set = set()  # ark paths checked to be regular files
        self._pid = os.getpid()
        if self.dim is None and self._scp:
            self.dim = self.load_raw(next(iter(self._scp))).shape[1]

    def _need(self, name: str) -> Path:
        path = self.feat_dir / name
        if not path.exists():
            raise AsrError(f"features.yaml says cmvn: {self.config.cmvn} but {name} is missing", path,
                           fix="recompute the features with asrtrain features")
        check_regular_file(path, name)
        return path

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fds"] = {}  # open files and maps do not travel between processes
        state["_maps"] = {}
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
        mat = self._read(utt)
        if not np.isfinite(mat).all():
            raise AsrError(f"features of '{utt}' hold NaN or Inf ({self._scp[utt]})",
                           self.feat_dir / "feats.scp", self._line_of(utt),
                           fix="recompute the features with asrtrain features (it drops such utterances)")
        return mat

    def _read(self, utt: str, view: bool = False) -> np.ndarray:
        """:meth:`load_raw` without the finiteness check (:meth:`load_padded` checks the whole batch).
        ``view``: a plain float matrix may come back as a read-only view of the mapped ark."""
        if os.getpid() != self._pid:  # forked DataLoader worker: handles shared with the parent would race
            self._fds, self._pid = {}, os.getpid()
        try:
            spec = self._scp[utt]
        except KeyError:
            raise AsrError(f"utterance '{utt}' is not in feats.scp", self.feat_dir / "feats.scp") from None
        self._check_ark(utt, spec)
        mat = self._mapped(spec)
        if mat is None:
            mat = self._kaldiio(utt, spec)
        elif not view:
            mat = mat.copy()
        if mat.ndim != 2 or (self.dim is not None and mat.shape[1] != self.dim):
            raise AsrError(f"features of '{utt}' have shape {mat.shape}, want [frames, {self.dim}]",
                           self.feat_dir / "feats.scp", self._line_of(utt),
                           fix="recompute the features with asrtrain features")
        want = self._frames.get(utt) if self._frames is not None else None
        if want is not None and want != mat.shape[0]:  # batching and the too-short check read the table
            raise AsrError(f"utt2num_frames says '{utt}' has {want} frames but its ark holds {mat.shape[0]}",
                           self.feat_dir / "utt2num_frames", self._line_of(utt, "utt2num_frames"),
                           fix="recompute the features with asrtrain features (or delete utt2num_frames)")
        return mat

    def _check_ark(self, utt: str, spec: str) -> None:
        """Refuse an entry whose ark is not a regular file (``/dev/zero:0`` would be read without end, a
        FIFO would block the open until a writer comes); a pipe entry (``cmd |``) is kaldiio's to run."""
        if spec.rstrip().endswith("|"):
            return
        path = re.sub(r"\[[^\]]*\]$", "", spec.strip())
        head, _, off = path.rpartition(":")
        path = head if head and off.isdigit() else path
        if "\0" in path:
            raise AsrError(f"the ark path of '{utt}' holds a NUL byte (a damaged feats.scp)",
                           self.feat_dir / "feats.scp", self._line_of(utt),
                           fix="recompute the features with asrtrain features")
        if path not in self._regular:
            if os.path.exists(path) and not os.path.isfile(path):
                check_regular_file(path, f"the ark of '{utt}'", self.feat_dir / "feats.scp", self._line_of(utt))
            self._regular.add(path)

    # A Kaldi binary float matrix: "\0B", "FM ", then "\x04" and int32 rows, "\x04" and int32 cols, the data.
    _FM_HEADER = b"\0BFM \x04"

    def _mapped(self, spec: str) -> Optional[np.ndarray]:
        """A plain float32 matrix at ``ark:offset`` as a view of the memory-mapped ark, or None for any other
        entry (compressed or double matrices, slices, pipes, a short file), which kaldiio then reads and
        reports. Measured: kaldiio parses a header in ~10 small reads, 17 us an utterance, against ~3 us
        here, which is 1 ms of a 63-utterance batch on the training critical path (2 CPU threads).
        Like an open file, a map outlives the ark being replaced (``asrtrain features`` swaps whole dirs);
        an ark cut short in place since it was mapped goes back to kaldiio, which reports it (one fstat
        an utterance, 0.3 us: reading a cut map would end the process with SIGBUS, not an error)."""
        path, _, off = spec.rpartition(":")
        if not path or not off.isdigit():
            return None
        if path not in self._maps:
            self._maps[path] = _map_file(path)
        got = self._maps[path]
        if got is None:
            return None
        mm, fh = got
        if os.fstat(fh.fileno()).st_size < len(mm):  # cut short in place since mapped: reading would SIGBUS
            self._maps[path] = None
            return None
        o = int(off)
        if o + 15 > len(mm) or mm[o:o + 6] != self._FM_HEADER or mm[o + 10:o + 11] != b"\x04":
            return None  # the whole 15-byte header must lie inside the file before it is unpacked
        rows, = struct.unpack_from("<i", mm, o + 6)
        cols, = struct.unpack_from("<i", mm, o + 11)
        n = rows * cols
        if rows < 0 or cols < 0 or o + 15 + 4 * n > len(mm):
            return None
        return np.frombuffer(mm, dtype="<f4", count=n, offset=o + 15).reshape(rows, cols)

    def _kaldiio(self, utt: str, spec: str) -> np.ndarray:
        import kaldiio
        try:
            return np.asarray(kaldiio.load_mat(spec, fd_dict=self._fds), dtype=np.float32)
        except Exception as err:  # kaldiio: AssertionError, struct.error, EOFError, ... on a cut ark
            why = " ".join(str(err).split()) or type(err).__name__
            raise AsrError(f"cannot read features of '{utt}' from {spec} (truncated or corrupt ark? {why})",
                           self.feat_dir / "feats.scp", self._line_of(utt),
                           fix="recompute the features with asrtrain features") from None

    def _line_of(self, utt: str, table: str = "feats.scp") -> Optional[int]:
        """The line of ``table`` that names ``utt`` (looked up only when an error is raised)."""
        from asrtrain.data.table import read_table_lines
        try:
            return next((no for no, key, _ in read_table_lines(self.feat_dir / table) if key == utt), None)
        except (OSError, AsrError):
            return None

    def _transform(self, utt: str) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """float32 (scale, offset) for ``utt``, global or its speaker's (converted once); None: no CMVN."""
        if self._global is not None or self.config.cmvn == "none":
            return self._global
        spk = self._utt2spk.get(utt)
        if spk is None or spk not in self._spk_scp:
            raise AsrError(f"no speaker CMVN stats for utterance '{utt}' (speaker {spk!r})",
                           self.feat_dir / "cmvn.scp", fix="recompute the features with asrtrain features")
        if spk not in self._transforms:
            self._transforms[spk] = _float32(cmvn.transform(cmvn.read_stats(self._spk_scp[spk]),
                                                            self.config.cmvn_norm_vars))
        return self._transforms[spk]

    def load(self, utt: str) -> np.ndarray:
        """Features with CMVN applied per the config: float32 [T, D]."""
        feats = self.load_raw(utt)
        tr = self._transform(utt)
        if tr is None:
            return feats
        out = _apply_cmvn(feats, tr, np.empty_like(feats))
        if not np.isfinite(out).all():
            raise AsrError(f"CMVN makes the features of '{utt}' overflow (corrupt CMVN stats?)",
                           self.feat_dir / ("cmvn_global.ark" if self._global is not None else "cmvn.scp"),
                           fix="recompute the features with asrtrain features")
        return out

    def load_padded(self, utts: Sequence[str]) -> Tuple[np.ndarray, List[int]]:
        """The features of ``utts`` with CMVN applied, zero-padded into one float32 [N, T, D] array, and
        their lengths: what :meth:`load` gives each, in a batch.

        CMVN is written straight into the batch (float32 scale and offset kept per speaker), and the
        finiteness check runs once over the batch instead of twice per utterance; the same utterance
        then raises the same error :meth:`load` would (it is read again only on that path)."""
        raws = [self._read(u, view=True) for u in utts]
        lens = [m.shape[0] for m in raws]
        x = np.zeros((len(raws), max(lens, default=0), self.dim or 0), dtype=np.float32)
        for i, (u, m) in enumerate(zip(utts, raws)):
            tr = self._transform(u)
            if tr is None:
                x[i, : m.shape[0]] = m
            else:
                _apply_cmvn(m, tr, x[i, : m.shape[0]])
        if not np.isfinite(x).all():
            for u in utts:  # the first bad utterance raises its own error (raw NaN/Inf or CMVN overflow)
                self.load(u)
            raise AsrError(f"the features of a batch ({utts[0]} ...) are not finite after CMVN",
                           self.feat_dir / "feats.scp", fix="recompute the features with asrtrain features")
        return x, lens

    def close(self) -> None:
        for fd in self._fds.values():
            fd.close()
        self._fds = {}
        for got in self._maps.values():
            if got is not None:
                got[0].close()
                got[1].close()
        self._maps = {}


def _float32(tr: Tuple[np.ndarray, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    return tr[0].astype(np.float32), tr[1].astype(np.float32)


def _apply_cmvn(feats: np.ndarray, tr: Tuple[np.ndarray, np.ndarray], out: np.ndarray) -> np.ndarray:
    """``out = feats * scale + offset`` in float32 (overflow is left to the caller's finiteness check): the
    one place CMVN is applied, so :meth:`FeatureReader.load` and ``load_padded`` agree to the bit."""
    with np.errstate(over="ignore", invalid="ignore"):
        np.multiply(feats, tr[0], out=out)
        out += tr[1]
    return out


def _map_file(path: str) -> Optional[tuple]:
    """(a read-only map of a regular file, the file it maps), or None (not a regular file, empty, or not
    mappable). The file stays open for the fstat that catches an ark cut short later; both close on GC."""
    try:
        fh = open(path, "rb")
    except (OSError, ValueError):  # ValueError: a NUL byte in the path (_check_ark names it first)
        return None
    try:
        st = os.fstat(fh.fileno())
        if stat.S_ISREG(st.st_mode) and st.st_size > 0:
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), fh
    except (OSError, ValueError):
        pass
    fh.close()
    return None


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
