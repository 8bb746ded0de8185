"""Repeat handling of the green-list detectors that score on numpy arrays (unigram,
reference-compatible kgw): which scored units count, and their running totals.

``repeats=ignore`` scores only the first occurrence of each unit (a token for unigram, a
(context, token) n-gram for reference kgw); ``repeats=count`` scores every unit. The native
engine applies the same rule inside its kernels (``Sampler.sum_terms`` masks with
:func:`evalrun.kernels.token_stats.first_occurrence`); :func:`first_occurrences` reuses that kernel.
"""

from __future__ import annotations

import numpy as np

from evalrun.kernels.backend import NUMPY
from evalrun.kernels.token_stats import first_occurrence


def first_occurrences(ids: np.ndarray) -> np.ndarray:
    """True at the first occurrence of each value of the 1-D integer array ``ids``."""
    arr = np.asarray(ids, dtype=np.int64)
    if arr.size == 0:
        return np.zeros(0, dtype=bool)
    # the kernel orders 64-bit words; the int64 -> uint64 cast is a bijection
    return np.asarray(first_occurrence(NUMPY, arr.astype(np.uint64)), dtype=bool)


def cumulative_counts(green: np.ndarray, first: np.ndarray | None, *,
                      count_repeats: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(scored, green)`` counts after each unit (int64 arrays, one entry per unit).

    ``green[i]`` says whether unit i is green, ``first[i]`` whether it is the first occurrence
    of its value; ``first`` is needed only when repeats are ignored (``count_repeats=False``).
    """
    green = np.asarray(green, dtype=bool)
    if count_repeats:
        return np.arange(1, len(green) + 1, dtype=np.int64), np.cumsum(green, dtype=np.int64)
    if first is None:
        raise ValueError("first-occurrence flags are needed when repeats are ignored")
    first = np.asarray(first, dtype=bool)
    return np.cumsum(first, dtype=np.int64), np.cumsum(green & first, dtype=np.int64)
