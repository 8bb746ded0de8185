"""evalrun.metrics.intervals: bootstrap CIs of the aggregates (seeded, same code as the point)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalrun.metrics import (
    auroc,
    auroc_ci,
    calibration_r2,
    calibration_r2_ci,
    quality_retention,
    stats,
    tamper_resistance,
    tamper_resistance_ci,
    tpr_at_fpr,
    tpr_at_fpr_ci,
    watermark_size,
    watermark_size_ci,
)

RNG = np.random.default_rng(7)
SIZES = [int(v) for v in RNG.integers(20, 200, 60)] + [None] * 20  # a quarter undetected
POS = RNG.normal(2.0, 1.0, 80)
NEG = RNG.normal(0.0, 1.0, 120)
X = np.linspace(0.0, 1.0, 11)
Y = 0.9 * X + RNG.normal(0.0, 0.03, 11)


def _brackets(est: stats.Estimate) -> bool:
    return est.low <= est.value <= est.high


def test_each_interval_brackets_its_point_estimate_and_is_seeded() -> None:
    # (aggregate's CI by seed, its point estimate, whether another seed must move the bounds:
    # not for discrete ones -- the median of integer sizes, TPR in steps of 1/80 -- whose
    # percentiles often land on the same values)
    cases = [
        (lambda s: watermark_size_ci(SIZES, seed=s), watermark_size(SIZES), False),
        (lambda s: auroc_ci(POS, NEG, seed=s), auroc(POS, NEG), True),
        (lambda s: tpr_at_fpr_ci(POS, NEG, 0.05, seed=s), tpr_at_fpr(POS, NEG, 0.05), False),
        (lambda s: calibration_r2_ci(X, Y, seed=s), calibration_r2(X, Y), True),
    ]
    for ci, point, moves in cases:
        a, b, c = ci(1), ci(1), ci(2)
        assert a.value == point
        assert _brackets(a) and a.low < a.high
        assert a == b
        assert (a.low, a.high) != (c.low, c.high) or not moves


def test_watermark_size_ci_handles_infinity() -> None:
    assert watermark_size_ci([None, None, None], seed=0) == stats.Estimate(math.inf, math.inf,
                                                                            math.inf)
    # 5 of 11 undetected: the size is finite, but resamples with 6 or more undetected are
    # common, so the upper bound is +inf (never NaN)
    sizes = [10, 12, 14, 16, 18, 20, None, None, None, None, None]
    est = watermark_size_ci(sizes, seed=0)
    assert est.value == 20.0 and math.isfinite(est.low) and est.high == math.inf
    assert math.isnan(watermark_size_ci([], seed=0).value)


def test_auroc_ci_resamples_each_group() -> None:
    # perfectly separated samples stay separated in every resample of each group
    assert auroc_ci([5.0, 6.0, 7.0], [1.0, 2.0], seed=0) == stats.Estimate(1.0, 1.0, 1.0)
    # a CI that pooled the two samples would sometimes draw no positive at all; per-group
    # resampling keeps 3 and 2, so the statistic is always defined
    est = auroc_ci([1.0, 3.0, 5.0], [2.0, 4.0], seed=0, n_resamples=500)
    assert est.value == auroc([1.0, 3.0, 5.0], [2.0, 4.0]) and _brackets(est)
    assert math.isnan(auroc_ci([], [1.0], seed=0).value)


def test_calibration_ci_from_too_few_points_is_undefined() -> None:
    # two points: half the resamples repeat one point (TSS = 0), far past the 5% allowed
    est = calibration_r2_ci([1.0, 2.0], [1.0, 2.5], seed=0)
    assert est.value == calibration_r2([1.0, 2.0], [1.0, 2.5])
    assert math.isnan(est.low) and math.isnan(est.high)


def test_tamper_resistance_ci_point_equals_the_metric_on_means() -> None:
    base = [0.9, 0.8, 0.85, 0.95]
    attacks = {
        "swap": ([0.8, 0.7, 0.75, 0.9], [True, False, True, True]),
        "lowercase": ([0.9, 0.9, 0.8, 0.85], [True, True, True, True]),
        "translate": ([0.6, 0.7, 0.5, 0.65], [False, False, True, False]),
    }
    base_mean = float(np.mean(base))
    points = [(quality_retention(float(np.mean(q)), base_mean), float(np.mean(d)))
              for q, d in attacks.values()]
    est = tamper_resistance_ci(base, attacks, seed=3, n_resamples=400)
    assert est.value == pytest.approx(tamper_resistance(points))
    assert _brackets(est) and est.low < est.high
    assert tamper_resistance_ci(base, attacks, seed=3, n_resamples=400) == est
    assert tamper_resistance_ci(base, {}, seed=0) == stats.Estimate(1.0, 1.0, 1.0)


def test_tamper_resistance_ci_rejects_malformed_attacks() -> None:
    base = [0.9, 0.8]
    with pytest.raises(ValueError, match="'swap'"):
        tamper_resistance_ci(base, {"swap": ([0.5, 0.6], [True])}, seed=0)
    with pytest.raises(ValueError, match="'swap'"):
        tamper_resistance_ci(base, {"swap": ([0.5], [0.3])}, seed=0)
    with pytest.raises(ValueError, match="no texts"):
        tamper_resistance_ci(base, {"swap": ([], [])}, seed=0)
    with pytest.raises(ValueError, match="baseline"):
        tamper_resistance_ci([0.0, 0.0], {"swap": ([0.5], [True])}, seed=0)
