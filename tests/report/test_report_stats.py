"""evalrun.metrics.stats: known values, invariants and seeding."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun.metrics import stats


def test_wilson_known_values() -> None:
    est = stats.wilson_interval(5, 10)
    assert est.value == 0.5
    assert est.low == pytest.approx(0.236593, abs=1e-5)
    assert est.high == pytest.approx(0.763407, abs=1e-5)
    zero = stats.wilson_interval(0, 10)
    assert (zero.value, zero.low) == (0.0, 0.0)
    assert zero.high == pytest.approx(0.277533, abs=1e-5)
    full = stats.wilson_interval(10, 10)
    assert full.high == 1.0 and full.low == pytest.approx(1 - 0.277533, abs=1e-5)


@pytest.mark.parametrize("level", [0.5, 0.8, 0.9, 0.95, 0.975, 0.99, 0.999, 1e-9, 1 - 1e-12])
def test_normal_quantile_is_scipy_norm_ppf_to_the_bit(level: float) -> None:
    from scipy.stats import norm

    assert stats._z(level) == float(norm.ppf(0.5 + level / 2.0))


def test_wilson_empty_and_invalid() -> None:
    assert all(math.isnan(x) for x in (stats.wilson_interval(0, 0).value,
                                       stats.wilson_interval(0, 0).low))
    with pytest.raises(ValueError):
        stats.wilson_interval(3, 2)
    with pytest.raises(ValueError):
        stats.wilson_interval(1, 2, level=1.5)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_brackets_the_rate(kn: tuple[int, int]) -> None:
    k, n = kn
    est = stats.wilson_interval(k, n)
    assert 0.0 <= est.low <= est.value <= est.high <= 1.0
    wider = stats.wilson_interval(k, n, level=0.99)
    assert wider.low <= est.low and wider.high >= est.high


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    rng = np.random.default_rng(1)
    values = rng.random(100)
    a = stats.bootstrap_mean_ci(values, seed=3)
    b = stats.bootstrap_mean_ci(values, seed=3)
    c = stats.bootstrap_mean_ci(values, seed=4)
    assert a == b
    assert (c.low, c.high) != (a.low, a.high)
    assert a.low < a.value < a.high
    assert a.value == pytest.approx(values.mean())
    # uniform(0, 1) sample of 100: standard error ~0.029, so the 95% interval is ~0.11 wide
    assert 0.08 < a.high - a.low < 0.14


def test_bootstrap_degenerate_cases() -> None:
    assert stats.bootstrap_mean_ci([0.7, 0.7, 0.7]) == stats.Estimate(0.7, 0.7, 0.7)
    assert stats.bootstrap_mean_ci([0.25]) == stats.Estimate(0.25, 0.25, 0.25)
    assert math.isnan(stats.bootstrap_mean_ci([]).value)
    with pytest.raises(ValueError):
        stats.bootstrap_mean_ci([[1.0, 2.0]])


def test_bootstrap_chunking_matches_one_shot(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.linspace(0, 1, 37)
    whole = stats.bootstrap_mean_ci(values, n_resamples=500, seed=9)
    monkeypatch.setattr(stats, "_CHUNK_CELLS", 37 * 7)  # 7 resamples per chunk
    chunked = stats.bootstrap_mean_ci(values, n_resamples=500, seed=9)
    assert chunked.value == whole.value
    assert chunked.low == pytest.approx(whole.low, abs=0.03)
    assert chunked.high == pytest.approx(whole.high, abs=0.03)


def test_paired_bootstrap() -> None:
    a = [1.0, 0.5, 0.0, 1.0]
    assert stats.paired_bootstrap_ci(a, a) == stats.Estimate(0.0, 0.0, 0.0)
    shifted = stats.paired_bootstrap_ci([x + 0.25 for x in a], a)
    assert shifted == pytest.approx(stats.Estimate(0.25, 0.25, 0.25))
    rng = np.random.default_rng(0)
    x = rng.random(60)
    y = x - 0.2 + rng.normal(0, 0.05, 60)
    est = stats.paired_bootstrap_ci(x, y, seed=1)
    assert est.low > 0.15 and est.high < 0.25
    with pytest.raises(ValueError):
        stats.paired_bootstrap_ci([1.0], [1.0, 2.0])


def test_sign_test() -> None:
    res = stats.sign_test([1.0] * 8 + [0.5, 0.5], [0.0] * 8 + [0.5, 0.5])
    assert (res.wins, res.losses, res.ties) == (8, 0, 2)
    assert res.p_value == pytest.approx(2 * 0.5 ** 8)
    assert stats.sign_test([1.0, 0.0], [0.0, 1.0]).p_value == 1.0
    assert stats.sign_test([0.3], [0.3]) == stats.SignTest(0, 0, 1, 1.0)


def test_flip_rate() -> None:
    labels = {"a": ["PASS", "PASS"], "b": ["PASS", "DROPPED", "PASS"], "c": ["PASS"]}
    assert stats.flip_rate(labels) == (1, 2)
    assert stats.flip_rate({"c": ["PASS"]}) == (0, 0)


# -- the generic bootstrap (bootstrap_ci / bootstrap_groups_ci) -----------------------------

def test_bootstrap_ci_mean_is_bootstrap_mean_ci() -> None:
    values = np.random.default_rng(2).random(41)
    vectorized = stats.bootstrap_ci(values, lambda b: b.mean(axis=1), 5, 400, vectorized=True)
    assert vectorized == stats.bootstrap_mean_ci(values, n_resamples=400, seed=5)
    # one call per resample draws the same indices; only summation order may differ
    looped = stats.bootstrap_ci(values, np.mean, 5, 400)
    assert (looped.value, looped.low, looped.high) == pytest.approx(
        (vectorized.value, vectorized.low, vectorized.high), rel=1e-12)


def test_bootstrap_ci_resamples_rows_of_pairs_together() -> None:
    x = np.arange(1.0, 21.0)
    pairs = np.column_stack([x, 3.0 * x])
    seen: list[np.ndarray] = []

    def ratio(sample: np.ndarray) -> float:
        seen.append(sample)
        return float(sample[:, 1].sum() / sample[:, 0].sum())

    est = stats.bootstrap_ci(pairs, ratio, seed=0, n_resamples=50)
    assert est == stats.Estimate(3.0, 3.0, 3.0)  # every resample keeps y = 3x row by row
    assert len(seen) == 51 and all(s.shape == (20, 2) for s in seen)


def test_bootstrap_groups_resample_each_group_within_itself() -> None:
    a = np.array([0.0, 1.0, 2.0])
    b = np.array([10.0, 11.0, 12.0, 13.0, 14.0])

    def check(ra: np.ndarray, rb: np.ndarray) -> float:
        assert ra.shape == (3,) and rb.shape == (5,)
        assert set(ra) <= set(a) and set(rb) <= set(b)
        return float(rb.mean() - ra.mean())

    est = stats.bootstrap_groups_ci([a, b], check, seed=1, n_resamples=200)
    assert est.value == 11.0 and est.low < 11.0 < est.high
    again = stats.bootstrap_groups_ci([a, b], check, seed=1, n_resamples=200)
    assert again == est
    assert stats.bootstrap_groups_ci([a, b], check, seed=2, n_resamples=200) != est


def test_bootstrap_infinite_statistics_keep_their_order() -> None:
    # a statistic that is +inf on some resamples: bounds are +inf or finite, never NaN
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    est = stats.bootstrap_ci(values, lambda s: math.inf if s.max() < 6 else float(s.min()),
                             seed=3, n_resamples=300)
    assert est.value == 1.0 and math.isfinite(est.low) and est.high == math.inf
    assert stats._percentiles(np.array([1.0, math.inf]), [0.5]) == [math.inf]
    assert stats._percentiles(np.array([1.0, 3.0, math.inf]), [0.25, 0.5]) == [2.0, 3.0]
    assert stats._percentiles(np.array([math.inf, math.inf]), [0.3]) == [math.inf]
    assert stats._percentiles(np.array([-math.inf, 0.0]), [0.5]) == [-math.inf]


def test_bootstrap_undefined_cases() -> None:
    assert all(math.isnan(v) for v in vars(stats.bootstrap_ci([], np.mean, seed=0)).values())
    nan_stat = stats.bootstrap_groups_ci([[1.0], []], lambda a, b: 0.0, seed=0)
    assert math.isnan(nan_stat.value)
    # NaN on half the resamples (those without spread) -> undefined bounds
    spread = lambda s: float(s.std()) or math.nan  # noqa: E731
    est = stats.bootstrap_ci([0.0, 1.0], spread, seed=0, n_resamples=100)
    assert est.value == 0.5 and math.isnan(est.low) and math.isnan(est.high)
    # ... on a few (1 in 5**4 for 5 cases): left out, the interval describes the others
    values = [0.0, 1.0, 2.0, 3.0, 4.0]
    est = stats.bootstrap_ci(values, spread, seed=0, n_resamples=2000)
    assert 0.0 < est.low < est.value < est.high
    assert stats.bootstrap_ci([2.0, 2.0], np.median, seed=0) == stats.Estimate(2.0, 2.0, 2.0)
    with pytest.raises(ValueError):
        stats.bootstrap_ci([1.0, 2.0], np.mean, seed=0, n_resamples=0)
    with pytest.raises(ValueError):
        stats.bootstrap_ci([1.0, 2.0], np.mean, seed=0, level=1.0)
    with pytest.raises(ValueError):
        stats.bootstrap_ci(3.0, np.mean, seed=0)
    with pytest.raises(ValueError):
        stats.bootstrap_groups_ci([], np.mean, seed=0)
