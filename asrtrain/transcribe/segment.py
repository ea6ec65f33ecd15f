"""Cut a long recording at low-energy points into segments no longer than a bound.

Cuts fall in the quietest 10 ms window of the last ``search_s`` seconds before each bound, so a cut lands
in a pause between words when there is one; segments tile the recording (no sample is dropped). With
``align`` (the frame shift in samples), every cut falls on a multiple of it, so each segment's fbank frames
are a slice of the whole file's (:meth:`asrtrain.transcribe.model.Transcriber.segment_features`).
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np


def cut_points(wave: np.ndarray, rate: int, max_s: float = 30.0, search_s: float = 5.0, align: int = 1
               ) -> List[Tuple[int, int]]:
    """Sample ranges ``[(lo, hi), ...]`` covering ``wave`` [n] end to end, each at most ``max_s`` long;
    every cut is a multiple of ``align`` samples (when the bound leaves room for one)."""
    n = len(wave)
    bound = int(max_s * rate)
    if n <= bound:
        return [(0, n)]
    hop = max(1, rate // 100)
    align = max(1, int(align))
    step = align * max(1, hop // align)  # candidate cuts: multiples of align, about 10 ms apart
    half = hop // 2
    out, lo = [], 0
    while n - lo > bound:
        hi = lo + bound
        first = max(lo + 1, hi - int(search_s * rate))
        cands = np.arange(-(-first // step) * step, hi + 1, step)
        cands = cands[(cands - half >= 0) & (cands + hop - half <= n)]
        if len(cands) == 0:
            cut = hi // align * align if hi // align * align > lo else hi
        else:
            a, b = int(cands[0]) - half, int(cands[-1]) + hop - half
            sums = np.concatenate([[0.0], np.cumsum(np.square(wave[a:b], dtype=np.float64))])
            energy = sums[cands - a - half + hop] - sums[cands - a - half]
            cut = int(cands[int(np.argmin(energy))])
        out.append((lo, cut))
        lo = cut
    out.append((lo, n))
    return out
