"""Null distributions of the detection scores (MarkMyWords section VII-F, Appendix C).

* Distribution shift, sum score: the green count of n scored tokens is Binomial(n, gamma);
  one-sided p = P[X >= green], and the z-score ``(green - gamma n) / sqrt(n gamma (1-gamma))``.
* Exponential and binary, sum score: each scored unit (token, or bit for binary) contributes an
  i.i.d. Exp(1) variable, so the sum is Erlang(n, 1) = Gamma(n, 1); p = P[Gamma(n) >= score].
* Green-list schemes with a normal approximation (reference kgw, unigram): ``normal_p`` of
  the z-score, ``P[N(0, 1) >= z]``.
* Everything else (inverse transform, align and edit scores): a permutation test that rescores
  the text under independent random keys, see :mod:`evalrun.kernels.permutation`.

All functions are vectorised over prefixes: pass the cumulative statistic and cumulative count
of every prefix and get every prefix's p-value in one call.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from evalrun.kernels.permutation import permutation_p_values

__all__ = ["binomial_p", "z_scores", "normal_p", "erlang_p", "permutation_p_values"]


def binomial_p(green: np.ndarray, n: np.ndarray, gamma: float) -> np.ndarray:
    """``P[Binomial(n, gamma) >= green]``; 1.0 where ``n == 0``.

    ``gamma`` is the probability of one green unit (reference kgw and unigram pass the exact
    green-list fraction ``int(gamma * V) / V``)."""
    green = np.asarray(green, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    p = special.bdtrc(green - 1, n, gamma)  # = scipy.stats.binom.sf, without the overhead
    return np.where(n > 0, np.clip(p, 0.0, 1.0), 1.0)


def z_scores(green: np.ndarray, n: np.ndarray, gamma: float) -> np.ndarray:
    """Kirchenbauer et al.'s z-score; 0.0 where ``n == 0``.

    The operation order is the one of the reference's ``_compute_z_score``
    (``(green - gamma * T) / sqrt(T * gamma * (1 - gamma))``, products left to right), which
    :mod:`evalrun.watermark.schemes.kgw_compat` relies on to reproduce its z-scores bit for bit."""
    green = np.asarray(green, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    denom = np.sqrt(np.maximum(n, 1.0) * gamma * (1.0 - gamma))
    return np.where(n > 0, (green - gamma * n) / denom, 0.0)


def normal_p(z: np.ndarray) -> np.ndarray:
    """``P[N(0, 1) >= z]``: the same values as ``scipy.stats.norm.sf(z)`` (which evaluates
    ``ndtr(-z)``), without the overhead."""
    return special.ndtr(-np.asarray(z, dtype=np.float64))


def erlang_p(total: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``P[Gamma(n, 1) >= total]`` (sum of n i.i.d. Exp(1)); 1.0 where ``n == 0``."""
    total = np.asarray(total, dtype=np.float64)
    n = np.asarray(n, dtype=np.int64)
    p = special.gammaincc(np.maximum(n, 1), np.maximum(total, 0.0))  # = stats.gamma.sf
    return np.where(n > 0, np.clip(p, 0.0, 1.0), 1.0)
