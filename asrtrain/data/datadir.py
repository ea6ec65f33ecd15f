"""Kaldi data dirs: read, write, validate (validate_data_dir.sh), fix (fix_data_dir.sh), subset, split.

A data dir holds ``wav.scp``, ``utt2spk``, ``spk2utt`` and usually ``text``; optionally ``segments``,
``reco2file_and_channel``, ``feats.scp``, ``utt2num_frames`` and ``cmvn.scp``. Every file is sorted as
``LC_ALL=C sort`` sorts, one record per line, first field the key (see :mod:`asrtrain.data.table`).

:func:`find_problems` lists everything wrong as :class:`Problem` s (file, line, message, fix, and the
utterances a problem concerns, empty when it concerns the whole dir); :func:`validate` raises the first
as an :class:`AsrError`. Later stages (features) drop the utterance-level ones under ``--skip-bad``.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from asrtrain.data.audio import MAX_OVERSHOOT_S, audio_duration, is_pipe
from asrtrain.data.table import read_table_lines, spk2utt_from_utt2spk, write_table
from asrtrain.errors import AsrError
from asrtrain.io import atomic_write_text

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
                       extra={n: pick(t, {"utt": keep, "spk": spks, "rec": recs}[_extra_kind(n)])
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


def _parse(name: str, rest: str):
    """Parse the value of one record; raise ValueError with a reason if it is malformed."""
    parts = rest.split()
    if name == "segments":
        if len(parts) != 3:
            raise ValueError("expected '<utt-id> <rec-id> <start-s> <end-s>'")
        start, end = float(parts[1]), float(parts[2])
        if start < 0 or (end != -1 and end <= start):
            raise ValueError(f"segment times {parts[1]} {parts[2]} are not 0 <= start < end")
        return Segment(parts[0], start, end)
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


def _load(path: Path) -> Tuple[Dict[str, dict], Dict[str, Dict[str, int]], List[Problem]]:
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
            try:
                table[key] = _parse(name, rest)
            except ValueError as err:
                problems.append(Problem(fpath, no, f"malformed record for '{key}': {err}",
                                        f"correct the line, or {FIX} drops it", utts))
                continue
            where[key] = no
        tables[name], lines[name] = table, where
    return tables, lines, problems


def _datadir(path: Path, tables: Dict[str, dict], lines) -> DataDir:
    return DataDir(utt2spk=tables.get("utt2spk", {}), wav_scp=tables.get("wav.scp", {}),
                   text=tables.get("text"), segments=tables.get("segments"),
                   reco2file_and_channel=tables.get("reco2file_and_channel"),
                   feats_scp=tables.get("feats.scp"), utt2num_frames=tables.get("utt2num_frames"),
                   cmvn_scp=tables.get("cmvn.scp"), extra=_read_extra(path), path=path, lines=lines)


def _extra_kind(name: str) -> Optional[str]:
    if name in ALL_FILES:
        return None
    return next((kind for prefix, kind in EXTRA_KINDS if name.startswith(prefix)), None)


def _read_extra(path: Path) -> Dict[str, Dict[str, str]]:
    out = {}
    for f in sorted(path.iterdir()):
        if f.is_file() and _extra_kind(f.name):
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
        problems = find_problems(path, audio=audio)
        if problems:
            raise _first_error(problems)
    tables, lines, _ = _load(path)
    return _datadir(path, tables, lines)


def write_datadir(data: DataDir, path: PathLike) -> None:
    """Write every file ``data`` holds (sorted, atomically), spk2utt regenerated from utt2spk."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    write_table(path / "utt2spk", data.utt2spk)
    write_table(path / "spk2utt", spk2utt_from_utt2spk(data.utt2spk))
    if data.wav_scp or data.feats_scp is None:
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


# ---------------------------------------------------------------------------------------------------------
# Validation

def find_problems(path: PathLike, audio: bool = True) -> List[Problem]:
    """Everything validate_data_dir.sh checks, as a list of problems (empty = valid).

    With ``audio``, plain audio files must exist and segments must end within the recording
    (durations from soundfile headers; pipes are not run).
    """
    path = Path(path)
    tables, lines, problems = _load(path)
    for required in ("utt2spk", "spk2utt"):
        if required not in tables and not any(p.path == str(path / required) for p in problems):
            problems.append(Problem(str(path / required), None, f"missing {required}",
                                    "asrtrain data fix DIR regenerates spk2utt from utt2spk"
                                    if required == "spk2utt" else "write utt2spk (<utt-id> <spk-id>)"))
    if "wav.scp" not in tables and "feats.scp" not in tables:
        problems.append(Problem(str(path / "wav.scp"), None, "missing wav.scp (and no feats.scp)",
                                "write wav.scp (<rec-id> <audio file or command |>)"))
    utt2spk = tables.get("utt2spk", {})
    if "utt2spk" in tables and not utt2spk:
        problems.append(Problem(str(path / "utt2spk"), None, "no utterances (utt2spk is empty)",
                                "prepare the data dir again"))
    if "spk2utt" in tables and "utt2spk" in tables:
        want = spk2utt_from_utt2spk(utt2spk)
        got = {s: " ".join(v.split()) for s, v in tables["spk2utt"].items()}
        for spk in sorted(set(want) | set(got)):
            if want.get(spk) != got.get(spk):
                line = lines["spk2utt"].get(spk)
                problems.append(Problem(str(path / "spk2utt"), line,
                                        f"spk2utt and utt2spk disagree about speaker '{spk}'",
                                        f"{FIX} regenerates spk2utt from utt2spk"))
                break
    problems += _cross_check(path, tables, lines)
    if audio and "wav.scp" in tables:
        problems += _audio_problems(path, tables, lines)
    return problems


def _cross_check(path: Path, tables: Dict[str, dict], lines) -> List[Problem]:
    """Ids missing between files, reported once per id at its first file and line."""
    problems: List[Problem] = []
    need = [n for n in ("text", "utt2spk", "segments", "feats.scp", "utt2num_frames") if n in tables]
    segments = tables.get("segments")
    wav = tables.get("wav.scp")
    if segments is None and wav is not None and "feats.scp" not in tables:
        need.append("wav.scp")  # without segments, utterance ids are recording ids
    ids = sorted(set().union(*(tables[n].keys() for n in need))) if need else []
    for utt in ids:
        missing = [n for n in need if utt not in tables[n]]
        if missing:
            home = next(n for n in need if utt in tables[n])
            problems.append(Problem(str(path / home), lines[home].get(utt),
                                    f"utterance '{utt}' is in {home} but not in {' or '.join(missing)}",
                                    f"add it to {missing[0]}, or {FIX} drops it", (utt,)))
    if segments is not None and wav is not None:
        for utt, seg in segments.items():
            if seg.rec not in wav:
                problems.append(Problem(str(path / "segments"), lines["segments"].get(utt),
                                        f"recording '{seg.rec}' of utterance '{utt}' is not in wav.scp",
                                        f"add it to wav.scp, or {FIX} drops the segment", (utt,)))
    r2fc = tables.get("reco2file_and_channel")
    if r2fc is not None and wav is not None:
        for rec in wav:
            if rec not in r2fc:
                problems.append(Problem(str(path / "wav.scp"), lines["wav.scp"].get(rec),
                                        f"recording '{rec}' is not in reco2file_and_channel",
                                        f"add it there, or {FIX} drops it", _utts_of(rec, tables)))
    return problems


def _utts_of(rec: str, tables: Dict[str, dict]) -> Tuple[str, ...]:
    segments = tables.get("segments")
    if segments is None:
        return (rec,)
    return tuple(u for u, s in segments.items() if s.rec == rec)


def _audio_problems(path: Path, tables: Dict[str, dict], lines) -> List[Problem]:
    problems: List[Problem] = []
    segments = tables.get("segments") or {}
    by_rec: Dict[str, List[str]] = {}
    for utt, seg in segments.items():
        by_rec.setdefault(seg.rec, []).append(utt)
    for rec, spec in tables["wav.scp"].items():
        if is_pipe(spec):
            continue
        wline = lines["wav.scp"].get(rec)
        if not os.path.isfile(spec.strip()):
            problems.append(Problem(str(path / "wav.scp"), wline, f"audio file not found: {spec.strip()}",
                                    f"correct the path, or {FIX} drops the recording",
                                    _utts_of(rec, tables)))
            continue
        duration = audio_duration(spec) if rec in by_rec else None
        for utt in by_rec.get(rec, []) if duration is not None else []:
            seg = segments[utt]
            if seg.start >= duration or seg.end > duration + MAX_OVERSHOOT_S:
                problems.append(Problem(str(path / "segments"), lines["segments"].get(utt),
                                        f"segment {seg.start!r}-{seg.end!r} s of '{utt}' is outside "
                                        f"recording "
                                        f"'{rec}' ({duration:.3f} s long)",
                                        f"correct the times, or {FIX} drops it", (utt,)))
    return problems


def _first_error(problems: Sequence[Problem]) -> AsrError:
    for p in problems[1:]:
        log.warning("%s", p)
    err = problems[0].error()
    if len(problems) > 1:
        err = AsrError(f"{err.message} (and {len(problems) - 1} more problems, logged above)",
                       err.path, err.line, err.fix)
    return err


def validate(path: PathLike, audio: bool = True) -> DataDir:
    """Check a data dir as validate_data_dir.sh does; raise AsrError on the first problem.

    Returns the DataDir. Every further problem is logged as a warning first.
    """
    path = Path(path)
    if not path.is_dir():
        raise AsrError("data dir not found", path, fix="check the path")
    problems = find_problems(path, audio=audio)
    if problems:
        raise _first_error(problems)
    data = read_datadir(path, validate=False)
    log.info("%s: valid data dir, %d utterances, %d speakers, %d recordings", path, len(data.utt2spk),
             len(data.spk2utt), len(data.wav_scp))
    return data


# ---------------------------------------------------------------------------------------------------------
# fix, subset, split

@dataclass
class FixReport:
    utts_in: int
    utts_out: int
    dropped: List[Tuple[str, str]]  # (id, reason)
    report_path: Optional[Path] = None


def fix(path: PathLike, audio: bool = True) -> FixReport:
    """Repair a data dir as fix_data_dir.sh does, in place.

    Sorts every file, keeps the first of duplicate ids, drops utterances that are not in every file (or
    have an empty transcript, a malformed record, a missing audio file or a segment outside the
    recording), keeps only recordings and speakers still used, and regenerates spk2utt. The original
    files go to ``DIR/.backup/``; ``DIR/fix_report.txt`` lists every dropped id and why.
    Non-UTF-8 files cannot be repaired here and raise AsrError.
    """
    path = Path(path)
    if not path.is_dir():
        raise AsrError("data dir not found", path, fix="check the path")
    problems = find_problems(path, audio=audio)
    for p in problems:
        if "UTF-8" in p.message:
            raise p.error()
    tables, lines, _ = _load(path)
    if "utt2spk" not in tables:
        raise AsrError("missing utt2spk: nothing to fix from", path / "utt2spk",
                       fix="write utt2spk (<utt-id> <spk-id>)")
    data = _datadir(path, tables, lines)
    all_utts = set().union(*(tables[n].keys() for n in UTT_FILES if n in tables),
                           *(p.utts for p in problems))
    bad: Dict[str, str] = {}
    for p in problems:
        for utt in p.utts:
            bad.setdefault(utt, f"{Path(p.path).name}:{p.line}: {p.message}")
    keep = [u for u in sorted(data.utt2spk) if u not in bad]
    for utt in sorted(all_utts - set(data.utt2spk)):
        bad.setdefault(utt, "not in utt2spk")
    dropped = [(u, bad[u]) for u in sorted(bad)]
    fixed = data.subset(keep)
    if data.segments is not None:  # without segments a recording is its utterance, already listed
        dropped += [(r, "wav.scp: recording has no utterances left")
                    for r in sorted(set(data.wav_scp) - set(fixed.wav_scp))]
    duplicates = [p for p in problems if p.message.startswith("duplicate id")]
    backup = path / ".backup"
    backup.mkdir(exist_ok=True)
    for name in ALL_FILES + tuple(data.extra):
        if (path / name).exists():
            shutil.copy2(path / name, backup / name)
    write_datadir(fixed, path)
    report = path / "fix_report.txt"
    atomic_write_text(report, "".join(f"{u} {why}\n" for u, why in dropped)
                      + "".join(f"{p.path}:{p.line} {p.message}\n" for p in duplicates))
    n_in = len(all_utts)
    log.info("fix %s: %d utterances in, %d out (%d dropped, %d duplicate lines removed; see %s)",
             path, n_in, len(keep), n_in - len(keep), len(duplicates), report)
    return FixReport(n_in, len(keep), dropped, report)


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
