"""Audio in for transcription: a file libsndfile reads, or a Kaldi wav.scp pipe entry -> mono float32 at
the model's rate, with one line saying what was done to it (resampled, channels mixed or picked)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

from asrtrain.data.audio import Where, file_info, _run_pipe, _sf_msg, is_pipe
from asrtrain.errors import AsrError

AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".sph", ".mp3", ".opus", ".aiff", ".aif", ".au"}


def read_any(spec: str, where: Where = Where()) -> Tuple[np.ndarray, int]:
    """A file path or ``<command> |`` -> (float32 [n, channels], rate)."""
    import soundfile as sf
    spec = spec.strip()
    try:
        if is_pipe(spec):
            data, rate = sf.read(io.BytesIO(_run_pipe(spec, where)), dtype="float32", always_2d=True)
        else:
            file_info(spec, where, None)
            data, rate = sf.read(spec, dtype="float32", always_2d=True)
    except AsrError:
        raise
    except Exception as err:  # libsndfile's terse errors
        raise AsrError(f"not readable audio ({_sf_msg(err)})", spec,
                       fix="check the file (soxi or ffprobe); wav, flac, ogg, SPHERE, mp3 are read") from None
    if data.shape[0] == 0:
        raise AsrError("holds no samples", spec, fix="drop it")
    return data, int(rate)


def check_channel(channel, option: str = "channel=") -> Optional[int]:
    """``channel`` as a 0-based index (None: mix them); a negative or non-integer one is refused in one
    line (``option`` names it: ``--channel`` on the command line, ``channel=`` in Python)."""
    if channel is None:
        return None
    give = option if option.endswith("=") else option + " "
    name = f"{give}{channel}"
    if isinstance(channel, bool) or not isinstance(channel, (int, np.integer)):
        raise AsrError(f"{name} is not a channel number", fix=f"give {give}0 for the first "
                       "channel, 1 for the second, ..., or leave it out to mix them")
    if channel < 0:
        raise AsrError(f"{name}: channels count from 0 (the first), there is no negative channel",
                       fix=f"give {give}0 for the first channel, 1 for the second, ..., "
                           "or leave it out to mix them")
    return int(channel)


def to_model_input(data: np.ndarray, rate: int, target_rate: int, channel: Optional[int] = None,
                   name: str = "audio") -> Tuple[np.ndarray, str]:
    """(float32 [n, channels] or [n], rate) -> (float32 [m] at ``target_rate``, what was done)."""
    data = np.asarray(data, dtype=np.float32)
    if data.ndim == 1:
        data = data[:, None]
    if data.shape[0] == 0:
        raise AsrError("holds no samples", name, fix="drop it")
    if not np.isfinite(data).all():
        bad = int((~np.isfinite(data)).sum())
        raise AsrError(f"{bad} NaN or Inf sample(s)", name, fix="repair the audio")
    done: List[str] = []
    n_ch = data.shape[1]
    channel = check_channel(channel)
    if channel is not None:
        if channel >= n_ch:
            raise AsrError(f"channel {channel} asked of audio with {n_ch} channel(s)", name,
                           fix=f"give --channel 0..{n_ch - 1}")
        wave = data[:, channel]
        if n_ch > 1:
            done.append(f"channel {channel} of {n_ch}")
    elif n_ch > 1:
        wave = data.mean(axis=1)
        done.append(f"{n_ch} channels mixed")
    else:
        wave = data[:, 0]
    if rate != target_rate:
        from asrtrain.data.audio import resample_to
        wave = resample_to(np.ascontiguousarray(wave), rate, target_rate)
        done.append(f"resampled {rate} -> {target_rate} Hz")
    return np.ascontiguousarray(wave, dtype=np.float32), ", ".join(done)


def expand_inputs(items: List[str], stdin=None) -> List[Tuple[str, str]]:
    """AUDIO arguments -> ``[(utt id, wav.scp-style spec)]``: files, directories (their audio files,
    sorted), a Kaldi ``wav.scp`` (any entry, pipes included), or ``-`` (paths on stdin)."""
    out: List[Tuple[str, str]] = []
    for item in items:
        if item == "-":
            import sys
            lines = (stdin or sys.stdin).read().splitlines()
            out += expand_inputs([ln.strip() for ln in lines if ln.strip()])
            continue
        p = Path(item)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in AUDIO_SUFFIXES)
            if not files:
                raise AsrError("no audio files in this directory", p, fix="give audio files or a wav.scp")
            out += [(f.stem, str(f)) for f in files]
        elif p.name == "wav.scp" or p.suffix == ".scp":
            from asrtrain.data.table import read_table
            out += list(read_table(p).items())
        else:
            out.append((p.stem, str(p)))
    return out
