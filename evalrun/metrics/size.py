"""Watermark size: how many tokens a detector needs (MarkMyWords, Piet et al., section IV-B).

The paper defines the size E as "the number of tokens needed to detect the watermark, at a 2%
false positive rate", measured by "finding the shortest prefix detected as marked on each output
(+inf if no prefix is detected) and then computing the median of the lengths".

Two choices the paper leaves open are fixed here:

* Per text, the size is the *length in tokens* of the shortest prefix whose p-value is at most
  the threshold, wherever it lies (:func:`first_detected_prefix`). MarkMyWords' code
  (``VerifierOutput.get_size`` in ``src/watermark_benchmark/utils/classes.py``) differs: it
  gives +inf unless the whole text is detected, then walks back from the end and returns the
  0-based *position* of the last undetected prefix: two tokens fewer than the first prefix of
  the final detected run holds (one fewer when every prefix is detected, as the walk stops at
  position 0 unchecked), and detections that later lapse are ignored.
* The median is the ordinary one, as MarkMyWords' tables report it (its
  ``src/watermark_benchmark/pipeline/summarize.py`` takes ``np.median``; Table V has sizes such
  as 114.5 and 372.5): for an even count the mean of the two middle lengths, +inf when the upper
  one is +inf (more than half, or exactly half, of the texts never detected). Earlier releases
  took the lower median instead.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from evalrun.watermark.verdict import DEFAULT_THRESHOLD as DEFAULT_P_THRESHOLD
from evalrun.watermark.verdict import first_detected_prefix

__all__ = ["DEFAULT_P_THRESHOLD", "first_detected_prefix", "watermark_size"]

def watermark_size(sizes: Iterable[int | float | None]) -> float:
    """Watermark size E: the median of per-text sizes, None (undetected) counting as +inf.

    Returns ``math.inf`` when at least half of the texts are undetected (the upper middle
    value is +inf), NaN for no texts. See the module docstring.
    """
    x = size_array(sizes)
    if x.size == 0:
        return math.nan
    return float(median_rows(x[None, :])[0])


def size_array(sizes: Iterable[int | float | None]) -> np.ndarray:
    """Per-text sizes as floats with None -> +inf; sizes must be >= 1 token (or +inf)."""
    out = []
    for i, s in enumerate(sizes):
        v = math.inf if s is None else float(s)
        if math.isnan(v) or v < 1.0:
            raise ValueError(f"sizes[{i}] = {s!r} is not a prefix length (>= 1 token, or None)")
        out.append(v)
    return np.asarray(out, dtype=float)


def median_rows(samples: np.ndarray) -> np.ndarray:
    """Median of each row of ``samples`` (``k x n``, +inf allowed), as ``np.median``: the middle
    value, or the mean of the two middle values (+inf when the upper one is +inf)."""
    return np.median(samples, axis=1)
