"""evalrun.metrics.detection: rates with Wilson intervals, AUROC, TPR at a fixed FPR."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score, roc_curve

from evalrun.metrics import auroc, detection_rate, false_positive_rate, fpr_threshold, stats, tpr_at_fpr


def test_detection_rate_counts_p_at_or_under_threshold() -> None:
    p = [0.01, 0.5, 0.02, 0.03]  # 0.01 and 0.02 are <= 0.02 -> 2 of 4
    assert detection_rate(p) == stats.wilson_interval(2, 4)
    assert detection_rate(p, threshold=0.05) == stats.wilson_interval(3, 4)  # all but 0.5
    assert detection_rate(p, level=0.9) == stats.wilson_interval(2, 4, level=0.9)
    assert false_positive_rate([0.5, 0.9, 0.01]) == stats.wilson_interval(1, 3)
    assert math.isnan(detection_rate([]).value)
    with pytest.raises(ValueError, match=r"p_values\[1\]"):
        detection_rate([0.1, math.nan])
    with pytest.raises(ValueError, match="threshold"):
        false_positive_rate([0.1], threshold=2.0)


def test_auroc_hand_computed() -> None:
    # pairs (pos, neg): (1,0) win, (1,2) loss, (2,0) win, (2,2) tie, (3,0) win, (3,2) win
    # -> (4 + 0.5) / 6 = 0.75
    assert auroc([1, 2, 3], [0, 2]) == 0.75
    assert auroc([0, 2], [1, 2, 3]) == 0.25
    assert auroc([5, 6], [1, 2]) == 1.0
    assert auroc([1, 2], [5, 6]) == 0.0
    assert auroc([3, 3], [3, 3, 3]) == 0.5                 # all tied: every pair counts half
    assert auroc([math.inf, 1.0], [-math.inf, 1.0]) == 0.875  # (1 + 1 + 1 + 0.5) / 4
    assert math.isnan(auroc([], [1.0]))
    with pytest.raises(ValueError, match=r"negative_scores\[0\]"):
        auroc([1.0], [math.nan])


def test_auroc_matches_sklearn_on_random_data() -> None:
    rng = np.random.default_rng(13)
    for _ in range(50):
        n_pos, n_neg = rng.integers(1, 60, size=2)
        pos = rng.integers(0, 12, n_pos) + rng.random() * 3  # integer grid: many ties
        neg = rng.integers(0, 10, n_neg)
        labels = np.r_[np.ones(n_pos), np.zeros(n_neg)]
        expected = roc_auc_score(labels, np.r_[pos, neg])
        assert auroc(pos, neg) == pytest.approx(expected, abs=1e-12)


scores = st.lists(st.integers(-5, 5).map(float) | st.floats(-1e6, 1e6), min_size=1,
                  max_size=30)


@settings(max_examples=300, deadline=None)
@given(scores, scores)
def test_auroc_in_unit_interval_and_antisymmetric(a: list[float], b: list[float]) -> None:
    v = auroc(a, b)
    assert 0.0 <= v <= 1.0
    assert auroc(b, a) == pytest.approx(1.0 - v, abs=1e-12)


POS = [0.9, 0.8, 0.7, 0.6, 0.5]
NEG = [0.85, 0.65, 0.4, 0.3, 0.2]


def test_tpr_at_fpr_hand_computed() -> None:
    # fpr 0.2 of 5 negatives: 1 may pass -> threshold = 2nd largest negative = 0.65;
    # positives above it: 0.9, 0.8, 0.7 -> 3 / 5
    assert fpr_threshold(NEG, 0.2) == 0.65
    assert tpr_at_fpr(POS, NEG, 0.2) == 0.6
    # fpr 0: threshold 0.85 (largest negative) -> only 0.9 -> 1 / 5
    assert tpr_at_fpr(POS, NEG, 0.0) == 0.2
    # fpr 0.39: floor(1.95) = 1 negative -> as for 0.2
    assert tpr_at_fpr(POS, NEG, 0.39) == 0.6
    # fpr 0.4: 2 negatives may pass -> threshold 0.4 -> all 5 positives
    assert tpr_at_fpr(POS, NEG, 0.4) == 1.0
    assert fpr_threshold(NEG, 1.0) == -math.inf and tpr_at_fpr(POS, NEG, 1.0) == 1.0


def test_tpr_at_fpr_never_splits_ties() -> None:
    pos = [0.5, 0.5, 0.9]
    neg = [0.5, 0.1]
    # fpr 0: no negative may pass -> threshold 0.5; the positives tied with it count as missed
    # (a threshold at 0.5 inclusive would detect them but reach FPR 1/2) -> 1 / 3
    assert tpr_at_fpr(pos, neg, 0.0) == pytest.approx(1 / 3)
    # fpr 0.5: one negative may pass -> threshold 0.1 -> all positives
    assert tpr_at_fpr(pos, neg, 0.5) == 1.0
    # three negatives tied at the top: with fpr 0.5 of 4, two may pass, but they come as three
    # -> threshold stays at 0.7 and no positive at 0.7 is counted
    assert tpr_at_fpr([0.7, 0.8], [0.7, 0.7, 0.7, 0.1], 0.5) == 0.5


def test_fpr_counts_do_not_suffer_float_rounding() -> None:
    neg = np.arange(100.0)  # 0.29 * 100 = 28.999999999999996 in floats: still 29 may pass
    assert fpr_threshold(neg, 0.29) == 70.0
    assert np.count_nonzero(neg > fpr_threshold(neg, 0.29)) == 29


def test_tpr_at_fpr_edge_cases() -> None:
    assert math.isnan(tpr_at_fpr([], [1.0], 0.1))
    assert math.isnan(tpr_at_fpr([1.0], [], 0.1))
    assert math.isnan(fpr_threshold([], 0.1))
    with pytest.raises(ValueError, match="false positive rate"):
        tpr_at_fpr([1.0], [0.0], 1.5)
    with pytest.raises(ValueError, match=r"positive_scores\[1\]"):
        tpr_at_fpr([1.0, math.nan], [0.0], 0.1)


def _sklearn_tpr_at_fpr(pos, neg, target: float) -> float:
    labels = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    fpr, tpr, _ = roc_curve(labels, np.r_[pos, neg], drop_intermediate=False)
    return float(tpr[fpr <= target + 1e-12].max())


@settings(max_examples=300, deadline=None)
@given(scores, scores, st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.2, 0.25, 0.5, 0.9, 1.0]))
def test_tpr_at_fpr_matches_sklearn_roc_curve(pos, neg, target) -> None:
    got = tpr_at_fpr(pos, neg, target)
    assert got == pytest.approx(_sklearn_tpr_at_fpr(pos, neg, target), abs=1e-12)
    # and the achieved FPR never exceeds the target
    cut = fpr_threshold(neg, target)
    assert np.count_nonzero(np.asarray(neg) > cut) <= target * len(neg) + 1e-9
