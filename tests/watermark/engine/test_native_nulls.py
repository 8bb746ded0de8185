"""Null calibration of the native schemes' exact nulls (binomial, Erlang) on random text."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evalrun.watermark.engine import nulls
from evalrun.watermark.registry import parse_watermark

N_SEQ = 2000
VOCAB = 1000
ALPHA = 0.02

# Binomial p-values are discrete: with 45 scored tokens at gamma=0.25 the exact size of the
# test at 0.02 is P[p <= 0.02] = 0.0191, close to nominal; lengths give 45 scored tokens.
CASES = [
    ("kgw:gamma=0.25,context=1", 46),
    ("kgw:gamma=0.25,randomness=minhash,context=3", 48),
    ("kgw:gamma=0.25,context=2,skip=0.1", 52),
    ("exp:context=1", 50),
    ("exp:randomness=minhash,context=2,repeats=count", 50),
    ("binary:context=1", 50),
]


def _size(spec: str, length: int, seed: int) -> float:
    scheme = parse_watermark(spec)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, VOCAB, size=(N_SEQ, length))
    pvals = np.array([scheme.detect(row, f"key-{i % 7}", VOCAB).p_value
                      for i, row in enumerate(tokens)])
    assert np.all((pvals > 0) & (pvals <= 1))
    return float(np.mean(pvals <= ALPHA))


@pytest.mark.parametrize("spec,length", CASES)
def test_false_positive_rate_matches_level(spec: str, length: int) -> None:
    lo, hi = stats.binom.interval(0.95, N_SEQ, ALPHA)
    rate = _size(spec, length, seed=len(spec) * 31 + length)
    assert lo / N_SEQ <= rate <= hi / N_SEQ, (spec, rate, lo / N_SEQ, hi / N_SEQ)


def test_prefix_p_values_match_detect_on_prefixes() -> None:
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, VOCAB, size=40).tolist()
    for spec in ("kgw:gamma=0.5", "exp:context=2", "binary", "its:permutations=50"):
        scheme = parse_watermark(spec)
        prefix = scheme.prefix_p_values(tokens, "k", VOCAB)
        assert prefix.shape == (40,)
        for m in (1, 7, 25, 40):
            assert prefix[m - 1] == pytest.approx(scheme.detect(tokens[:m], "k", VOCAB).p_value)


# --- closed forms, computed by hand --------------------------------------------------------
# z = (g - gamma n) / sqrt(n gamma (1 - gamma)) in the reference's operation order (kgw compat
# reproduces its z-scores bit for bit), so the formula written out here gives the same bits.
@pytest.mark.parametrize("green,n,gamma,expected", [
    (60, 100, 0.5, 2.0),  # (60 - 50) / sqrt(25)
    (30, 64, 0.25, 14 / math.sqrt(12)),  # (30 - 16) / sqrt(64 * 3/16)
    (5, 80, 0.25, -15 / math.sqrt(15)),  # fewer green tokens than expected: negative
    (1, 1, 0.5, 1.0),  # (1 - 0.5) / sqrt(0.25)
    (0, 0, 0.25, 0.0),  # nothing scored
])
def test_z_score_is_the_closed_formula(green: int, n: int, gamma: float, expected: float) -> None:
    z = float(nulls.z_scores(np.array([green]), np.array([n]), gamma)[0])
    assert z == pytest.approx(expected, rel=1e-15)
    if n:
        assert z == (green - gamma * n) / math.sqrt(n * gamma * (1 - gamma))


@pytest.mark.parametrize("green,n,gamma,expected", [
    (4, 4, 0.5, 1 / 16),  # all four green
    (2, 3, 0.25, 10 / 64),  # 3 * (1/4)^2 (3/4) + (1/4)^3
    (0, 7, 0.25, 1.0),  # at least zero: certain
    (1, 2, 0.5, 3 / 4),  # 1 - (1/2)^2
    (3, 0, 0.5, 1.0),  # nothing scored
    (12, 20, 0.25, float(stats.binom.sf(11, 20, 0.25))),
])
def test_binomial_p_is_the_upper_tail(green: int, n: int, gamma: float, expected: float) -> None:
    got = float(nulls.binomial_p(np.array([green]), np.array([n]), gamma)[0])
    assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("total,n", [(2.0, 1), (2.0, 3), (0.5, 2), (30.0, 12), (7.25, 20)])
def test_erlang_p_is_the_gamma_upper_tail(total: float, n: int) -> None:
    """``P[Gamma(n, 1) >= x] = exp(-x) sum_{k < n} x^k / k!`` (sum of n Exp(1) units)."""
    by_hand = math.exp(-total) * sum(total**k / math.factorial(k) for k in range(n))
    got = float(nulls.erlang_p(np.array([total]), np.array([n]))[0])
    assert got == pytest.approx(by_hand, rel=1e-12)
    assert got == pytest.approx(float(stats.gamma.sf(total, n)), rel=1e-12)
    assert float(nulls.erlang_p(np.array([total]), np.array([0]))[0]) == 1.0
