"""Statistics for comparing models honestly: one seeded implementation of each.

* :func:`wilson_interval` -- confidence interval for a rate (label counts).
* :func:`bootstrap_ci` / :func:`bootstrap_groups_ci` -- the one percentile bootstrap: any
  statistic of one sample (cases along the first axis, so ``(x, y)`` pairs resample together)
  or of several independent samples, each resampled within itself (e.g. AUROC's positives and
  negatives). Infinite statistics (a watermark size of +inf) keep their order.
* :func:`bootstrap_mean_ci` -- that bootstrap for a mean, resampling *cases* (pass per-case
  values, e.g. the mean over a case's repetitions, so repetitions are never treated as
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
from typing import Any, Callable, Mapping, Sequence

import numpy as np

DEFAULT_LEVEL = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20240603

_CHUNK_CELLS = 2_000_000  # bound memory of the (resamples x cases) index matrix
_MAX_UNDEFINED_SHARE = 0.05  # bootstrap: past this share of NaN resamples the bounds are NaN


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


#: the normal quantile of the default level, norm.ppf(0.975) to the bit (tested): a run's
#: summary needs only this one, and importing scipy for it took ~0.3 s of every run
Z_DEFAULT_LEVEL = 1.959963984540054


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level!r}")
    if level == DEFAULT_LEVEL:
        return Z_DEFAULT_LEVEL
    # ndtri is what scipy.stats.norm.ppf computes (same bits), without importing
    # scipy.stats (~1 s)
    from scipy.special import ndtri

    return float(ndtri(0.5 + level / 2.0))


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


def bootstrap_ci(
    values: Any,
    statistic: Callable[..., Any],
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    *,
    vectorized: bool = False,
) -> Estimate:
    """``statistic(values)`` with a percentile bootstrap CI resampling the cases of ``values``.

    Cases lie along the first axis, so rows of a 2-D array (paired observations) are drawn
    together. ``statistic`` maps a sample shaped like ``values`` to a float; with
    ``vectorized=True`` it maps a stack of samples ``(k, n, ...)`` to ``k`` floats in one call
    (much faster for simple statistics). See :func:`bootstrap_groups_ci` for the conventions.
    """
    return bootstrap_groups_ci([values], statistic, seed, n_resamples, level,
                               vectorized=vectorized)


def bootstrap_groups_ci(
    groups: Sequence[Any],
    statistic: Callable[..., Any],
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    *,
    vectorized: bool = False,
) -> Estimate:
    """``statistic(*groups)`` with a percentile bootstrap CI that resamples every group within
    itself (a stratified bootstrap: group sizes stay fixed, e.g. positives and negatives).

    * Seeded by ``seed`` alone (its own generator), so the same inputs give the same bits.
    * An empty group makes the statistic undefined: all NaN. When every group is constant every
      resample equals the data, so the interval is the point (no draws are made).
    * A NaN statistic on the data gives all NaN. Resamples on which it is NaN (e.g. an R^2
      of a resample that repeats one point) are left out, so the interval is conditional on
      the statistic being defined; when more than 5% of resamples are undefined the
      interval would describe too few of them and the bounds are NaN.
    * Percentiles are numpy's linear ones; an infinite neighbour wins over a finite one
      (between a finite size and +inf lies +inf, never NaN).
    """
    arrays = [np.asarray(g, dtype=float) for g in groups]
    if not arrays:
        raise ValueError("need at least one group to resample")
    if any(a.ndim == 0 for a in arrays):
        raise ValueError("each group must be a sequence of cases, not a scalar")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    _z(level)
    if any(a.shape[0] == 0 for a in arrays):
        return Estimate(math.nan, math.nan, math.nan)

    def evaluate(samples: list[np.ndarray]) -> np.ndarray:
        if vectorized:
            return np.asarray(statistic(*samples), dtype=float).reshape(samples[0].shape[0])
        k = samples[0].shape[0]
        return np.fromiter((statistic(*(s[r] for s in samples)) for r in range(k)),
                           dtype=float, count=k)

    value = float(evaluate([a[None, ...] for a in arrays])[0])
    if math.isnan(value):
        return Estimate(math.nan, math.nan, math.nan)
    if all(bool(np.all(a == a[0])) for a in arrays):
        return Estimate(value, value, value)

    rng = np.random.default_rng(seed)
    sizes = [a.shape[0] for a in arrays]
    per_chunk = max(1, _CHUNK_CELLS // sum(sizes))
    draws = np.empty(n_resamples, dtype=float)
    done = 0
    while done < n_resamples:
        k = min(per_chunk, n_resamples - done)
        samples = [a[rng.integers(0, n, size=(k, n))] for a, n in zip(arrays, sizes)]
        draws[done:done + k] = evaluate(samples)
        done += k
    defined = ~np.isnan(draws)
    if np.count_nonzero(~defined) > _MAX_UNDEFINED_SHARE * n_resamples:
        return Estimate(value, math.nan, math.nan)
    draws = draws[defined]
    alpha = (1.0 - level) / 2.0
    low, high = _percentiles(draws, (alpha, 1.0 - alpha))
    return Estimate(value, low, high)


def _percentiles(draws: np.ndarray, qs: Sequence[float]) -> list[float]:
    """numpy's linear percentiles, except that interpolating towards an infinity gives it."""
    if np.isfinite(draws).all():
        return [float(v) for v in np.quantile(draws, list(qs))]
    s = np.sort(draws)
    out = []
    for q in qs:
        h = (s.size - 1) * q
        lo = int(math.floor(h))
        a = float(s[lo])
        if h == lo or a == float(s[lo + 1]):
            out.append(a)
            continue
        b = float(s[lo + 1])
        if math.isinf(a):  # a < b, so a is -inf
            out.append(a)
        elif math.isinf(b):  # b is +inf
            out.append(b)
        else:
            out.append(float(np.quantile(s, q)))  # uses only the finite neighbours a and b
    return out


def _mean_rows(samples: np.ndarray) -> np.ndarray:
    return samples.mean(axis=1)


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
    if x.size and np.all(x == x[0]):  # one case, or all equal: the value itself, not a sum's
        v = float(x[0])                 # rounding of it
        return Estimate(v, v, v)
    return bootstrap_ci(x, _mean_rows, seed, n_resamples, level, vectorized=True)


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
    from scipy.stats import binomtest  # here, not at the top: importing scipy.stats takes ~1 s

    p = float(binomtest(wins, wins + losses, 0.5, alternative="two-sided").pvalue)
    return SignTest(wins, losses, ties, min(1.0, p))


def flip_rate(labels_by_case: Mapping[Any, Sequence[str]]) -> tuple[int, int]:
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
