"""Cut a long recording at low-energy points into segments no longer than a bound.

Cuts fall in the quietest 10 ms frame of the last ``search_s`` seconds before each bound, so a cut lands
in a pause between words when there is one; segments tile the recording (no sample is dropped).
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np


def cut_points(wave: np.ndarray, rate: int, max_s: float = 30.0, search_s: float = 5.0
               ) -> List[Tuple[int, int]]:
    """Sample ranges ``[(lo, hi), ...]`` covering ``wave`` [n] end to end, each at most ``max_s`` long."""
    n = len(wave)
    bound = int(max_s * rate)
    if n <= bound:
        return [(0, n)]
    hop = max(1, rate // 100)
    out, lo = [], 0
    while n - lo > bound:
        hi = lo + bound
        first = max(lo + 1, hi - int(search_s * rate))
        starts = np.arange(first, hi - hop + 1, hop)
        if len(starts) == 0:
            cut = hi
        else:
            energy = np.array([float(np.square(wave[s:s + hop]).sum()) for s in starts])
            cut = int(starts[int(np.argmin(energy))]) + hop // 2
        out.append((lo, cut))
        lo = cut
    out.append((lo, n))
    return out
