"""Read the audio a ``wav.scp`` entry names: wav, flac and NIST SPHERE via soundfile, or a shell pipe.

Scale: samples come back as float32 in [-1, 1], i.e. the int16 value / 32768 (soundfile's convention).
Kaldi's feature code sees int16-range values, so :func:`asrtrain.features.fbank.fbank` multiplies by 32768
before computing; that keeps our features equal to ``compute-fbank-feats`` on the same file.

Entries follow Kaldi:
- ``/path/file.{wav,flac,sph}``: read with soundfile (libsndfile reads SPHERE PCM and µ-law, one or two
  channels; checked by tests/data/test_audio.py).
- ``<command> |``: run through ``/bin/sh`` (Kaldi's contract), so a wav.scp can run any command: use data
  dirs only from people you trust. Its stdout is a wav (e.g. ``sph2pipe -f wav -p -c 1 x.sph |``); paths
  with spaces or shell characters must be quoted in it (asrtrain's corpus preparation does).
- Shorten-compressed SPHERE (``sample_coding`` contains ``shorten``) cannot be decoded by libsndfile and is
  refused with a message giving the ``sph2pipe`` pipe to use instead.

Speed perturbation: a ``reco2speed`` table (written by ``asrtrain data perturb-speed``) gives a recording's
factor; :func:`speed_perturb` applies it to the whole recording as sox ``speed`` would, before any segment
is cut (segments of a perturbed dir are in perturbed time).

Channels: a two-channel recording needs a channel (from ``reco2file_and_channel``: A = first, B = second;
``1``/``2`` also accepted). A mono source ignores the channel, because the wav.scp entry already chose it
(``sph2pipe -c 2``), as in Kaldi's Switchboard recipe.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import Dict, Optional, Tuple, Union

import numpy as np

from asrtrain.data.resample import resample_to, speed_perturb
from asrtrain.errors import AsrError

#: Kaldi's extract-segments --max-overshoot: a segment may end this far past the recording (then clipped).
MAX_OVERSHOOT_S = 0.5


@dataclass(frozen=True)
class Where:
    """The wav.scp (or segments) line an audio read comes from, for error messages."""
    path: Optional[str] = None
    line: Optional[int] = None

    def error(self, message: str, fix: Optional[str] = None) -> AsrError:
        return AsrError(message, self.path, self.line if self.path else None, fix)

    def drop_fix(self, what: str) -> str:
        """How to drop ``what`` (the recording, the segment): ``asrtrain data fix`` on the data dir of the
        line named, which drops what validate refuses (audio headers, not the samples); else leave it out."""
        if not self.path:
            return "leave it out"
        return f"asrtrain data fix {shlex.quote(os.path.dirname(self.path) or '.')} drops {what}"

    def undecodable_fix(self, first: str = "check the file (e.g. with sox FILE -n stat)") -> str:
        """The advice for audio whose header reads but whose samples do not decode: validate and fix read
        headers only, so the wav.scp line goes by hand, then fix drops its utterances."""
        if not self.path:
            return first
        return f"{first}, or delete its line from wav.scp: then {self.drop_fix('its utterances')}"


def is_pipe(spec: str) -> bool:
    return spec.rstrip().endswith("|")


def channel_index(channel: Union[None, int, str]) -> Optional[int]:
    """``'A'`` -> 0, ``'B'`` -> 1, ``'1'`` -> 0, ``'2'`` -> 1, int -> itself (0-based), None -> None."""
    if channel is None or isinstance(channel, int):
        return channel
    text = str(channel).strip()
    if len(text) == 1 and text.isalpha():
        return ord(text.upper()) - ord("A")
    if text.isdigit() and int(text) >= 1:
        return int(text) - 1
    raise AsrError(f"channel {channel!r} is not A, B, ... or 1, 2, ...",
                   fix="use A/B (first/second channel) in reco2file_and_channel")


def sphere_header(path: str) -> Optional[Dict[str, str]]:
    """Fields of a NIST SPHERE header (``{"sample_coding": "ulaw", ...}``), or None if not SPHERE.

    Only the header is read; decoding stays with soundfile. We need it to spot shorten compression
    (which libsndfile rejects with an empty message) and truncation (``sample_count`` vs file size).
    """
    with open(path, "rb") as fh:
        head = fh.read(1024)
    if not head.startswith(b"NIST_1A"):
        return None
    lines = head.split(b"\n")
    try:
        size = int(lines[1])
    except (IndexError, ValueError):
        return {}
    if size > len(head):
        with open(path, "rb") as fh:
            head = fh.read(size)
        lines = head.split(b"\n")
    fields: Dict[str, str] = {}
    for raw in lines[2:]:
        text = raw.decode("ascii", "replace").strip()
        if text == "end_head":
            break
        parts = text.split(None, 2)
        if len(parts) == 3:
            fields[parts[0]] = parts[2]
    return fields


def _sph2pipe_fix(path: str, channel: Optional[int]) -> str:
    where = shutil.which("sph2pipe")
    note = (f"sph2pipe is at {where}" if where
            else "sph2pipe is not on PATH: build it with Kaldi's tools/Makefile and add it")
    return (f"write the wav.scp entry as 'sph2pipe -f wav -p -c {(channel or 0) + 1} {shlex.quote(path)} |' "
            f"({note})")


def _run_pipe(spec: str, where: Where) -> bytes:
    """The stdout of a ``cmd |`` entry, a stream-mode wav's sizes filled in (:func:`fill_stream_wav_sizes`:
    a command writing a wav to a pipe cannot seek back to write them)."""
    cmd = spec.rstrip()[:-1].strip()
    proc = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        try:
            prog = shlex.split(cmd)[0]
        except (ValueError, IndexError):
            prog = cmd
        if proc.returncode == 127:
            raise where.error(f"pipe command '{prog}' not found on PATH (in: {cmd} |)",
                              fix=f"install {prog} and put it on PATH"
                              + (" (Kaldi's tools/Makefile builds it)" if "sph2pipe" in prog else ""))
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise where.error(f"pipe command failed with exit code {proc.returncode}: "
                          f"{err[-1] if err else 'no message'} (in: {cmd} |)",
                          fix="run the command by hand to see what is wrong")
    if not proc.stdout:
        raise where.error(f"pipe command wrote no audio (in: {cmd} |)", fix="run the command by hand")
    return fill_stream_wav_sizes(proc.stdout) or proc.stdout


def fill_stream_wav_sizes(raw: bytes) -> Optional[bytes]:
    """A RIFF/WAVE file whose ``data`` chunk declares 0 bytes (stream mode: a writer that could not seek
    back to fill in the sizes, which Kaldi's wave reader reads to the end of the file) with the sizes
    taken from the bytes present; None for any other file. libsndfile would read such a file as empty."""
    if len(raw) < 12 or raw[:4] != b"RIFF" or raw[8:12] != b"WAVE":
        return None
    pos = 12
    while pos + 8 <= len(raw):
        cid, size = raw[pos:pos + 4], int.from_bytes(raw[pos + 4:pos + 8], "little")
        if cid == b"data":
            n = len(raw) - (pos + 8)
            if size != 0 or n <= 0 or len(raw) - 8 > 0xFFFFFFFF:
                return None
            out = bytearray(raw)
            out[4:8] = (len(raw) - 8).to_bytes(4, "little")
            out[pos + 4:pos + 8] = n.to_bytes(4, "little")
            return bytes(out)
        pos += 8 + size + (size & 1)
    return None


def _stream_wav(path: str) -> Optional[bytes]:
    """:func:`fill_stream_wav_sizes` of a file, in memory (read whole: stream-mode files are rare)."""
    with open(path, "rb") as fh:
        if fh.read(4) != b"RIFF":
            return None
        fh.seek(0)
        return fill_stream_wav_sizes(fh.read())


def file_info(path: str, where: Where, channel: Optional[int] = None):
    """Return soundfile.info of a plain audio file, refusing missing, shorten-compressed, corrupt,
    truncated and empty files. Headers only: the samples are never decoded (validate calls it for every
    wav.scp file; ``channel`` only shapes the sph2pipe advice)."""
    import soundfile as sf
    if os.path.exists(path) and not os.path.isfile(path):
        raise where.error(f"audio file {path} is not a regular file (a device, FIFO or directory: reading "
                          "it would never end or never start)",
                          fix="name a regular audio file in wav.scp, or a 'command |' pipe")
    if not os.path.isfile(path):
        raise where.error(f"audio file not found: {path}",
                          fix=f"correct the path in wav.scp, or {where.drop_fix('the recording')}")
    try:
        header = sphere_header(path)
    except OSError as err:
        raise where.error(f"cannot read audio file {path}: {err.strerror}") from None
    if header is not None and "shorten" in header.get("sample_coding", ""):
        raise where.error(f"{path} is shorten-compressed SPHERE, which soundfile cannot decode",
                          fix=f"{_sph2pipe_fix(path, channel)}, or {where.drop_fix('the recording')}")
    try:
        info = sf.info(path)
    except Exception as err:  # libsndfile raises its own error types with terse text
        raise where.error(f"cannot read audio file {path}: corrupt or unsupported format ({_sf_msg(err)})",
                          fix=f"check the file (e.g. with soxi or ffprobe), or "
                              f"{where.drop_fix('the recording')}") from None
    declared = _declared_frames(info, header)
    if declared is not None and info.frames < declared:
        raise where.error(f"audio file {path} is truncated: {info.frames} of {declared} samples present",
                          fix=f"re-copy or re-extract the file, or {where.drop_fix('the recording')}")
    info.stream_copy = None  # read_recording reads these bytes (the sizes filled in) instead of the file
    if info.frames == 0:
        copy = _stream_wav(path)
        if copy is not None:
            info = sf.info(io.BytesIO(copy))
            info.stream_copy = copy
    if info.frames == 0:
        raise where.error(f"audio file {path} holds no samples", fix=where.drop_fix("the recording"))
    return info


def _declared_frames(info, header: Optional[Dict[str, str]] = None) -> Optional[int]:
    """The sample count a file's header declares (SPHERE sample_count, or a wav data chunk longer than the
    bytes present, as libsndfile reports it), or None when it declares none or all of it is there."""
    if header is not None and "sample_count" in header:
        try:
            return int(header["sample_count"])
        except ValueError:
            return None
    m = re.search(r"^data : (\d+) \(should be (\d+)\)", info.extra_info or "", re.M)
    if m and int(m.group(1)) not in (0, 0xFFFFFFFF) and int(m.group(2)) < int(m.group(1)):
        return int(m.group(1)) // max(1, _bytes_per_frame(info))
    return None


def _bytes_per_frame(info) -> int:
    bits = {"PCM_S8": 8, "PCM_U8": 8, "PCM_16": 16, "PCM_24": 24, "PCM_32": 32, "FLOAT": 32,
            "DOUBLE": 64, "ULAW": 8, "ALAW": 8}.get(info.subtype, 16)
    return bits // 8 * info.channels


def _sf_msg(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text.split(": ", 1)[-1] if text else type(err).__name__


def _pick_channel(data: np.ndarray, channel: Optional[int], spec: str, where: Where) -> np.ndarray:
    """[n, channels] -> [n]."""
    n_ch = data.shape[1]
    if n_ch == 1:
        return data[:, 0]
    if channel is None:
        raise where.error(f"recording has {n_ch} channels but no channel is selected ({spec})",
                          fix="add '<rec-id> <file-id> A' (or B) to reco2file_and_channel, or select it "
                              "in a wav.scp pipe")
    if channel >= n_ch:
        raise where.error(f"channel {chr(ord('A') + channel)} asked of a recording with {n_ch} channels "
                          f"({spec})",
                          fix="correct reco2file_and_channel")
    return data[:, channel]


def read_recording(spec: str, channel: Union[None, int, str] = None, start: Optional[float] = None,
                   end: Optional[float] = None, where: Where = Where(),
                   segment_where: Optional[Where] = None) -> Tuple[np.ndarray, int]:
    """Read a wav.scp entry -> (float32 samples [n] in [-1, 1], sample rate), optionally only [start, end).

    ``start``/``end`` are seconds (``end`` None or -1 = to the end). Plain files are read from ``start``
    only (cheap for segments of long recordings); a pipe is read whole, then sliced. Errors name
    ``where`` (the wav.scp line), or ``segment_where`` (the segments line) for bad segment times.
    """
    import soundfile as sf
    ch = channel_index(channel)
    spec = spec.strip()
    if is_pipe(spec):
        raw = _run_pipe(spec, where)
        try:
            data, rate = sf.read(io.BytesIO(raw), dtype="float32", always_2d=True)
        except Exception as err:
            raise where.error(f"pipe output is not readable audio ({_sf_msg(err)}) (in: {spec})",
                              fix="make the command write a wav to stdout (e.g. sph2pipe -f wav)") from None
        if data.shape[0] == 0:
            raise where.error(f"pipe output holds no samples (in: {spec})", fix="run the command by hand")
        try:
            declared = _declared_frames(sf.info(io.BytesIO(raw)))
        except Exception:  # noqa: BLE001 - it was read above; a header sf.info cannot parse declares nothing
            declared = None
        if declared is not None and data.shape[0] < declared:  # as a truncated file is refused
            raise where.error(f"pipe output is truncated: {data.shape[0]} of the {declared} samples its header "
                              f"declares (in: {spec})",
                              fix="check that the command writes the whole recording (run it by hand)")
        lo, hi = segment_bounds(data.shape[0], rate, start, end, segment_where or where)
        return np.ascontiguousarray(_pick_channel(data[lo:hi], ch, spec, where)), rate
    info = file_info(spec, where, ch)
    rate = info.samplerate
    lo, hi = segment_bounds(info.frames, rate, start, end, segment_where or where)
    try:
        source = io.BytesIO(info.stream_copy) if info.stream_copy is not None else spec
        data, rate = sf.read(source, start=lo, stop=hi, dtype="float32", always_2d=True)
    except Exception as err:
        raise where.error(f"cannot decode audio file {spec}: corrupt ({_sf_msg(err)})",
                          fix=where.undecodable_fix()) from None
    if data.shape[0] < hi - lo:
        raise where.error(f"audio file {spec} is truncated: decoding stopped at sample {lo + data.shape[0]} "
                          f"of {info.frames}", fix=where.undecodable_fix("re-copy or re-extract the file"))
    return np.ascontiguousarray(_pick_channel(data, ch, spec, where)), rate


def segment_bounds(n: int, rate: int, start: Optional[float], end: Optional[float],
                    where: Where) -> Tuple[int, int]:
    """Seconds -> sample range [lo, hi) within n samples, with Kaldi's 0.5 s end overshoot tolerance."""
    lo = 0 if start is None else int(round(start * rate))
    if end is None or end < 0:
        hi = n
    else:
        hi = int(round(end * rate))
        if hi > n:
            if hi - n > MAX_OVERSHOOT_S * rate:
                raise where.error(f"segment ends at {end:.3f} s, past the recording's end at "
                                  f"{n / rate:.3f} s",
                                  fix=f"correct the segment, or {where.drop_fix('it')}")
            hi = n
    if lo >= hi:
        raise where.error(f"segment [{start}, {end}] s is empty or starts past the recording's end "
                          f"({n / rate:.3f} s)", fix=f"correct the segment, or {where.drop_fix('it')}")
    return lo, hi


def load_audio(spec: str, *, start: Optional[float] = None, end: Optional[float] = None,
               channel: Union[None, int, str] = None, target_rate: Optional[int] = None,
               resample: bool = True, scp_path: Optional[str] = None, scp_line: Optional[int] = None,
               speed: float = 1.0):
    """Load a wav.scp entry as (torch.float32 tensor [samples] in [-1, 1], rate).

    Args:
        spec: the wav.scp value: a file path or ``<command> |``.
        start, end: segment bounds in seconds (from ``segments``); ``end`` -1 or None = to the end.
        channel: A/B (or 1/2, or a 0-based int) for multi-channel recordings.
        target_rate: resample to this rate if it differs; with ``resample=False`` a mismatch is an error.
        scp_path, scp_line: the wav.scp file and line, named by every error.
        speed: a ``reco2speed`` factor (see :func:`speed_perturb`), applied to the whole recording before
            ``start``/``end`` slice it (segments of a perturbed dir are in perturbed time).

    Raises:
        AsrError: missing, truncated, corrupt or shorten-compressed audio, a failing pipe, a missing
            channel, a segment past the end, or a rate mismatch with ``resample=False``.
    """
    import torch
    where = Where(scp_path, scp_line)
    if speed != 1.0:
        wave, rate = read_recording(spec, channel, None, None, where)
        wave = speed_perturb(wave, rate, speed)
        lo, hi = segment_bounds(len(wave), rate, start, end, where)
        wave = wave[lo:hi]
    else:
        wave, rate = read_recording(spec, channel, start, end, where)
    if target_rate is not None and rate != target_rate:
        wave, rate = resample_to(wave, rate, target_rate, resample, where), int(target_rate)
    return torch.from_numpy(wave), rate


def audio_duration(spec: str) -> Optional[float]:
    """Duration in seconds of a plain audio file from its header, or None (pipe, unreadable, shorten)."""
    import soundfile as sf
    if is_pipe(spec):
        return None
    try:
        info = sf.info(spec.strip())
        if info.frames == 0:
            copy = _stream_wav(spec.strip())
            info = sf.info(io.BytesIO(copy)) if copy is not None else info
    except Exception:
        return None
    return info.frames / info.samplerate
