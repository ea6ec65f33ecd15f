"""``asrtrain transcribe``'s AUDIO arguments -> ``(utterance id, wav.scp-style spec)`` pairs.

An argument is a file, a directory (its audio files by suffix, recursively), a Kaldi ``wav.scp`` (its
keys are the ids; pipes included), or ``-`` (paths on stdin, one a line). A file's id is its name without
the suffix, in a directory too (LibriSpeech's ``19/198/19-198-0001.flac`` is ``19-198-0001``, as its
transcripts name it), with whitespace replaced by ``_`` (Kaldi ids hold none; one log line says so).
Two inputs with the same id are refused before anything is decoded: text, ctm and ``--utt2spk`` would
be ambiguous. An argument that gives nothing (an empty directory, wav.scp or stdin) is refused.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Dict, List, Tuple

from asrtrain.errors import AsrError

log = logging.getLogger("asrtrain.transcribe")

AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".sph", ".mp3", ".opus", ".aiff", ".aif", ".au"}
SHOWN = 5  # names a "skipped" log line shows


def expand_inputs(items: List[str], stdin=None) -> List[Tuple[str, str]]:
    """AUDIO arguments -> ``[(utt id, wav.scp-style spec)]`` in argument order (a directory's files
    sorted); ids unique (else one :class:`AsrError` naming both inputs)."""
    pairs = _expand(items, stdin)
    first: Dict[str, str] = {}
    for utt, spec in pairs:
        if utt in first:
            raise AsrError(f"utterance id '{utt}' is given by two inputs, {first[utt]} and {spec}: the text, "
                           "ctm and --utt2spk lines would be ambiguous",
                           fix="rename one of the files, or list the inputs in a wav.scp with ids of your own")
        first[utt] = spec
    return pairs


def _expand(items: List[str], stdin) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for item in items:
        if item == "-":
            import sys
            lines = [ln.strip() for ln in (stdin or sys.stdin).read().splitlines() if ln.strip()]
            if not lines:
                raise AsrError("no paths on stdin", "-",
                               fix="give one path a line, e.g. find DIR -name '*.wav' | asrtrain transcribe MODEL -")
            out += _expand(lines, None)
            continue
        p = Path(item)
        if p.is_dir():
            files = audio_files(p)
            if not files:
                raise AsrError("no audio files in this directory", p, fix="give audio files or a wav.scp")
            out += [(utt_id(f), str(f)) for f in files]
        elif p.name == "wav.scp" or p.suffix == ".scp":
            from asrtrain.data.table import read_table
            table = read_table(p)
            if not table:
                raise AsrError("holds no entries", p, fix="give it '<utt-id> <path or command |>' lines")
            out += list(table.items())
        else:
            out.append((utt_id(p), str(p)))
    return out


def utt_id(path: Path) -> str:
    """A file's utterance id: its name without the suffix, whitespace replaced by ``_`` (logged)."""
    stem = path.stem
    utt = re.sub(r"\s", "_", stem)
    if utt != stem:
        log.info("%s: utterance id '%s' (whitespace in the name replaced by '_')", path, utt)
    return utt


def audio_files(top: Path) -> List[Path]:
    """The files under ``top`` with an audio suffix (any case), sorted. Symlinked directories are
    followed, each directory once (a link back up, or a second link to a walked directory, is skipped), so
    a loop cannot recur. What is skipped gets a log line: other suffixes (info), dangling links and other
    non-regular entries, unreadable directories (warnings)."""
    files: List[Path] = []
    other: List[Path] = []
    odd: List[Path] = []      # dangling symlinks, FIFOs, sockets, devices
    again: List[Path] = []    # directories already walked by another path
    unreadable: List[Path] = []
    seen = set()
    todo = [top]
    while todo:
        d = todo.pop()
        try:
            st = d.stat()
            if (st.st_dev, st.st_ino) in seen:
                again.append(d)
                continue
            seen.add((st.st_dev, st.st_ino))
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            unreadable.append(d)
            continue
        for e in entries:
            p = Path(e.path)
            if e.is_dir():  # follows a symlink
                todo.append(p)
            elif e.is_file():
                (files if p.suffix.lower() in AUDIO_SUFFIXES else other).append(p)
            else:
                odd.append(p)
    _skipped(top, other, "file(s) that are not audio by suffix (audio: "
             + " ".join(sorted(AUDIO_SUFFIXES)) + ")", logging.INFO)
    _skipped(top, odd, "entries that are not regular files (dangling symlinks, FIFOs, ...)", logging.WARNING)
    _skipped(top, again, "symlinked director(ies) already walked (a link back up, or a second link)",
             logging.INFO)
    _skipped(top, unreadable, "unreadable director(ies)", logging.WARNING)
    return sorted(files)


def _skipped(top: Path, paths: List[Path], what: str, level: int) -> None:
    if paths:
        names = [os.path.relpath(p, top) for p in sorted(paths)]
        more = f", ... ({len(names) - SHOWN} more)" if len(names) > SHOWN else ""
        log.log(level, "%s: skipped %d %s: %s%s", top, len(names), what, ", ".join(names[:SHOWN]), more)
