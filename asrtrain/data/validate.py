"""Kaldi data dir checks: validate (validate_data_dir.sh) and fix (fix_data_dir.sh).

:func:`find_problems` lists everything wrong as :class:`~asrtrain.data.datadir.Problem` s; :func:`validate`
raises the first as an :class:`AsrError`; :func:`fix` drops what cannot be kept and reports it.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from asrtrain.config import FeatureConfig
from asrtrain.data.audio import MAX_OVERSHOOT_S, Where, channel_index, file_info, is_pipe
from asrtrain.data.datadir import (ALL_FILES, FIX, UTT_FILES, DataDir, PathLike, Problem, build_datadir,
                                   extra_kind, load_tables, read_datadir, write_datadir)
from asrtrain.data.table import BOM, read_table_lines, spk2utt_from_utt2spk
from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_write_text

log = logging.getLogger(__name__)
#: The frame (ms) every utterance must fill: features.frame_length's default, which the recipes use. The
#: features' own check uses the config's frame, so a longer one can still stop them on a shorter utterance.
FRAME_MS = FeatureConfig.frame_length
# ---------------------------------------------------------------------------------------------------------
# Validation

def find_problems(path: PathLike, audio: bool = True, text: bool = False,
                  frames: bool = True) -> List[Problem]:
    """Everything validate_data_dir.sh checks, as a list of problems (empty = valid).

    With ``audio``, plain audio files must exist and their headers must read as the features' reader
    reads them (not corrupt, shorten-compressed, truncated or empty: :func:`asrtrain.data.audio.file_info`,
    headers only, never the samples), and segments must end within the recording; pipes are not run.
    With ``audio`` and ``frames``, every utterance (a file's frame count from its header, or a segment's
    span) must fill one :data:`FRAME_MS` feature frame, or the features would have none of it. With
    ``text``, the dir must have a ``text`` file, as validate_data_dir.sh requires unless ``--no-text``;
    the tools that only select or transform a dir (subset, split, perturb, features) do not ask for it.
    """
    path = Path(path)
    tables, lines, problems = load_tables(path)
    problems = _bom_problems(path, tables) + problems
    if text and not (path / "text").exists():
        problems.append(Problem(str(path / "text"), None, "missing text (the transcripts; "
                                "validate_data_dir.sh requires it unless --no-text)",
                                "write text, one '<utt-id> <words...>' line per utterance, or pass --no-text "
                                "for a dir without transcripts"))
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
    problems += _value_problems(path)
    problems += _crlf_problems(path, tables)
    problems += _speaker_order_problems(path, tables, lines)
    if audio and "wav.scp" in tables:
        problems += _audio_problems(path, tables, lines, frames)
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
        used = {seg.rec for seg in segments.values()}
        for rec in wav:  # validate_data_dir.sh refuses recording ids that segments and wav.scp do not share
            if rec not in used:
                problems.append(Problem(str(path / "wav.scp"), lines["wav.scp"].get(rec),
                                        f"recording '{rec}' is used by no segment",
                                        f"add its segments, or {FIX} drops the recording", ()))
    r2fc = tables.get("reco2file_and_channel")
    if r2fc is not None and wav is not None:
        for rec in wav:
            if rec not in r2fc:
                problems.append(Problem(str(path / "wav.scp"), lines["wav.scp"].get(rec),
                                        f"recording '{rec}' is not in reco2file_and_channel",
                                        f"add it there, or {FIX} drops it", _utts_of(rec, tables)))
    return problems


#: Files whose value validate_data_dir.sh checks: the durations must be positive numbers, the gender m or f.
DURATION_FILES = ("utt2dur", "reco2dur")


def _value_problems(path: Path) -> List[Problem]:
    """Bad ``utt2dur`` / ``reco2dur`` durations and ``spk2gender`` genders (the first of each file)."""
    problems: List[Problem] = []
    for name in DURATION_FILES + ("spk2gender",):
        if not (path / name).is_file():
            continue
        try:
            rows = read_table_lines(path / name, strip_bom=True)
        except AsrError as err:
            problems.append(Problem(str(path / name), err.line, err.message, err.fix or ""))
            continue
        for no, key, value in rows:
            if name == "spk2gender":
                if value.strip() in ("m", "f"):
                    continue
                message = f"gender {value.strip()!r} of speaker '{key}' is not m or f"
                fix = "write '<spk-id> m' or '<spk-id> f' (validate_data_dir.sh refuses anything else)"
            else:
                try:
                    ok = len(value.split()) == 1 and math.isfinite(float(value)) and float(value) > 0
                except ValueError:
                    ok = False
                if ok:
                    continue
                message = f"duration {value.strip()!r} of '{key}' is not a positive number of seconds"
                fix = f"correct it, or delete {name} (it only caches the audio's lengths)"
            problems.append(Problem(str(path / name), no, message, fix))
            break
    return problems


def _speaker_order_problems(path: Path, tables: Dict[str, dict], lines) -> List[Problem]:
    """validate_data_dir.sh's ``sort -k2 utt2spk | cmp - utt2spk``: sorted by utterance, utt2spk must also
    be sorted by speaker, so each speaker's utterances are contiguous (Kaldi's per-speaker splits and CMVN
    rely on it). Speaker ids that prefix their utterance ids guarantee it."""
    utt2spk = tables.get("utt2spk")
    if not utt2spk:
        return []
    utts = sorted(utt2spk)
    for prev, utt in zip(utts, utts[1:]):
        a, b = (utt2spk[prev], f"{prev} {utt2spk[prev]}"), (utt2spk[utt], f"{utt} {utt2spk[utt]}")
        if b < a:
            return [Problem(str(path / "utt2spk"), lines["utt2spk"].get(utt),
                            f"utt2spk is not sorted by speaker as well: '{utt}' (speaker '{utt2spk[utt]}') "
                            f"sorts after '{prev}' (speaker '{utt2spk[prev]}')",
                            "make every speaker id a prefix of its utterance ids (Kaldi's rule), "
                            "e.g. spkA-utt1 spkA")]
    return []


def _crlf_problems(path: Path, tables: Dict[str, dict]) -> List[Problem]:
    """CRLF line endings. Our readers drop the CR, but Kaldi's tools keep it as part of the last field (a
    word of ``text``, a speaker of ``utt2spk``, a path of ``wav.scp``), so the dir is not valid for them."""
    problems: List[Problem] = []
    for name in sorted(tables):
        try:
            raw = (path / name).read_bytes()
        except OSError:
            continue
        at = raw.find(b"\r\n")
        if at >= 0:
            problems.append(Problem(str(path / name), raw.count(b"\n", 0, at) + 1,
                                    "CRLF line ending (Kaldi's tools would read the CR as part of the line's "
                                    "last field)", f"{FIX} rewrites the files with LF, or run dos2unix on it"))
    return problems


#: The start of the message :func:`_bom_problems` gives (fix repairs it and lists it in its report).
BOM_MESSAGE = "starts with a UTF-8 byte-order mark"


def _bom_problems(path: Path, tables: Dict[str, dict]) -> List[Problem]:
    """A byte-order mark at the start of any data-dir file. Our readers drop it (so it is named here, not as
    an unsorted or unknown first id), but Kaldi's tools read it as part of the first id."""
    names = sorted(set(tables) | {f.name for f in path.iterdir() if f.is_file() and extra_kind(f.name)})
    problems: List[Problem] = []
    for name in names:
        try:
            with open(path / name, "rb") as fh:
                head = fh.read(len(BOM))
        except OSError:
            continue
        if head == BOM:
            problems.append(Problem(str(path / name), 1,
                                    f"{BOM_MESSAGE} (invisible; Kaldi's tools would read it as part of the "
                                    "first id)",
                                    f"{FIX} strips it, or sed -i '1s/^\\xEF\\xBB\\xBF//' on the file"))
    return problems


def _utts_of(rec: str, tables: Dict[str, dict]) -> Tuple[str, ...]:
    segments = tables.get("segments")
    if segments is None:
        return (rec,)
    return tuple(u for u, s in segments.items() if s.rec == rec)


def _audio_problems(path: Path, tables: Dict[str, dict], lines, frames: bool = True) -> List[Problem]:
    """Audio files that are missing or whose header the features' reader refuses (each a problem of the
    recording's utterances, so fix drops them), segments outside their recording and (``frames``)
    utterances shorter than one feature frame."""
    problems: List[Problem] = []
    segments = tables.get("segments") or {}
    by_rec: Dict[str, List[str]] = {}
    for utt, seg in segments.items():
        by_rec.setdefault(seg.rec, []).append(utt)
    speeds = _speeds(path, problems)
    for rec, spec in tables["wav.scp"].items():
        if is_pipe(spec):
            continue
        wline = lines["wav.scp"].get(rec)
        if not os.path.isfile(spec.strip()):
            problems.append(Problem(str(path / "wav.scp"), wline, f"audio file not found: {spec.strip()}",
                                    f"correct the path, or {FIX} drops the recording",
                                    _utts_of(rec, tables)))
            continue
        try:
            info = file_info(spec.strip(), Where(str(path / "wav.scp"), wline), _channel(rec, tables))
        except AsrError as err:
            problems.append(Problem(str(path / "wav.scp"), wline, err.message, err.fix or "",
                                    _utts_of(rec, tables)))
            continue
        rate = info.samplerate
        n = info.frames if rec not in speeds else _perturbed_length(info.frames, rate, speeds[rec])
        duration = n / rate  # segments of a speed-perturbed copy are in perturbed time
        spans = []  # (utt, samples, where) of each utterance of the recording
        for utt in by_rec.get(rec, []):
            seg = segments[utt]
            sline = lines["segments"].get(utt)
            if seg.start >= duration or seg.end > duration + MAX_OVERSHOOT_S:
                problems.append(Problem(str(path / "segments"), sline,
                                        f"segment {seg.start!r}-{seg.end!r} s of '{utt}' is outside "
                                        f"recording "
                                        f"'{rec}' ({duration:.3f} s long)",
                                        f"correct the times, or {FIX} drops it", (utt,)))
                continue
            hi = n if seg.end < 0 else min(int(round(seg.end * rate)), n)  # as audio.segment_bounds
            spans.append((utt, hi - int(round(seg.start * rate)), ("segments", sline)))
        if "segments" not in tables:
            spans.append((rec, n, ("wav.scp", wline)))
        frame = int(rate * FRAME_MS / 1000)  # as features.fbank counts it
        for utt, samples, (name, line) in spans if frames else []:
            if samples < frame:
                problems.append(Problem(str(path / name), line,
                                        f"utterance '{utt}' is {max(samples, 0)} samples "
                                        f"({1000 * max(samples, 0) / rate:.1f} ms), shorter than one "
                                        f"{FRAME_MS:g} ms feature frame ({frame} samples at {rate} Hz; "
                                        "features.frame_length's default): it would have no features",
                                        f"{FIX} drops it", (utt,)))
    return problems


def _perturbed_length(n: int, rate: int, factor: float) -> int:
    """Samples of an ``n``-sample recording after :func:`asrtrain.data.resample.speed_perturb` (torchaudio's
    resample from ``round(rate * factor)`` Hz to ``rate``: ``ceil(n * rate / source)``)."""
    return n if factor == 1.0 else math.ceil(n * rate / int(round(rate * factor)))


def _channel(rec: str, tables: Dict[str, dict]) -> Optional[int]:
    """The 0-based channel reco2file_and_channel gives ``rec`` (None: none, or one the reader refuses)."""
    entry = (tables.get("reco2file_and_channel") or {}).get(rec)
    try:
        return None if entry is None else channel_index(entry[1])
    except AsrError:
        return None


def _speeds(path: Path, problems: List[Problem]) -> Dict[str, float]:
    """reco2speed (asrtrain.data.perturb) as {rec: factor}; a bad factor is a problem."""
    out: Dict[str, float] = {}
    if not (path / "reco2speed").is_file():
        return out
    for no, rec, value in read_table_lines(path / "reco2speed", strip_bom=True):
        try:
            out[rec] = float(value)
        except ValueError:
            out[rec] = -1.0
        if not out[rec] > 0:
            problems.append(Problem(str(path / "reco2speed"), no, f"speed factor {value!r} of '{rec}' is not a "
                                    "positive number", "write '<rec-id> <factor>', or redo perturb-speed"))
            del out[rec]
    return out


def first_error(problems: Sequence[Problem]) -> AsrError:
    for p in problems[1:]:
        log.warning("%s", p)
    err = problems[0].error()
    if len(problems) > 1:
        err = AsrError(f"{err.message} (and {len(problems) - 1} more problems, logged above)",
                       err.path, err.line, err.fix)
    return err


def validate(path: PathLike, audio: bool = True, text: bool = False, frames: bool = True) -> DataDir:
    """Check a data dir as validate_data_dir.sh does; raise AsrError on the first problem.

    Returns the DataDir. Every further problem is logged as a warning first. ``text``: require the
    ``text`` file (``asrtrain data validate`` does unless ``--no-text``, as validate_data_dir.sh).
    ``frames``: with ``audio``, refuse utterances shorter than one feature frame (:func:`find_problems`).
    """
    path = Path(path)
    if not path.is_dir():
        raise AsrError("data dir not found", path, fix="check the path")
    problems = find_problems(path, audio=audio, text=text, frames=frames)
    if problems:
        raise first_error(problems)
    data = read_datadir(path)
    log.info("%s: valid data dir, %d utterances, %d speakers, %d recordings", path, len(data.utt2spk),
             len(data.spk2utt), len(data.wav_scp))
    return data


# ---------------------------------------------------------------------------------------------------------
# fix

def backup_dir(path: Path) -> Path:
    """Where :func:`fix` keeps the files it replaces: ``DIR/.backup`` the first time, then
    ``DIR/.backup.1``, ``.backup.2``, ... so an earlier backup (the true originals) is never overwritten."""
    out, n = path / ".backup", 0
    while out.exists():
        n += 1
        out = path / f".backup.{n}"
    return out


def _writes_nothing_new(fixed: DataDir, path: Path, names: Sequence[str]) -> bool:
    """True when writing ``fixed`` would leave every file of ``path`` byte for byte as it is."""
    with tempfile.TemporaryDirectory(prefix=".fix-", dir=path) as tmp:
        out = Path(tmp)
        if (path / "wav.scp").exists():  # write_datadir keeps an existing wav.scp, even an empty one
            (out / "wav.scp").touch()
        write_datadir(fixed, out)
        return all((path / n).exists() == (out / n).exists()
                   and (not (out / n).exists() or (path / n).read_bytes() == (out / n).read_bytes())
                   for n in names)


@dataclass
class FixReport:
    utts_in: int
    utts_out: int
    dropped: List[Tuple[str, str]]  # (id, reason)
    report_path: Optional[Path] = None  # None: nothing to fix, no file written
    backup_path: Optional[Path] = None  # where the replaced files were kept


def fix(path: PathLike, audio: bool = True) -> FixReport:
    """Repair a data dir as fix_data_dir.sh does, in place.

    Sorts every file, keeps the first of duplicate ids, drops utterances that are not in every file (or
    have an empty transcript, a malformed record, a missing audio file or one whose header cannot be read,
    a segment outside the recording, or fewer samples than one feature frame), keeps only recordings and
    speakers still used, and regenerates spk2utt. The original files go to ``DIR/.backup/`` (a later fix
    to ``.backup.1``, ``.backup.2``, ...: :func:`backup_dir`); ``DIR/fix_report.txt`` lists every dropped
    id and why. A dir fix would leave as it is gets no backup and no report (``report_path`` None). A fix
    that would drop every utterance raises AsrError and leaves the dir as it was.
    Non-UTF-8 files cannot be repaired here and raise AsrError.
    """
    path = Path(path)
    if not path.is_dir():
        raise AsrError("data dir not found", path, fix="check the path")
    problems = find_problems(path, audio=audio)
    for p in problems:
        if p.message.startswith("not valid UTF-8"):
            raise p.error()
    tables, lines, _ = load_tables(path)
    if "utt2spk" not in tables:
        raise AsrError("missing utt2spk: nothing to fix from", path / "utt2spk",
                       fix="write utt2spk (<utt-id> <spk-id>)")
    if "wav.scp" not in tables and "feats.scp" not in tables:
        raise AsrError("missing wav.scp (and no feats.scp): no utterance has audio or features to keep",
                       path / "wav.scp", fix="write wav.scp (<rec-id> <audio file or command |>)")
    data = build_datadir(path, tables, lines)
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
    boms = [p for p in problems if p.message.startswith(BOM_MESSAGE)]  # stripped: no utterance dropped
    if not keep:
        first = dropped[0] if dropped else ("", "utt2spk is empty")
        raise AsrError(f"fix would drop all {len(all_utts)} utterances (e.g. '{first[0]}': {first[1]}); "
                       "the data dir is left as it was", path,
                       fix="repair the files (asrtrain data validate DIR names the problems), then fix again")
    names = ALL_FILES + tuple(data.extra)
    if not dropped and not duplicates and not boms and _writes_nothing_new(fixed, path, names):
        log.info("fix %s: nothing to fix (%d utterances, every file already as fix writes it)", path,
                 len(keep))
        return FixReport(len(keep), len(keep), [])
    backup = backup_dir(path)
    backup.mkdir()
    for name in names:
        if (path / name).exists():
            shutil.copy2(path / name, backup / name)
    write_datadir(fixed, path)
    report = path / "fix_report.txt"
    atomic_write_text(report, "".join(f"{u} {why}\n" for u, why in dropped)
                      + "".join(f"{p.path}:{p.line} {p.message}\n" for p in duplicates + boms))
    n_in = len(all_utts)
    log.info("fix %s: %d utterances in, %d out (%d dropped, %d duplicate lines removed, %d byte-order marks "
             "stripped; see %s)", path, n_in, len(keep), n_in - len(keep), len(duplicates), len(boms), report)
    return FixReport(n_in, len(keep), dropped, report, backup)


