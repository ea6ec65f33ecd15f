"""Audio in for transcription: a file libsndfile reads, a Kaldi wav.scp pipe entry, or samples given in
Python (:func:`from_python`) -> mono float32 at the model's rate, with one line saying what was done to it
(scaled, resampled, channels mixed or picked)."""

from __future__ import annotations

import io
import logging
from pathlib import PurePath
from typing import List, Optional, Tuple

import numpy as np

from asrtrain.data.audio import Where, file_info, _run_pipe, _sf_msg, is_pipe
from asrtrain.errors import AsrError

log = logging.getLogger("asrtrain.transcribe")

#: A float sample beyond this gets a warning: floats are amplitudes in [-1, 1], and overshoot from mixing or
#: resampling stays near 1 (inter-sample peaks of +3 dB are 1.41); +6 dB and more is another scale.
FLOAT_PEAK_WARN = 2.0


def read_any(spec: str, where: Where = Where()) -> Tuple[np.ndarray, int]:
    """A file path or ``<command> |`` -> (float32 [n, channels], rate)."""
    import soundfile as sf
    spec = spec.strip()
    try:
        if is_pipe(spec):
            data, rate = sf.read(io.BytesIO(_run_pipe(spec, where)), dtype="float32", always_2d=True)
        else:
            info = file_info(spec, where, None)
            source = io.BytesIO(info.stream_copy) if info.stream_copy is not None else spec
            data, rate = sf.read(source, dtype="float32", always_2d=True)
    except AsrError:
        raise
    except Exception as err:  # libsndfile's terse errors
        raise AsrError(f"not readable audio ({_sf_msg(err)})", spec,
                       fix="check the file (soxi or ffprobe); wav, flac, ogg, SPHERE, mp3 are read") from None
    if data.shape[0] == 0:
        raise AsrError("holds no samples", spec, fix="drop it")
    return data, int(rate)


#: Most channels a [channels, samples] array (torchaudio.load's layout) may have to be taken as one.
MAX_CHANNELS_FIRST = 32

#: Integer PCM -> float in [-1, 1) as soundfile and torchaudio read it: (offset, scale) per dtype.
PCM_SCALES = {"int8": (0, 2.0 ** 7), "int16": (0, 2.0 ** 15), "int32": (0, 2.0 ** 31), "uint8": (128, 2.0 ** 7)}


def check_rate(sample_rate) -> int:
    """``sample_rate=`` of samples from Python as an int; None, a non-number, a fraction of a Hz
    (16000.5) or a rate <= 0 is refused in one line."""
    fix = "give the samples' rate in Hz, e.g. transcribe(samples, sample_rate=16000)"
    if sample_rate is None:
        raise AsrError("samples need their sample_rate", fix=fix)
    if isinstance(sample_rate, (bool, np.bool_)) or not isinstance(sample_rate, (int, float, np.integer,
                                                                                   np.floating)):
        raise AsrError(f"sample_rate={sample_rate!r} is not a number", fix=fix)
    if not np.isfinite(sample_rate) or int(sample_rate) != sample_rate:
        raise AsrError(f"sample_rate={sample_rate!r} is not a whole number of Hz", fix=fix)
    if sample_rate <= 0:
        raise AsrError(f"sample_rate={sample_rate!r} must be positive", fix=fix)
    return int(sample_rate)


def from_python(samples) -> Tuple[np.ndarray, List[str]]:
    """Samples given in Python -> (float32 [n, channels], what was done to them).

    - Floats (any width) are amplitudes in [-1, 1], as soundfile reads them.
    - Integer PCM is scaled as soundfile and torchaudio scale it (what scipy.io.wavfile.read gives):
      int16 / 32768, int32 / 2^31, int8 / 128, uint8 (x - 128) / 128. Other integers (int64, as a list
      of Python ints becomes; uint16, ...) have no known scale and are refused, as are bool, complex and
      non-numbers.
    - ``[n]`` is mono; ``[n, channels]`` with n > channels is soundfile's layout; ``[channels, n]`` with
      at most :data:`MAX_CHANNELS_FIRST` channels and n > channels (torchaudio.load's layout) is turned
      round. Any other shape (``[2, 2]``, ``[40, 100]``, 3-D) is refused.
    - A torch tensor is taken as its numpy array.
    """
    import sys
    torch = sys.modules.get("torch")  # a tensor implies torch is imported; never import it for numpy input
    if torch is not None and isinstance(samples, torch.Tensor):
        samples = samples.detach().cpu()
        samples = (samples.float() if samples.dtype == torch.bfloat16 else samples).numpy()
    try:
        data = np.asarray(samples)
    except (ValueError, TypeError) as err:
        raise AsrError(f"samples are not an array of numbers ({err})",
                       fix="give a numpy array [samples] or [samples, channels]") from None
    kind, dtype = data.dtype.kind, data.dtype.name
    done: List[str] = []
    if kind in "iu":
        if dtype not in PCM_SCALES:
            raise AsrError(f"{dtype} samples have no known scale",
                           fix="give float samples in [-1, 1], or int16/int32 PCM: x.astype(np.int16) for "
                               "16-bit values")
        offset, scale = PCM_SCALES[dtype]
        data = (data.astype(np.float64) - offset) / scale
        done.append(f"{dtype} PCM scaled to [-1, 1]")
    elif kind != "f":
        raise AsrError(f"samples of dtype {dtype} are not audio",
                       fix="give float samples in [-1, 1], or integer PCM: int16, int32 or uint8")
    data = data.astype(np.float32, copy=False)
    if data.ndim == 1:
        return data[:, None], done
    if data.ndim != 2:
        raise AsrError(f"samples of shape {list(data.shape)}: not [samples] or [samples, channels]",
                       fix="give a 1-D array, or 2-D [samples, channels]")
    rows, cols = data.shape
    if rows > cols:
        return data, done
    if rows < cols and rows <= MAX_CHANNELS_FIRST:
        done.append(f"[{rows}, {cols}] taken as [channels, samples]")
        return np.ascontiguousarray(data.T), done
    raise AsrError(f"samples of shape [{rows}, {cols}]: which axis holds the channels is not clear",
                   fix=f"give [samples, channels] (soundfile's layout), or [channels, samples] with at most "
                       f"{MAX_CHANNELS_FIRST} channels (torchaudio's)")


def python_input(audio, sample_rate) -> Tuple[np.ndarray, int, str, List[str]]:
    """A path, or samples with their ``sample_rate`` -> (float32 [n, channels], rate, a name for
    messages, what was done to them): the start of both engines' ``audio``. A path takes its rate from
    the file, so ``sample_rate=`` with a path is refused."""
    if isinstance(audio, (str, PurePath)):
        name = str(audio)
        if sample_rate is not None:
            raise AsrError(f"sample_rate={sample_rate!r} given with a path: a file's rate is read from the file",
                           name, fix="drop sample_rate=: the file is resampled to the model's rate; or pass its "
                                     "samples instead of the path")
        data, rate = read_any(name)
        return data, rate, name, []
    rate = check_rate(sample_rate)
    data, done = from_python(audio)
    return data, rate, "samples", done


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
    peak = float(np.abs(data).max())
    if peak > FLOAT_PEAK_WARN:
        log.warning("%s: sample values reach %.3g, far outside [-1, 1]: they are taken as amplitudes in [-1, 1], "
                    "so the features are not on training's scale (int16-range values: divide by 32768)",
                    name, peak)
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
        from asrtrain.data.resample import resample_to
        wave = resample_to(np.ascontiguousarray(wave), rate, target_rate)
        done.append(f"resampled {rate} -> {target_rate} Hz")
    return np.ascontiguousarray(wave, dtype=np.float32), ", ".join(done)
