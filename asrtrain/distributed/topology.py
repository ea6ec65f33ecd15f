"""Mixing matrices of the ADPSGD averaging schedules and their spectral gaps.

One pairwise average of learners i and j multiplies the weight vector by
``W_ij = I - 1/2 (e_i - e_j)(e_i - e_j)^T`` (both end at their mean; the sum is kept, so every W is
doubly stochastic). A *round* is a perfect matching of active (even) with passive (odd) ring
positions, all pairs averaging at once: ``W = prod over the pairs``. How fast the learners agree is
governed by the second largest eigenvalue modulus ``|lambda_2|`` of the relevant matrix; the spectral
gap is ``1 - |lambda_2|``.

- ``fixed``: even rounds pair each active learner with its right neighbour (``W_R``), odd rounds with
  its left one (``W_L``). The schedule is periodic; its matrix is the product over one period,
  ``W_L W_R``. Closed form: ``|lambda_2| = cos^2(2 pi / N)``, gap ``sin^2(2 pi / N)`` (N >= 4).
- ``random``: each round is a uniformly random perfect matching between active and passive learners
  (what :class:`asrtrain.distributed.gossip.Gossip` approximates: each active asks a random passive).
  Its expected matrix ``E[W]`` has eigenvalues 1, 1/2 and 0: gap 1/2 for every N >= 4.
  Because every W is a projection, ``E[W^T W] = E[W]``, so the gap also bounds the mean-square rate.
- ``random-ring`` (for comparison only): a random ring neighbour, the same coin for all learners each
  round, ``E[W] = (W_R + W_L)/2``: gap ``sin^2(pi / N)``, *smaller* than fixed alternation. Random
  neighbours on a ring do not help; random partners across the bipartite graph do, which is why the
  ``random`` schedule draws from all passive learners.

The gaps of a period product and of an expected matrix are not the same measure, so to compare
schedules per round :func:`rounds_to_shrink` gives the number of rounds that shrink the (RMS) distance
from consensus ten-fold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, List, Tuple

import numpy as np

from asrtrain.distributed.gossip import check_gossip_size
from asrtrain.errors import AsrError

SCHEDULES = ("fixed", "random", "random-ring")
#: The largest ring analysed: dense N x N matrices, N / 2 matrix products per matching and an eigen-
#: decomposition cost O(N^4) time (N = 256: seconds; 512: minutes).
MAX_LEARNERS = 256


def pair_matrix(n: int, i: int, j: int) -> np.ndarray:
    """``I - 1/2 (e_i - e_j)(e_i - e_j)^T`` (n, n)."""
    e = np.zeros(n)
    e[i], e[j] = 1.0, -1.0
    return np.eye(n) - 0.5 * np.outer(e, e)


def matching_matrix(n: int, pairs: Iterable[Tuple[int, int]]) -> np.ndarray:
    w = np.eye(n)
    for i, j in pairs:
        w = pair_matrix(n, i, j) @ w
    return w


def ring_matching(n: int, direction: int) -> List[Tuple[int, int]]:
    """Active learner a with its right (+1) or left (-1) ring neighbour; duplicates removed (n = 2)."""
    pairs = {tuple(sorted((a, (a + direction) % n))) for a in range(0, n, 2)}
    return sorted(pairs)


def fixed_matrix(n: int) -> Tuple[np.ndarray, int]:
    """The product over one period of the fixed schedule, and the period in rounds."""
    right, left = matching_matrix(n, ring_matching(n, +1)), matching_matrix(n, ring_matching(n, -1))
    return left @ right, 2


def random_matrix(n: int) -> Tuple[np.ndarray, int]:
    """E[W] of a uniformly random active-passive perfect matching: each pair with probability 2/n."""
    half = n // 2
    laplacian = np.zeros((n, n))
    for a in range(0, n, 2):
        for p in range(1, n, 2):
            e = np.zeros(n)
            e[a], e[p] = 1.0, -1.0
            laplacian += np.outer(e, e) / half
    return np.eye(n) - 0.5 * laplacian, 1


def random_ring_matrix(n: int) -> Tuple[np.ndarray, int]:
    right, left = matching_matrix(n, ring_matching(n, +1)), matching_matrix(n, ring_matching(n, -1))
    return 0.5 * (right + left), 1


def schedule_matrix(n: int, schedule: str) -> Tuple[np.ndarray, int]:
    check_gossip_size(n)
    if schedule == "fixed":
        return fixed_matrix(n)
    if schedule == "random":
        return random_matrix(n)
    if schedule == "random-ring":
        return random_ring_matrix(n)
    raise ValueError(f"unknown schedule {schedule!r}")


def second_eigenvalue(m: np.ndarray) -> float:
    """``|lambda_2|``: the second largest eigenvalue modulus (the largest is 1, the consensus)."""
    moduli = np.sort(np.abs(np.linalg.eigvals(m)))[::-1]
    return float(moduli[1]) if len(moduli) > 1 else 0.0


def spectral_gap(m: np.ndarray) -> float:
    return 1.0 - second_eigenvalue(m)


def rounds_to_shrink(m: np.ndarray, period: int, expected: bool, factor: float = 10.0) -> float:
    """Rounds for the (root-mean-square) distance from consensus to shrink by ``factor``.

    A deterministic period matrix shrinks the distance by ``|lambda_2|`` per period. For an expected
    matrix of random projections, ``lambda_2(E[W^T W]) = lambda_2(E[W])`` bounds the *squared* distance,
    so the distance shrinks by its square root per round.
    """
    lam = second_eigenvalue(m)
    if expected:
        lam = math.sqrt(lam)
    if lam <= 1e-12:
        return float(period)
    return period * math.log(factor) / -math.log(lam)


@dataclass(frozen=True)
class GapRow:
    learners: int
    schedule: str
    gap: float  # of the period matrix (fixed) or the expected one-round matrix (random)
    period: int
    rounds_10x: float


def gap_row(n: int, schedule: str) -> GapRow:
    m, period = schedule_matrix(n, schedule)
    return GapRow(n, schedule, spectral_gap(m), period, rounds_to_shrink(m, period, schedule != "fixed"))


def table_sizes(largest: int) -> List[int]:
    """4, 8, 16, ... up to ``largest``."""
    sizes, n = [], 4
    while n <= largest:
        sizes.append(n)
        n *= 2
    return sizes


def report(n: int, schedule: str, largest: int = 64) -> str:
    """The text printed by ``asrtrain topology``: the asked-for gap, then the table."""
    for what, value in (("--learners", n), ("--max", largest)):
        if value > MAX_LEARNERS:
            raise AsrError(f"{what} {value} is above {MAX_LEARNERS}: the dense {value} x {value} mixing "
                           f"matrices take O(N^4) time and N^2 memory",
                           fix=f"use {what} {MAX_LEARNERS} or less")
    row = gap_row(n, schedule)
    what = ("the product over one period (2 rounds)" if schedule == "fixed"
            else "the expected one-round mixing matrix")
    lines = [f"learners {n}, schedule {schedule}: spectral gap {row.gap:.6f} "
             f"(1 - |lambda_2| of {what}; disagreement shrinks 10x in {row.rounds_10x:.1f} rounds)",
             "",
             f"{'N':>4}  {'fixed gap':>10} {'rounds10x':>9}  {'random gap':>10} {'rounds10x':>9}  "
             f"{'rand-ring gap':>13} {'rounds10x':>9}"]
    for size in table_sizes(max(4, largest)):
        cells = [gap_row(size, s) for s in SCHEDULES]
        lines.append(f"{size:>4}  " + "  ".join(f"{c.gap:>{w}.6f} {c.rounds_10x:>9.1f}"
                                                 for c, w in zip(cells, (10, 10, 13))))
    lines += ["",
              "fixed: gap sin^2(2 pi/N) per period, shrinking as 1/N^2: a ring mixes slowly as it grows.",
              "random: a random passive partner each round keeps the gap at 1/2 whatever N "
              "(beats fixed from N = 16).",
              "random-ring (comparison): a random ring neighbour only, gap sin^2(pi/N): "
              "no better than fixed."]
    return "\n".join(lines)
