"""Quality degradation of a watermark (MarkMyWords, Piet et al., sections IV-A, IV-D
and V-A).

MarkMyWords compares the mean quality Q of watermarked texts with that of unwatermarked texts of
the same model ("a target quality degradation of <= 1%"); it says the absolute value of Q is
not meaningful, only the comparison. The degradation is the *relative* loss
``1 - Q_watermarked / Q_unwatermarked``, the reading of MarkMyWords' ``find_threshold``
(``src/watermark_benchmark/utils/summarize.py``: eligible when ``Q >= Q_baseline * (1 - t)``).
Unlike :func:`~evalrun.metrics.quality_retention` it is not clipped: a watermark whose texts
happen to score higher than the baseline shows a negative degradation, which a reader should
see (rating noise, or a proxy that prefers the watermark's word choices).
"""

from __future__ import annotations

import math

__all__ = ["quality_degradation", "quality_ratio"]


def quality_ratio(mean: float, baseline_mean: float, what: str) -> float:
    """``mean / baseline_mean``, the measure both quality degradation and quality retention
    are made of; ValueError naming ``what`` (whose mean quality) when ``mean`` is not finite,
    or the baseline not finite and > 0."""
    m = float(mean)
    b = float(baseline_mean)
    if not math.isfinite(m):
        raise ValueError(f"{what} mean quality must be finite, got {mean!r}")
    if not (math.isfinite(b) and b > 0.0):
        raise ValueError(f"baseline mean quality must be finite and > 0, got {baseline_mean!r}")
    return m / b


def quality_degradation(watermarked_mean: float, baseline_mean: float) -> float:
    """``1 - watermarked_mean / baseline_mean``: 0.01 means 1% of the unwatermarked quality
    lost; negative when the watermarked texts score higher. The baseline must be > 0."""
    return 1.0 - quality_ratio(watermarked_mean, baseline_mean, "watermarked")
