"""Kaldi data dirs: read, write, subset (subset_data_dir.sh), split (split_data.sh).
Validation and fixing (validate_data_dir.sh, fix_data_dir.sh) live in :mod:`asrtrain.data.validate`.

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
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

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
        return read_table_lines(path)
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
        raw = dict(iter_lines(path / name)) if name == "text" else {}
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
                rows = read_table_lines(f)
            except AsrError as err:
                log.warning("%s (left out)", err.render())
                continue
            table: Dict[str, str] = {}
            for _, key, rest in rows:
                table.setdefault(key, rest)
            out[f.name] = table
    return out


def read_datadir(path: PathLike, validate: bool = True, audio: bool = False) -> DataDir:
    """Read a data dir. With ``validate`` (default) any problem raises AsrError (see :func:`validate`)."""
    path = Path(path)
    if not path.is_dir():
        raise AsrError("data dir not found", path, fix="check the path")
    if validate:
        from asrtrain.data.validate import first_error, find_problems
        problems = find_problems(path, audio=audio)
        if problems:
            raise first_error(problems)
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


def _read_id_list(path: PathLike) -> List[str]:
    return [key for _, key, _ in read_table_lines(path)]


def _copy_descriptive(src: Path, out: Path) -> None:
    for name in DESCRIPTIVE_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, out / name)


def subset(path: PathLike, out: PathLike, *, utt_list: Optional[PathLike] = None,
           first: Optional[int] = None, last: Optional[int] = None,
           spk_list: Optional[PathLike] = None) -> DataDir:
    """Write a subset of a data dir to ``out`` (subset_data_dir.sh). Exactly one selector is given:
    ``utt_list`` / ``spk_list`` (files whose first field is an id), or the ``first`` / ``last`` N
    utterances in sorted order. Ids listed but absent are counted and logged."""
    chosen = [x is not None for x in (utt_list, first, last, spk_list)]
    if sum(chosen) != 1:
        raise AsrError("give exactly one of --utt-list, --first, --last, --spk-list")
    data = read_datadir(path, audio=False)
    utts = data.utts
    if utt_list is not None:
        wanted = _read_id_list(utt_list)
        missing = [u for u in wanted if u not in data.utt2spk]
        sel = [u for u in wanted if u in data.utt2spk]
    elif spk_list is not None:
        spk2utt = data.spk2utt
        wanted = _read_id_list(spk_list)
        missing = [s for s in wanted if s not in spk2utt]
        sel = [u for s in wanted if s in spk2utt for u in spk2utt[s]]
    else:
        n = first if first is not None else last
        if n < 0:
            raise AsrError(f"--first/--last must be >= 0, got {n}")
        missing = []
        sel = utts[:n] if first is not None else utts[max(0, len(utts) - n):] if n else []
    if missing:
        log.warning("subset: %d listed ids are not in %s (e.g. '%s')", len(missing), path, missing[0])
    result = data.subset(sel)
    out = Path(out)
    write_datadir(result, out)
    _copy_descriptive(Path(path), out)
    log.info("subset %s -> %s: %d utterances in, %d out", path, out, len(utts), len(result.utt2spk))
    return replace(result, path=out)


def split_speakers(counts: Sequence[int], n: int) -> List[int]:
    """Cut points splitting speakers (in order, with ``counts`` utterances each) into ``n`` contiguous
    groups of near-equal utterance totals; returns the start index of each group."""
    total, starts, cum, i = sum(counts), [0], 0, 0
    prefix = [0]
    for c in counts:
        cum += c
        prefix.append(cum)
    for k in range(1, n):
        target = total * k / n
        lo, hi = starts[-1] + 1, len(counts) - (n - k)  # each group keeps at least one speaker
        i = min(range(lo, hi + 1), key=lambda j: (abs(prefix[j] - target), j))
        starts.append(i)
    return starts


def split(path: PathLike, n: int) -> List[Path]:
    """Split by speaker into ``DIR/split<n>/1 .. n`` (split_data.sh); each part is a full data dir."""
    if n < 1:
        raise AsrError(f"number of splits must be >= 1, got {n}")
    path = Path(path)
    data = read_datadir(path, audio=False)
    spk2utt = data.spk2utt
    speakers = sorted(spk2utt)
    if n > len(speakers):
        raise AsrError(f"cannot split {len(speakers)} speakers into {n} parts", path / "spk2utt",
                       fix=f"use at most {len(speakers)} splits")
    starts = split_speakers([len(spk2utt[s]) for s in speakers], n) + [len(speakers)]
    outs, sizes = [], []
    for j in range(n):
        part = data.subset(u for s in speakers[starts[j]:starts[j + 1]] for u in spk2utt[s])
        out = path / f"split{n}" / str(j + 1)
        write_datadir(part, out)
        _copy_descriptive(path, out)
        outs.append(out)
        sizes.append(len(part.utt2spk))
    log.info("split %s (%d utterances) into %d parts by speaker: %s utterances", path, len(data.utt2spk), n,
             " + ".join(map(str, sizes)))
    return outs
