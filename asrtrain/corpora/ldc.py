"""What the LDC conversational-speech corpora share (Switchboard-1, Fisher, Hub5-2000), as Kaldi's
``egs/swbd/s5c/local`` scripts do it: SPHERE files found and read, ``wav.scp`` entries (shorten through
``sph2pipe``, PCM / mu-law read directly), data dirs written, and the subset tools
(``utils/subset_data_dir.sh --first/--last``, ``local/remove_dup_utts.sh``)."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from asrtrain.data.table import spk2utt_from_utt2spk, write_table
from asrtrain.errors import AsrError

log = logging.getLogger(__name__)


class Utterance(NamedTuple):
    """One utterance: ids, times as written in ``segments`` (strings, Kaldi's formatting), and text."""
    utt: str
    reco: str
    start: str
    end: str
    text: str


def read_sphere_header(path: Path) -> Dict[str, str]:
    """The NIST SPHERE header fields (``{"sample_coding": "pcm", "channel_count": "2", ...}``), parsed by
    :func:`asrtrain.data.audio.sphere_header`; a file that is not SPHERE is an error here.

    Only the header is read: to decide between soundfile (PCM, µ-law) and sph2pipe (shorten), which
    libsndfile cannot decode.
    """
    from asrtrain.data.audio import sphere_header
    header = sphere_header(str(path))
    if header is None:
        raise AsrError("not a NIST SPHERE file (no NIST_1A header)", path,
                       fix="LDC .sph audio is expected here; re-copy the file from the corpus media")
    if not header:
        raise AsrError("unreadable NIST SPHERE header (its size line is not a number)", path,
                       fix="the file is damaged; re-copy it from the corpus media")
    return header


def find_sph(root: Path) -> Dict[str, Path]:
    """``{"sw02001": Path(".../sw02001.sph")}`` for every .sph below ``root`` (Kaldi: find -iname '*.sph')."""
    out: Dict[str, Path] = {}
    for dirpath, _, files in os.walk(root, followlinks=True):
        for name in files:
            if name.lower().endswith(".sph"):
                out.setdefault(name[:-4], Path(dirpath, name).resolve())
    return dict(sorted(out.items()))


def resolve_sph2pipe(sph2pipe: Optional[str], example: Path) -> str:
    """The sph2pipe command to put in wav.scp pipes, or an error saying how to get it."""
    found = shutil.which(sph2pipe or "sph2pipe")
    if found is None:
        raise AsrError(f"the audio is shorten-compressed SPHERE (e.g. {example}), which needs sph2pipe, and "
                       f"{'sph2pipe' if sph2pipe is None else repr(sph2pipe)} is not an executable on PATH",
                       fix="install sph2pipe (Kaldi: cd kaldi/tools && make sph2pipe, then use "
                           "tools/sph2pipe_v2.5/sph2pipe; or build LDC's sph2pipe from "
                           "https://www.ldc.upenn.edu/language-resources/tools/sphere-conversion-tools) "
                           "and put it on PATH or pass --sph2pipe /path/to/sph2pipe")
    return found


def with_audio(segments: List[Utterance], sph: Dict[str, Path], sph2pipe: Optional[str], corpus: str):
    """Keep the segments whose conversation side has audio; warn (with an example) about the others.

    Returns ``(segments, wav_scp, reco2file_and_channel)`` for the recordings that remain."""
    recos = sorted({s.reco for s in segments})
    wav, reco2fc = wav_scp_entries(sph, recos, sph2pipe)
    missing = [r for r in recos if r not in wav]
    if missing:
        log.warning("%s: %d of %d conversation sides have transcripts but no audio, e.g. %s; "
                    "their utterances are left out", corpus, len(missing), len(recos), missing[0])
    return [s for s in segments if s.reco in wav], wav, reco2fc


def wav_scp_entries(sph: Dict[str, Path], recos: Sequence[str], sph2pipe: Optional[str] = None
                    ) -> Tuple[Dict[str, str], Dict[str, str]]:
    """wav.scp and reco2file_and_channel entries for recordings ``<file>-A`` / ``<file>-B``.

    Side A is the first channel, side B the second. Shorten-compressed files go through
    ``sph2pipe -f wav -p -c 1|2 FILE |`` (Kaldi's exact pipe; program and FILE shell-quoted, since wav.scp
    pipes run through /bin/sh). PCM and µ-law SPHERE files are read directly
    by soundfile, so wav.scp names the file and the audio reader takes the channel from
    reco2file_and_channel. Recordings whose file is missing are left out (the caller reports them).
    """
    wav: Dict[str, str] = {}
    reco2fc: Dict[str, str] = {}
    program = None
    for reco in recos:
        name, side = reco.rsplit("-", 1)
        path = sph.get(name)
        if path is None:
            continue
        header = read_sphere_header(path)
        channels = int(header.get("channel_count", "1"))
        if channels != 2:
            raise AsrError(f"expected 2 channels (one per conversation side), the header says {channels}",
                           path, fix="use the original two-channel LDC file")
        if "shorten" in header.get("sample_coding", "").lower():
            program = program or resolve_sph2pipe(sph2pipe, path)
            # wav.scp pipes run through /bin/sh (Kaldi's contract): quote what we put in them
            wav[reco] = (f"{shlex.quote(program)} -f wav -p -c {1 if side == 'A' else 2} "
                         f"{shlex.quote(str(path))} |")
        else:
            wav[reco] = str(path)
        reco2fc[reco] = f"{name} {side}"
    return wav, reco2fc


def write_data_dir(out: Path, segments: Sequence[Utterance], wav: Dict[str, str],
                   reco2fc: Dict[str, str]) -> None:
    """Write a sorted, consistent Kaldi data dir; speakers are recordings (conversation sides)."""
    out.mkdir(parents=True, exist_ok=True)
    recos = sorted({s.reco for s in segments})
    utt2spk = {s.utt: s.reco for s in segments}
    write_table(out / "text", {s.utt: s.text for s in segments})
    write_table(out / "segments", {s.utt: f"{s.reco} {s.start} {s.end}" for s in segments})
    write_table(out / "utt2spk", utt2spk)
    write_table(out / "spk2utt", spk2utt_from_utt2spk(utt2spk))
    write_table(out / "wav.scp", {r: wav[r] for r in recos})
    write_table(out / "reco2file_and_channel", {r: reco2fc[r] for r in recos})


def keep_first(segments: Sequence[Utterance], n: int) -> List[Utterance]:
    """``utils/subset_data_dir.sh --first``: the first ``n`` utterances in sorted order."""
    return sorted(segments)[:max(n, 0)]


def keep_last(segments: Sequence[Utterance], n: int) -> List[Utterance]:
    """``utils/subset_data_dir.sh --last``."""
    return sorted(segments)[len(segments) - n:] if n > 0 else []


def remove_dup_utts(segments: Sequence[Utterance], max_count: int) -> List[Utterance]:
    """Kaldi's ``utils/data/remove_dup_utts.sh max_count``, with its own predictable random numbers.

    A transcript seen ``n >= max_count`` times keeps each copy with probability ``max_count / n`` (so
    about ``max_count`` copies of "uh-huh" survive); rarer transcripts are all kept. The generator is the
    Perl script's ``k = (k + 103349) % 71147``, drawn only for the frequent transcripts, in file order.
    """
    ordered = sorted(segments)
    counts: Dict[str, int] = {}
    for s in ordered:
        counts[s.text] = counts.get(s.text, 0) + 1
    k = 0
    kept = []
    for s in ordered:
        n = counts[s.text]
        if n < max_count:
            kept.append(s)
            continue
        k = (k + 103349) % 71147
        if k / 71147 < max_count / n:
            kept.append(s)
    return kept
