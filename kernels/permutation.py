"""Empirical p-values of permutation (key-resampling) tests.

With ``N`` null statistics drawn by rescoring the text under independent random keys, the
p-value of an observed statistic ``t`` (larger = more watermark-like) is
``(1 + #{null >= t}) / (1 + N)`` (Kuditipudi et al.; Phipson & Smyth 2010): valid at every
level, with resolution ``1 / (N + 1)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evalrun.kernels.backend import Ops


def count_at_least(ops: Ops, observed: Any, null: Any) -> Any:
    """``#{null[p, ...] >= observed[...]}`` over the leading axis of ``null``."""
    return ops.count_true(null >= observed, axis=0)


def permutation_p_values(counts: np.ndarray, num_null: int) -> np.ndarray:
    """p-values from exceedance counts over ``num_null`` null draws."""
    return (1.0 + np.asarray(counts, dtype=np.float64)) / (1.0 + num_null)
