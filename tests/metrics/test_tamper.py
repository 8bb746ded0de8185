"""evalrun.metrics.tamper: quality retention, the lower hull, R and the best attack."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import ConvexHull

from evalrun.metrics import AttackPoint, best_attack, lower_hull, quality_retention, tamper_resistance

# four attacks as (quality retention, detection rate)
POINTS = [(0.5, 0.25), (0.8, 0.9), (0.3, 0.6), (0.9, 0.3)]


def test_quality_retention_is_a_clipped_ratio() -> None:
    assert quality_retention(0.45, 0.9) == pytest.approx(0.5)
    assert quality_retention(0.95, 0.9) == 1.0   # above the baseline by rating noise
    assert quality_retention(-0.1, 0.9) == 0.0
    for attacked, baseline in ((0.5, 0.0), (0.5, -1.0), (math.nan, 0.9), (0.5, math.inf)):
        with pytest.raises(ValueError):
            quality_retention(attacked, baseline)


def test_hand_computed_hull_and_resistance() -> None:
    # With (0, 0) and (1, 1) added, slopes from (0, 0): (0.9, 0.3) -> 1/3, (0.5, 0.25) -> 1/2,
    # (0.8, 0.9) -> 9/8, (0.3, 0.6) -> 2. The hull goes (0, 0) -> (0.9, 0.3) -> (1, 1)
    # ((0.5, 0.25) lies above that first edge: 0.25 > 0.5 / 3).
    assert lower_hull(POINTS) == [(0.0, 0.0), (0.9, 0.3), (1.0, 1.0)]
    # area = 0.9 * 0.3 / 2 + 0.1 * (0.3 + 1) / 2 = 0.135 + 0.065 = 0.2 -> R = 0.4
    assert tamper_resistance(POINTS) == pytest.approx(0.4)


def test_reproduces_markmywords_method_by_hand() -> None:
    # MarkMyWords (utils/summarize.py, convex_hull + summarize_robustness, detection rate 1
    # without attack) adds (0, 0), (0, 1) and (1, 1), takes the full convex hull and reports
    # 1 - its area. For POINTS the hull is (0, 0), (0.9, 0.3), (1, 1), (0, 1); shoelace:
    #   0*0.3 - 0.9*0 = 0;  0.9*1 - 1*0.3 = 0.6;  1*1 - 0*1 = 1;  0*0 - 0*1 = 0  -> area 1.6 / 2
    # = 0.8, so their "area" is 1 - 0.8 = 0.2 and the seed's R = 2 * 0.2 = 0.4.
    assert tamper_resistance(POINTS) == pytest.approx(2 * (1 - 0.8))


def test_corner_cases() -> None:
    assert tamper_resistance([]) == 1.0                       # no attack: the diagonal
    assert lower_hull([]) == [(0.0, 0.0), (1.0, 1.0)]
    assert tamper_resistance([(1.0, 0.0)]) == 0.0             # full quality, no mark left
    assert tamper_resistance([(0.0, 0.0), (1.0, 1.0)]) == 1.0
    # on the diagonal: not a vertex, R unchanged
    assert lower_hull([(0.5, 0.5)]) == [(0.0, 0.0), (1.0, 1.0)]
    # above the diagonal: never on the lower hull
    assert tamper_resistance([(0.2, 0.9), (0.6, 1.0)]) == 1.0
    # (1, 0.5): hull (0, 0) -> (1, 0.5) -> (1, 1); area 1 * 0.5 / 2 = 0.25 -> R = 0.5
    assert lower_hull([(1.0, 0.5)]) == [(0.0, 0.0), (1.0, 0.5), (1.0, 1.0)]
    assert tamper_resistance([(1.0, 0.5)]) == pytest.approx(0.5)
    # a mapping of attack names works like a sequence of points
    assert tamper_resistance(dict(zip("abcd", POINTS))) == tamper_resistance(POINTS)


def test_invalid_points_are_named() -> None:
    with pytest.raises(ValueError, match=r"point 1 .*detection rate nan"):
        tamper_resistance([(0.5, 0.5), (0.5, math.nan)])
    with pytest.raises(ValueError, match=r"attack 'swap' .*quality retention 1.2"):
        tamper_resistance({"typo": (0.9, 0.5), "swap": (1.2, 0.5)})
    with pytest.raises(ValueError, match=r"point 0 .*not a \(quality_retention"):
        lower_hull([(0.5, 0.5, 0.5)])
    with pytest.raises(ValueError, match="point 0"):
        lower_hull([(-0.01, 0.5)])


def test_best_attack_keeps_80_percent_quality() -> None:
    attacks = {"swap": (0.9, 0.3), "translate": (0.7, 0.0), "typo": (0.95, 0.3),
               "lowercase": (0.8, 0.6)}
    # eligible (quality >= 0.8, inclusive): swap, typo, lowercase; lowest detection 0.3 is a
    # tie between swap and typo -> the higher quality, typo
    assert best_attack(attacks) == AttackPoint("typo", 0.95, 0.3)
    assert best_attack(attacks, min_quality=0.7) == AttackPoint("translate", 0.7, 0.0)
    assert best_attack(attacks, min_quality=0.99) is None
    assert best_attack({}) is None
    assert best_attack({"b": (0.9, 0.3), "a": (0.9, 0.3)}).name == "a"  # full tie: by name
    assert best_attack([(0.9, 0.5), (0.85, 0.2)]) == AttackPoint("1", 0.85, 0.2)
    with pytest.raises(ValueError):
        best_attack(attacks, min_quality=1.5)
    with pytest.raises(ValueError, match="attack 'x'"):
        best_attack({"x": (math.nan, 0.1)})


unit = st.floats(0.0, 1.0, allow_nan=False)
points_st = st.lists(st.tuples(unit, unit), max_size=12)


def _markmywords_r(points: list[tuple[float, float]]) -> float:
    """MarkMyWords' construction with scipy's hull: 2 * (1 - area of hull with (0, 1))."""
    hull = ConvexHull(list(points) + [(0.0, 0.0), (0.0, 1.0), (1.0, 1.0)])
    return 2.0 * (1.0 - hull.volume)


@settings(max_examples=300, deadline=None)
@given(points_st)
def test_resistance_in_unit_interval_and_matches_scipy_hull(points) -> None:
    r = tamper_resistance(points)
    assert 0.0 <= r <= 1.0
    assert r == pytest.approx(_markmywords_r(points), abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(points_st.filter(bool), st.data())
def test_lowering_a_point_never_raises_resistance(points, data) -> None:
    i = data.draw(st.integers(0, len(points) - 1))
    q, d = points[i]
    lower = data.draw(st.floats(0.0, d))
    lowered = list(points)
    lowered[i] = (q, lower)
    assert tamper_resistance(lowered) <= tamper_resistance(points) + 1e-12


@settings(max_examples=200, deadline=None)
@given(points_st, st.tuples(unit, unit))
def test_adding_an_attack_never_raises_resistance(points, extra) -> None:
    assert tamper_resistance(points + [extra]) <= tamper_resistance(points) + 1e-12


@settings(max_examples=200, deadline=None)
@given(points_st)
def test_hull_is_convex_from_corner_to_corner_and_below_every_point(points) -> None:
    hull = lower_hull(points)
    assert hull[0] == (0.0, 0.0) and hull[-1] == (1.0, 1.0)
    xs = [x for x, _ in hull]
    assert xs == sorted(xs)
    for (x0, y0), (x1, y1), (x2, y2) in zip(hull, hull[1:], hull[2:]):
        assert (x1 - x0) * (y2 - y0) - (y1 - y0) * (x2 - x0) > 0  # strict left turn
    for q, d in points:
        for (x0, y0), (x1, y1) in zip(hull, hull[1:]):
            if x0 < x1 and x0 <= q <= x1:
                assert d >= y0 + (y1 - y0) * (q - x0) / (x1 - x0) - 1e-9
