"""Detection quality: rates at the p-value threshold, AUROC and TPR at a fixed FPR.

Scores follow the ROC convention: a *higher* score means "more likely positive" (watermarked,
or in WaterDrum's D1 the retain set that still influences the model), so pass z-scores or
``1 - p`` rather than p-values. NaN scores are errors; infinite scores are allowed.

* :func:`detection_rate` / :func:`false_positive_rate` -- share of texts with ``p <= threshold``
  (MarkMyWords IV-B: detection at p = 0.02) with a Wilson interval from :mod:`evalrun.metrics.stats`.
* :func:`auroc` -- P(positive > negative) + P(tie) / 2, the Mann-Whitney U statistic over
  ``n_pos * n_neg``: the area under the empirical ROC curve with ties as diagonal steps, what
  ``sklearn.metrics.roc_auc_score`` computes and what WaterDrum (D1) reports.
* :func:`tpr_at_fpr` -- the largest empirical TPR among thresholds whose empirical FPR stays at
  or under the target, with no split ties (see :func:`fpr_threshold`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from evalrun._util.checks import check_fpr, check_p_threshold, p_value_array, score_array
from evalrun.metrics import stats
from evalrun.metrics.size import DEFAULT_P_THRESHOLD

__all__ = ["auroc", "detection_rate", "false_positive_rate", "fpr_threshold", "tpr_at_fpr"]

# fpr * n_negatives is compared with this slack so that 0.29 * 100 allows 29 false positives
_COUNT_SLACK = 1e-9


def detection_rate(p_values: Sequence[float], threshold: float = DEFAULT_P_THRESHOLD,
                   level: float = stats.DEFAULT_LEVEL) -> stats.Estimate:
    """Share of texts detected (``p <= threshold``) with its Wilson interval; NaNs for none."""
    p = p_value_array(p_values)
    check_p_threshold(threshold)
    return stats.wilson_interval(int(np.count_nonzero(p <= threshold)), int(p.size), level)


def false_positive_rate(p_values: Sequence[float], threshold: float = DEFAULT_P_THRESHOLD,
                        level: float = stats.DEFAULT_LEVEL) -> stats.Estimate:
    """Share of texts *without* the watermark that are detected anyway (pass their p-values
    under the run's key), with its Wilson interval: :func:`detection_rate` on the negatives."""
    return detection_rate(p_values, threshold, level)


def auroc(positive_scores: Sequence[float], negative_scores: Sequence[float]) -> float:
    """Area under the ROC curve, ties counting half: ``U / (n_pos * n_neg)``; NaN when either
    sample is empty. ``auroc(a, b) == 1 - auroc(b, a)``."""
    pos = score_array(positive_scores, "positive_scores")
    neg = score_array(negative_scores, "negative_scores")
    if pos.size == 0 or neg.size == 0:
        return math.nan
    return float(auroc_rows(pos[None, :], neg[None, :])[0])


def tpr_at_fpr(positive_scores: Sequence[float], negative_scores: Sequence[float],
               fpr: float) -> float:
    """Largest empirical TPR whose empirical FPR is ``<= fpr``; NaN when either sample is empty.

    Texts scoring strictly above :func:`fpr_threshold` count as detected. A positive tied with
    that threshold counts as missed: ties are never split, so the achieved FPR never exceeds the
    target (the conservative reading). Equals ``max(tpr[fpr_curve <= fpr])`` over
    ``sklearn.metrics.roc_curve(..., drop_intermediate=False)``.
    """
    pos = score_array(positive_scores, "positive_scores")
    neg = score_array(negative_scores, "negative_scores")
    check_fpr(fpr)
    if pos.size == 0 or neg.size == 0:
        return math.nan
    return float(tpr_at_fpr_rows(pos[None, :], neg[None, :], fpr)[0])


def fpr_threshold(negative_scores: Sequence[float], fpr: float) -> float:
    """The score a text must *exceed* to be detected at empirical FPR ``<= fpr``.

    With ``m = floor(fpr * n_neg)`` negatives allowed above it, it is the ``(m + 1)``-th largest
    negative score, so every negative tied with it stays below; ``-inf`` when all ``n_neg`` may
    pass (``fpr = 1``). The achieved FPR is ``#(negatives > threshold) / n_neg <= fpr``.
    """
    neg = score_array(negative_scores, "negative_scores")
    check_fpr(fpr)
    if neg.size == 0:
        return math.nan
    return float(_cuts(neg[None, :], fpr)[0])


# -- row-wise forms: one row per bootstrap resample (the public functions use them too) --------

def auroc_rows(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """AUROC of each row pair: rank both samples together (average ranks for ties), then
    ``U = sum of positive ranks - n_pos (n_pos + 1) / 2``."""
    from scipy.stats import rankdata  # here, not at the top: importing scipy.stats takes ~1 s

    n_pos, n_neg = pos.shape[1], neg.shape[1]
    ranks = rankdata(np.concatenate([pos, neg], axis=1), axis=1)
    u = ranks[:, :n_pos].sum(axis=1) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def tpr_at_fpr_rows(pos: np.ndarray, neg: np.ndarray, fpr: float) -> np.ndarray:
    """:func:`tpr_at_fpr` of each row pair."""
    cuts = _cuts(neg, fpr)
    return (pos > cuts[:, None]).mean(axis=1)


def _cuts(neg: np.ndarray, fpr: float) -> np.ndarray:
    n = neg.shape[1]
    allowed = math.floor(fpr * n + _COUNT_SLACK)
    if allowed >= n:
        return np.full(neg.shape[0], -math.inf)
    return np.sort(neg, axis=1)[:, n - 1 - allowed]

