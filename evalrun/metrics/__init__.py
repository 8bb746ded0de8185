"""Aggregate metrics over many stored results: pure functions, no I/O, no global randomness.

The report renders them and users call them from notebooks. Where each definition comes from:

* watermark size (MarkMyWords, Piet et al., IV-B): :func:`first_detected_prefix`,
  :func:`watermark_size` -- :mod:`evalrun.metrics.size`;
* tamper resistance (MarkMyWords IV-C, Fig. 3): :func:`quality_retention`, :func:`lower_hull`,
  :func:`tamper_resistance`, :func:`best_attack` -- :mod:`evalrun.metrics.tamper`;
* quality degradation of a watermark (MarkMyWords IV-D): :func:`quality_degradation` --
  :mod:`evalrun.metrics.quality`;
* detection (MarkMyWords; WaterDrum D1): :func:`detection_rate`,
  :func:`false_positive_rate`, :func:`auroc`, :func:`tpr_at_fpr`, :func:`fpr_threshold` --
  :mod:`evalrun.metrics.detection`;
* calibration (WaterDrum D2): :func:`calibration_r2`, :func:`proportional_fit` --
  :mod:`evalrun.metrics.calibration`;
* bootstrap CIs of the aggregates (explicit seed): :mod:`evalrun.metrics.intervals`; rates get
  Wilson intervals from :mod:`evalrun.metrics.stats`.

Conventions: an aggregate over an empty sample is NaN (as in :mod:`evalrun.metrics.stats`); invalid
inputs (NaN, out of range) raise ``ValueError`` naming the entry.
"""

from __future__ import annotations

# importing the package registers the watermark benchmark's aggregates (MarkMyWords)
from evalrun.metrics import benchmark as _benchmark  # noqa: F401, E402
from evalrun.metrics.calibration import ProportionalFit, calibration_r2, proportional_fit
from evalrun.metrics.detection import auroc, detection_rate, false_positive_rate, fpr_threshold, tpr_at_fpr
from evalrun.metrics.intervals import (
                                       auroc_ci,
                                       calibration_r2_ci,
                                       tamper_resistance_ci,
                                       tpr_at_fpr_ci,
                                       watermark_size_ci,
)
from evalrun.metrics.quality import quality_degradation
from evalrun.metrics.size import DEFAULT_P_THRESHOLD, first_detected_prefix, watermark_size
from evalrun.metrics.tamper import AttackPoint, best_attack, lower_hull, quality_retention, tamper_resistance

__all__ = [
    "DEFAULT_P_THRESHOLD",
    "AttackPoint",
    "ProportionalFit",
    "auroc",
    "auroc_ci",
    "best_attack",
    "calibration_r2",
    "calibration_r2_ci",
    "detection_rate",
    "false_positive_rate",
    "first_detected_prefix",
    "fpr_threshold",
    "lower_hull",
    "proportional_fit",
    "quality_degradation",
    "quality_retention",
    "tamper_resistance",
    "tamper_resistance_ci",
    "tpr_at_fpr",
    "tpr_at_fpr_ci",
    "watermark_size",
    "watermark_size_ci",
]
