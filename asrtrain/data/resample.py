"""Resampling and speed perturbation of float32 samples: torchaudio's sinc resampler, with a bound on the
kernel an awkward rate ratio would make it build (:func:`resample_ratio`)."""

from __future__ import annotations

import functools
import logging
import math
from fractions import Fraction
from typing import Optional, Tuple

import numpy as np

from asrtrain.errors import AsrError

log = logging.getLogger("asrtrain.audio")


def resample_to(wave: np.ndarray, rate: int, target_rate: Optional[int], resample: bool = True,
                where=None) -> np.ndarray:
    """Resample float32 [n] from ``rate`` to ``target_rate`` (torchaudio's sinc resampler; an awkward
    ratio such as 47999 -> 16000 Hz goes by a close one, :func:`resample_ratio`)."""
    if target_rate is None or rate == target_rate:
        return wave
    if not resample:
        msg = f"sample rate {rate} Hz does not match features.sample_rate {target_rate} Hz"
        fix = f"set features.sample_rate={rate}, or set features.resample=true"
        raise where.error(msg, fix=fix) if where is not None else AsrError(msg, fix=fix)
    return _sinc_resample(wave, int(rate), int(target_rate))


#: Most taps (output phases x kernel length) of torchaudio's sinc kernel we let it build. Its kernel is
#: new/g x (orig/g + 2 x width) for g = gcd(orig, new): 41 taps for 48k -> 16k, 291,200 for 11.025k -> 16k,
#: 582,400 for 11.025k -> 32k (the largest among 8k, 11.025k, 12k, 16k, 22.05k, 24k, 32k, 44.1k, 48k,
#: 88.2k, 96k, 176.4k, 192k to any of 8k, 11.025k, 16k, 22.05k, 24k, 32k, 44.1k, 48k), but 768 million
#: for a coprime 47999 -> 16k, which torch builds in float64 (over 6 GB) and convolves at 48,000
#: multiply-adds per output sample. At the bound a kernel takes about 8 MB to build (float64) and at most
#: about a thousand multiply-adds per output sample; the usual rates stay below it, so their output is
#: exactly what torchaudio gives for the exact ratio.
MAX_KERNEL_TAPS = 2 ** 20


def _kernel_taps(orig: int, new: int) -> int:
    """The size of torchaudio's sinc kernel for ``orig`` -> ``new`` Hz (its defaults: 6 zero crossings,
    rolloff 0.99), as ``torchaudio.functional.functional._get_sinc_resample_kernel`` builds it."""
    g = math.gcd(orig, new)
    o, n = orig // g, new // g
    width = math.ceil(6 * o / (0.99 * min(o, n)))
    return n * (o + 2 * width)


@functools.lru_cache(maxsize=None)  # pure in (rate, target); the cache makes its log line once per ratio
def resample_ratio(rate: int, target: int) -> Tuple[int, int]:
    """``(orig, new)``, coprime, that :func:`resample_to` hands torchaudio for ``rate`` -> ``target`` Hz.

    The exact ratio ``rate / target`` reduced, when its kernel has at most :data:`MAX_KERNEL_TAPS` taps
    (every usual rate). Otherwise the closest fraction with a small enough kernel
    (:meth:`fractions.Fraction.limit_denominator`): the audio is taken to be at the nearby rate
    ``target x orig / new`` (47999 Hz as 48000 Hz), so it plays faster or slower by the relative error
    logged once (2.1e-05 for 47999 Hz: far below what a listener or a model notices)."""
    exact = Fraction(rate, target)
    if _kernel_taps(exact.numerator, exact.denominator) <= MAX_KERNEL_TAPS:
        return exact.numerator, exact.denominator
    lo, hi = 1, exact.denominator  # the largest denominator limit whose best fraction still fits
    while hi - lo > 1:
        mid = (lo + hi) // 2
        got = exact.limit_denominator(mid)
        lo, hi = (mid, hi) if _kernel_taps(got.numerator, got.denominator) <= MAX_KERNEL_TAPS else (lo, mid)
    approx = exact.limit_denominator(lo)
    error = float(approx / exact) - 1.0
    log.info("resampling %d -> %d Hz as if from %.2f Hz (the exact ratio would need a %d-tap filter); "
             "speed changed by a relative %.2g", rate, target, target * approx.numerator / approx.denominator,
             _kernel_taps(exact.numerator, exact.denominator), error)
    return approx.numerator, approx.denominator


def _sinc_resample(wave: np.ndarray, orig: int, new: int) -> np.ndarray:
    """float32 [n] through torchaudio's sinc resampler, ``orig`` -> ``new`` by :func:`resample_ratio`."""
    import torch
    import torchaudio.functional as AF
    o, n = resample_ratio(orig, new)
    out = AF.resample(torch.from_numpy(np.ascontiguousarray(wave)), o, n)
    return out.numpy()


def speed_perturb(wave: np.ndarray, rate: int, factor: float) -> np.ndarray:
    """Speed perturbation with sox ``speed`` semantics: float32 [n] -> [about n / factor], same ``rate``.

    Tempo and pitch change together (0.9: 11% longer and lower), as Kaldi's perturb_data_dir_speed.sh gets
    from ``sox ... speed 0.9``: the samples are taken to be at ``rate * factor`` Hz and resampled to ``rate``
    (torchaudio's sinc resampler, the same construction as its ``SpeedPerturbation``; an awkward ratio by a
    close one, :func:`resample_ratio`). Factor 1 returns the input unchanged.
    """
    if factor <= 0:
        raise AsrError(f"speed factor must be > 0, got {factor}")
    if factor == 1.0:
        return wave
    src = int(round(rate * factor))
    return _sinc_resample(wave, src, int(rate))
