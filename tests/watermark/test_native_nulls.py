"""Null calibration of the native schemes' exact nulls (binomial, Erlang) on random text."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

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
