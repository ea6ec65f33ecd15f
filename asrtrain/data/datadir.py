"""Kaldi data dirs in memory: read and write. This module uses no other data module; the tools over it
are :mod:`asrtrain.data.validate` (validate_data_dir.sh, fix_data_dir.sh), which uses it, and
:mod:`asrtrain.data.subsets` (subset_data_dir.sh, split_data.sh), which uses both.

A data dir holds ``wav.scp``, ``utt2spk``, ``spk2utt`` and usually ``text``; optionally ``segments``,
``reco2file_and_channel``, ``feats.scp``, ``utt2num_frames`` and ``cmvn.scp``. Every file is sorted as
``LC_ALL=C sort`` sorts, one record per line, first field the key (see :mod:`asrtrain.data.table`).

:func:`find_problems` lists everything wrong as :class:`Problem` s (file, line, message, fix, and the
utterances a problem concerns, empty when it concerns the whole dir); :func:`validate` raises the first
as an :class:`AsrError`. Later stages (features) drop the utterance-level ones under ``--skip-bad``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple, Union

from asrtrain.data.table import iter_lines, read_table_lines, spk2utt_from_utt2spk, write_table
from asrtrain.data.textcheck import text_line_problem
from asrtrain.errors import AsrError

log = logging.getLogger(__name__)
PathLike = Union[str, Path]

UTT_FILES = ("utt2spk", "text", "segments", "feats.scp", "utt2num_frames")
REC_FILES = ("wav.scp", "reco2file_and_channel")
SPK_FILES = ("spk2utt", "cmvn.scp")
ALL_FILES = UTT_FILES + REC_FILES + SPK_FILES
#: Other per-utterance/speaker/recording tables (utt2dur, spk2gender, reco2dur, ...) are carried along,
#: filtered by their key kind, by fix, subset and split.
EXTRA_KINDS = (("utt2", "utt"), ("spk2", "spk"), ("reco2", "rec"))
#: Files describing a features dir, copied as they are by subset and split.
DESCRIPTIVE_FILES = ("features.yaml", "feat_dim", "cmvn_global.ark")
FIX = "asrtrain data fix DIR"


@dataclass(frozen=True)
class Segment:
    rec: str
    start: float
    end: float  # -1 = to the end of the recording

    def __str__(self) -> str:
        return f"{self.rec} {self.start!r} {self.end!r}"


@dataclass
class DataDir:
    """A Kaldi data dir in memory. Dicts are keyed by utterance, recording or speaker id.

    ``lines[file][key]`` is the 1-based line a record came from (for error messages; empty when built
    in memory).
    """
    utt2spk: Dict[str, str]
    wav_scp: Dict[str, str] = field(default_factory=dict)
    text: Optional[Dict[str, str]] = None
    segments: Optional[Dict[str, Segment]] = None
    reco2file_and_channel: Optional[Dict[str, Tuple[str, str]]] = None
    feats_scp: Optional[Dict[str, str]] = None
    utt2num_frames: Optional[Dict[str, int]] = None
    cmvn_scp: Optional[Dict[str, str]] = None
    extra: Dict[str, Dict[str, str]] = field(default_factory=dict)  # file name -> table
    path: Optional[Path] = None
    lines: Dict[str, Dict[str, int]] = field(default_factory=dict)

    @property
    def utts(self) -> List[str]:
        return sorted(self.utt2spk)

    @property
    def spk2utt(self) -> Dict[str, List[str]]:
        return {s: u.split() for s, u in spk2utt_from_utt2spk(self.utt2spk).items()}

    def recording(self, utt: str) -> Tuple[str, Optional[float], Optional[float]]:
        """(rec-id, start s, end s) of an utterance; start/end None without segments."""
        if self.segments is None:
            return utt, None, None
        seg = self.segments[utt]
        return seg.rec, seg.start, seg.end

    def channel(self, rec: str) -> Optional[str]:
        if self.reco2file_and_channel is None or rec not in self.reco2file_and_channel:
            return None
        return self.reco2file_and_channel[rec][1]

    def where(self, name: str, key: str) -> Tuple[Optional[str], Optional[int]]:
        """(file path, line) of ``key`` in file ``name``, for AsrError."""
        path = str(self.path / name) if self.path is not None else name
        return path, self.lines.get(name, {}).get(key)

    def subset(self, utts: Iterable[str]) -> "DataDir":
        """The data dir restricted to ``utts`` (recordings and speakers that remain are kept)."""
        keep = sorted(set(utts) & set(self.utt2spk))
        recs = {self.recording(u)[0] for u in keep}
        spks = {self.utt2spk[u] for u in keep}

        def pick(d, keys):
            return None if d is None else {k: d[k] for k in sorted(keys) if k in d}
        return replace(self, utt2spk=pick(self.utt2spk, keep), wav_scp=pick(self.wav_scp, recs),
                       text=pick(self.text, keep), segments=pick(self.segments, keep),
                       reco2file_and_channel=pick(self.reco2file_and_channel, recs),
                       feats_scp=pick(self.feats_scp, keep), utt2num_frames=pick(self.utt2num_frames, keep),
                       cmvn_scp=pick(self.cmvn_scp, spks),
                       extra={n: pick(t, {"utt": keep, "spk": spks, "rec": recs}[extra_kind(n)])
                              for n, t in self.extra.items()})


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a data dir. ``utts`` empty = it concerns the whole dir (not droppable)."""
    path: str
    line: Optional[int]
    message: str
    fix: str = ""
    utts: Tuple[str, ...] = ()

    def error(self) -> AsrError:
        return AsrError(self.message, self.path, self.line, self.fix or None)

    def __str__(self) -> str:
        return self.error().render()


# ---------------------------------------------------------------------------------------------------------
# Reading and writing

def _rows(path: Path, problems: List[Problem]) -> Optional[List[Tuple[int, str, str]]]:
    if not path.exists():
        return None
    try:
        return read_table_lines(path, strip_bom=True)  # a byte-order mark is named by validate
    except AsrError as err:  # not UTF-8: the whole file is unusable
        problems.append(Problem(str(path), err.line, err.message, err.fix or ""))
        return None


def parse_segment(rest: str) -> Segment:
    """A ``segments`` value ``<rec-id> <start-s> <end-s>`` -> Segment; ValueError with a reason if malformed
    (times not numbers, not finite, start < 0, or end <= start unless end is -1, to the recording's end)."""
    parts = rest.split()
    if len(parts) != 3:
        raise ValueError("expected '<utt-id> <rec-id> <start-s> <end-s>'")
    try:
        start, end = float(parts[1]), float(parts[2])
    except ValueError:
        raise ValueError(f"segment times {parts[1]} {parts[2]} are not numbers") from None
    if not (math.isfinite(start) and math.isfinite(end)):
        raise ValueError(f"segment times {parts[1]} {parts[2]} are not finite numbers")
    if start < 0 or (end != -1 and end <= start):
        raise ValueError(f"segment times {parts[1]} {parts[2]} are not 0 <= start < end (or end -1)")
    return Segment(parts[0], start, end)


def _parse(name: str, rest: str):
    """Parse the value of one record; raise ValueError with a reason if it is malformed."""
    parts = rest.split()
    if name == "segments":
        return parse_segment(rest)
    if name == "reco2file_and_channel":
        if len(parts) != 2:
            raise ValueError("expected '<rec-id> <file-id> <channel>'")
        return parts[0], parts[1]
    if name == "utt2spk" and len(parts) != 1:
        raise ValueError("expected '<utt-id> <spk-id>'")
    if name == "utt2num_frames":
        if len(parts) != 1 or not parts[0].isdigit():
            raise ValueError("expected '<utt-id> <num-frames>'")
        return int(parts[0])
    if name in ("wav.scp", "feats.scp", "cmvn.scp", "spk2utt") and not parts:
        raise ValueError("the value is missing")
    return rest


def load_tables(path: Path) -> Tuple[Dict[str, dict], Dict[str, Dict[str, int]], List[Problem]]:
    """Read every known file: (name -> {key: parsed}, name -> {key: line}, problems).

    Duplicates keep the first record; malformed records are left out; both are reported as problems.
    """
    tables: Dict[str, dict] = {}
    lines: Dict[str, Dict[str, int]] = {}
    problems: List[Problem] = []
    for name in ALL_FILES:
        rows = _rows(path / name, problems)
        if rows is None:
            continue
        raw = dict(iter_lines(path / name, strip_bom=True)) if name == "text" else {}
        table, where, seen, prev = {}, {}, {}, None
        unsorted_reported = False
        for no, key, rest in rows:
            fpath = str(path / name)
            utts = (key,) if name in UTT_FILES else ()
            if key in seen:
                problems.append(Problem(fpath, no, f"duplicate id '{key}' (first on line {seen[key]})",
                                        f"{FIX} keeps the first; or remove the line", ()))
                continue
            seen[key] = no
            if prev is not None and key < prev and not unsorted_reported:
                problems.append(Problem(fpath, no, f"not sorted: '{key}' comes after '{prev}'",
                                        f"{FIX} sorts it (or LC_ALL=C sort -k1,1)"))
                unsorted_reported = True
            prev = key if prev is None or key > prev else prev
            if name == "text" and not rest.strip():
                problems.append(Problem(fpath, no, f"empty transcript for utterance '{key}'",
                                        f"give it a transcript, or {FIX} drops it", (key,)))
                continue
            bad_text = text_line_problem(raw[no]) if name == "text" else None
            if bad_text:
                problems.append(Problem(fpath, no, f"utterance '{key}': {bad_text}",
                                        f"correct the transcript, or {FIX} drops it", (key,)))
                continue
            try:
                table[key] = _parse(name, rest)
            except ValueError as err:
                problems.append(Problem(fpath, no, f"malformed record for '{key}': {err}",
                                        f"correct the line, or {FIX} drops it", utts))
                continue
            where[key] = no
        tables[name], lines[name] = table, where
    return tables, lines, problems


def build_datadir(path: Path, tables: Dict[str, dict], lines) -> DataDir:
    """The DataDir of tables read by :func:`load_tables` (no checks: :mod:`asrtrain.data.validate` does them)."""
    return DataDir(utt2spk=tables.get("utt2spk", {}), wav_scp=tables.get("wav.scp", {}),
                   text=tables.get("text"), segments=tables.get("segments"),
                   reco2file_and_channel=tables.get("reco2file_and_channel"),
                   feats_scp=tables.get("feats.scp"), utt2num_frames=tables.get("utt2num_frames"),
                   cmvn_scp=tables.get("cmvn.scp"), extra=_read_extra(path), path=path, lines=lines)


def extra_kind(name: str) -> Optional[str]:
    """What a per-id file we do not know is keyed by (``utt``, ``spk`` or ``rec``), from its name; None
    for the files Kaldi defines."""
    if name in ALL_FILES:
        return None
    return next((kind for prefix, kind in EXTRA_KINDS if name.startswith(prefix)), None)


def _read_extra(path: Path) -> Dict[str, Dict[str, str]]:
    out = {}
    for f in sorted(path.iterdir()):
        if f.is_file() and extra_kind(f.name):
            try:
                rows = read_table_lines(f, strip_bom=True)
            except AsrError as err:
                log.warning("%s (left out)", err.render())
                continue
            table: Dict[str, str] = {}
            for _, key, rest in rows:
                table.setdefault(key, rest)
            out[f.name] = table
    return out


def read_datadir(path: PathLike) -> DataDir:
    """Read a data dir as it is. To check it first, use :func:`asrtrain.data.validate.validate`, which
    returns the same DataDir or raises on the first problem."""
    path = Path(path)
    if not path.is_dir():
        raise AsrError("data dir not found", path, fix="check the path")
    tables, lines, _ = load_tables(path)
    return build_datadir(path, tables, lines)


def write_datadir(data: DataDir, path: PathLike) -> None:
    """Write every file ``data`` holds (sorted, atomically), spk2utt regenerated from utt2spk."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    write_table(path / "utt2spk", data.utt2spk)
    write_table(path / "spk2utt", spk2utt_from_utt2spk(data.utt2spk))
    # A feature-only dir gets no empty wav.scp; one that has a wav.scp gets it rewritten, even empty.
    if data.wav_scp or data.feats_scp is None or (path / "wav.scp").exists():
        write_table(path / "wav.scp", data.wav_scp)
    optional = {"text": data.text, "segments": data.segments, "feats.scp": data.feats_scp,
                "utt2num_frames": data.utt2num_frames, "cmvn.scp": data.cmvn_scp,
                "reco2file_and_channel": None if data.reco2file_and_channel is None else
                {r: " ".join(fc) for r, fc in data.reco2file_and_channel.items()}}
    optional.update(data.extra)
    for name, table in optional.items():
        if table is not None:
            write_table(path / name, {k: str(v) for k, v in table.items()})
        elif (path / name).exists():
            (path / name).unlink()  # a stale file from an earlier write would contradict the rest
