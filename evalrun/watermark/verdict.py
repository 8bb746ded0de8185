"""The one detection decision: DETECTED or NOT_DETECTED from a detector's evidence.

The shared detection grader, ``evalrun tune`` and the benchmark aggregates all decide with
:func:`is_detected`, so a stored grade and a recomputed aggregate can never disagree.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from evalrun._util.checks import check_p_threshold, p_value_array

DETECTED = "DETECTED"
NOT_DETECTED = "NOT_DETECTED"
#: the p-value threshold of MarkMyWords, used when a pack does not set its own
DEFAULT_THRESHOLD = 0.02


def z_tail(z: float) -> float:
    """The one-sided normal tail ``1 - Phi(z)``: the p-value a z-score threshold stands for."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def is_detected(z_score: float | None, p_value: float, *, threshold: float, z_threshold: float | None = None) -> bool:
    """The one detection rule: ``z_score >= z_threshold`` when both exist, else ``p_value <=
    threshold`` (the grader and ``evalrun tune`` both decide with it)."""
    if z_threshold is not None and z_score is not None:
        return math.isfinite(z_score) and z_score >= z_threshold
    return p_value <= threshold


def first_detected_prefix(p_values: Sequence[float],
                          threshold: float = DEFAULT_THRESHOLD) -> int | None:
    """Length in tokens of the shortest prefix with ``p <= threshold``; None if none is.

    ``p_values[i]`` is the p-value of the first ``i + 1`` tokens (as
    ``WatermarkScheme.prefix_p_values`` returns them), so the answer is ``i + 1`` for the first
    such ``i``. NaN or out-of-range p-values are errors, not "undetected".
    """
    check_p_threshold(threshold)
    p = p_value_array(p_values)
    hits = np.flatnonzero(p <= threshold)
    return int(hits[0]) + 1 if hits.size else None
