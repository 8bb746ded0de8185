"""evalrun.metrics.calibration: R^2 of the least-squares line through the origin (WaterDrum D2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import r2_score

from evalrun.metrics import ProportionalFit, calibration_r2, proportional_fit


def test_hand_computed_fit() -> None:
    # x = 1, 2, 3; y = 1, 3, 2
    # b = sum(xy) / sum(x^2) = (1 + 6 + 6) / (1 + 4 + 9) = 13 / 14
    # residuals y - b x = 1 - 13/14, 3 - 26/14, 2 - 39/14 = 1/14, 16/14, -11/14
    # RSS = (1 + 256 + 121) / 196 = 27 / 14; mean(y) = 2, TSS = 1 + 1 + 0 = 2
    # R^2 = 1 - (27/14) / 2 = 1/28
    fit = proportional_fit([1, 2, 3], [1, 3, 2])
    assert fit.slope == pytest.approx(13 / 14)
    assert fit.r2 == pytest.approx(1 / 28)
    assert calibration_r2([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 28)


def test_centred_tss_lets_r2_go_negative() -> None:
    # x = 1, 2; y = 2, 1: b = (2 + 2) / (1 + 4) = 0.8; residuals 1.2, -0.6, RSS = 1.8;
    # mean(y) = 1.5, TSS = 0.25 + 0.25 = 0.5 -> R^2 = 1 - 3.6 = -2.6 (the uncentred TSS
    # sum(y^2) = 5 would give 0.64): a flat metric is not calibrated, as the seed says
    assert calibration_r2([1, 2], [2, 1]) == pytest.approx(-2.6)


def test_exactly_proportional_data() -> None:
    x = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]  # WaterDrum's 11 proportions
    fit = proportional_fit(x, [0.93 * v for v in x])
    assert fit.slope == pytest.approx(0.93) and fit.r2 == pytest.approx(1.0)


def test_undefined_and_invalid() -> None:
    assert math.isnan(calibration_r2([2.0], [1.0]))            # one point: TSS = 0
    assert math.isnan(calibration_r2([1.0, 2.0], [3.0, 3.0]))  # flat y: TSS = 0
    both_nan = proportional_fit([0.0, 0.0], [1.0, 2.0])        # every x = 0: no slope
    assert math.isnan(both_nan.slope) and math.isnan(both_nan.r2)
    empty = proportional_fit([], [])
    assert math.isnan(empty.slope) and math.isnan(empty.r2)
    assert isinstance(empty, ProportionalFit)
    with pytest.raises(ValueError, match="differ in length"):
        calibration_r2([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match=r"y\[1\]"):
        calibration_r2([1.0, 2.0], [1.0, math.inf])
    with pytest.raises(ValueError, match="one-dimensional"):
        calibration_r2([[1.0]], [[1.0]])


values = st.floats(-100, 100, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(values, values), min_size=2, max_size=30))
def test_matches_sklearn_r2_of_the_fitted_line(pairs) -> None:
    x = np.array([p[0] for p in pairs])
    y = np.array([p[1] for p in pairs])
    assume(np.sum(x * x) > 1e-6 and np.ptp(y) > 1e-3)
    fit = proportional_fit(x, y)
    assert fit.slope == pytest.approx(np.sum(x * y) / np.sum(x * x))
    assert fit.r2 == pytest.approx(r2_score(y, fit.slope * x), rel=1e-9, abs=1e-9)
    assert fit.r2 <= 1.0 + 1e-12


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=30),
       st.floats(0.01, 100) | st.floats(-100, -0.01))
def test_r2_is_one_for_exactly_proportional_data(x, slope) -> None:
    assume(np.ptp(x) > 1e-3)
    y = [slope * v for v in x]
    assert calibration_r2(x, y) == pytest.approx(1.0, abs=1e-9)
