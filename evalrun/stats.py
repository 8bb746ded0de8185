"""Statistics for comparing models honestly: one seeded implementation of each.

* :func:`wilson_interval` -- confidence interval for a rate (label counts).
* :func:`bootstrap_mean_ci` -- percentile bootstrap CI for a mean, resampling *cases* (pass
  per-case values, e.g. the mean over a case's repetitions, so repetitions are never treated as
  independent draws).
* :func:`paired_bootstrap_ci` -- CI for the mean per-case difference between two models on the
  same cases (the bootstrap above applied to the differences).
* :func:`sign_test` -- exact two-sided sign test on the per-case differences.
* :func:`flip_rate` -- how many cases changed label across repetitions.

Everything random takes a ``seed`` and uses its own ``numpy.random.Generator``, so a report
built twice from the same store is byte-for-byte the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

import numpy as np
from scipy import stats as _sps

DEFAULT_LEVEL = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20240603

_CHUNK_CELLS = 2_000_000  # bound memory of the (resamples x cases) index matrix


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a two-sided confidence interval (NaN where undefined)."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class SignTest:
    """Per-case wins/losses/ties of model A over B and the exact two-sided p-value."""

    wins: int
    losses: int
    ties: int
    p_value: float


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level!r}")
    return float(_sps.norm.ppf(0.5 + level / 2.0))


def wilson_interval(successes: int, n: int, level: float = DEFAULT_LEVEL) -> Estimate:
    """Rate ``successes / n`` with its Wilson score interval; NaNs when ``n == 0``."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan)
    z = _z(level)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # float noise must not push a bound past the estimate: 0/n has low 0, n/n has high 1
    low = 0.0 if successes == 0 else min(p, max(0.0, centre - half))
    high = 1.0 if successes == n else max(p, min(1.0, centre + half))
    return Estimate(p, low, high)


def bootstrap_mean_ci(
    values: Sequence[float],
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """Mean of ``values`` (one per case) with a percentile bootstrap CI over cases."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError("values must be one-dimensional (one value per case)")
    _z(level)
    if x.size == 0:
        return Estimate(math.nan, math.nan, math.nan)
    if np.all(x == x[0]):  # one case, or all equal: no sampling variation to show
        v = float(x[0])
        return Estimate(v, v, v)
    mean = float(x.mean())
    rng = np.random.default_rng(seed)
    n = x.size
    per_chunk = max(1, _CHUNK_CELLS // n)
    means = np.empty(n_resamples, dtype=float)
    done = 0
    while done < n_resamples:
        k = min(per_chunk, n_resamples - done)
        idx = rng.integers(0, n, size=(k, n))
        means[done:done + k] = x[idx].mean(axis=1)
        done += k
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return Estimate(mean, float(low), float(high))


def paired_bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Estimate:
    """Mean of ``a[i] - b[i]`` over paired cases with a bootstrap CI resampling the pairs."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError(f"paired samples differ in length: {xa.shape} vs {xb.shape}")
    return bootstrap_mean_ci(xa - xb, level=level, n_resamples=n_resamples, seed=seed)


def sign_test(a: Sequence[float], b: Sequence[float]) -> SignTest:
    """Exact two-sided sign test of ``a`` against ``b`` over paired cases (ties dropped)."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError(f"paired samples differ in length: {xa.shape} vs {xb.shape}")
    d = xa - xb
    wins = int(np.sum(d > 0))
    losses = int(np.sum(d < 0))
    ties = int(d.size - wins - losses)
    if wins + losses == 0:
        return SignTest(wins, losses, ties, 1.0)
    p = float(_sps.binomtest(wins, wins + losses, 0.5, alternative="two-sided").pvalue)
    return SignTest(wins, losses, ties, min(1.0, p))


def flip_rate(labels_by_case: Mapping[Hashable, Sequence[str]]) -> tuple[int, int]:
    """``(flipped, eligible)``: cases with two or more repetitions, and those among them whose
    labels are not all equal."""
    eligible = 0
    flipped = 0
    for labels in labels_by_case.values():
        if len(labels) < 2:
            continue
        eligible += 1
        if len(set(labels)) > 1:
            flipped += 1
    return flipped, eligible
