"""Calibration: is an aggregate metric proportional to what it measures (WaterDrum,
desideratum D2)?

WaterDrum fits the best line *through the origin* to (share of the forget set still trained
on, aggregate metric) and reports its R^2: a calibrated metric is 0 at 0 and grows in
proportion. The paper notes that "a large negative value occurs when the metric produces similar
(instead of proportional) values", which only the *centred* total sum of squares allows, and
WaterDrum's code (``compute_fixed_point_r2`` in ``plots/eval_calibration.ipynb``) computes
``1 - RSS / sum((y - mean(y))^2)``. So here, for the least-squares line ``y = b x``:

    b = sum(x y) / sum(x^2),  RSS = sum((y - b x)^2),  TSS = sum((y - mean(y))^2),
    R^2 = 1 - RSS / TSS        (in (-inf, 1]; not the uncentred R^2 in [0, 1] that some
                                regression software reports for a model without intercept)

This is ``sklearn.metrics.r2_score(y, b * x)``. (WaterDrum's notebook fits through (100, 0)
with x in percent unlearned, i.e. through the origin in percent retained: the same fit.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from evalrun._util.checks import pairs_array

__all__ = ["ProportionalFit", "calibration_r2", "proportional_fit"]


@dataclass(frozen=True)
class ProportionalFit:
    """The least-squares line through the origin ``y = slope * x`` and its (centred) R^2."""

    slope: float
    r2: float


def proportional_fit(x: Sequence[float], y: Sequence[float]) -> ProportionalFit:
    """Fit ``y = slope * x`` by least squares; R^2 as in the module docstring.

    Undefined parts are NaN: both for no points or when every x is 0, R^2 when every y is
    equal (TSS = 0, e.g. a single point)."""
    pairs = pairs_array(x, y)
    if pairs.shape[0] == 0:
        return ProportionalFit(math.nan, math.nan)
    slope, r2 = fit_rows(pairs[None, ...])
    return ProportionalFit(float(slope[0]), float(r2[0]))


def calibration_r2(x: Sequence[float], y: Sequence[float]) -> float:
    """R^2 of the least-squares line through the origin, ``1 - RSS / TSS`` with the centred
    TSS (WaterDrum D2); 1 for exactly proportional data, negative when a flat line would fit
    better. NaN when undefined (see :func:`proportional_fit`)."""
    return proportional_fit(x, y).r2


def fit_rows(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(slope, r2)`` for each row of ``pairs`` (``k x n x 2``: x then y); one row per
    bootstrap resample."""
    x = pairs[..., 0]
    y = pairs[..., 1]
    sxx = np.einsum("kn,kn->k", x, x)
    sxy = np.einsum("kn,kn->k", x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(sxx > 0.0, sxy / np.where(sxx > 0.0, sxx, 1.0), math.nan)
        rss = ((y - slope[:, None] * x) ** 2).sum(axis=1)
        tss = ((y - y.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        r2 = np.where(tss > 0.0, 1.0 - rss / np.where(tss > 0.0, tss, 1.0), math.nan)
    return slope, np.where(np.isnan(slope), math.nan, r2)

