"""evalrun.metrics.size: per-text size (shortest detected prefix) under the size rules, and the
median over texts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun.metrics import first_detected_prefix, watermark_size
from evalrun.watermark.verdict import SIZE_RULES, alpha_spending, sizes_by_rule


def first_crossing_prefix(p_values: object, threshold: float = 0.02) -> int | None:
    """MarkMyWords' rule: every prefix at the threshold."""
    return first_detected_prefix(p_values, threshold, rule="first_crossing")  # type: ignore[arg-type]


def test_first_detected_prefix_is_a_length_in_tokens() -> None:
    # p_values[i] scores the first i + 1 tokens: p[2] = 0.02 <= 0.02 -> 3 tokens
    assert first_crossing_prefix([0.5, 0.03, 0.02, 0.9]) == 3
    assert first_crossing_prefix([0.001]) == 1
    assert first_crossing_prefix(np.array([0.4, 0.3, 0.2])) is None
    assert first_crossing_prefix([]) is None
    assert first_crossing_prefix([0.5, 0.04, 0.01], threshold=0.05) == 2


def test_first_detected_prefix_counts_a_detection_that_later_lapses() -> None:
    # the seed: "the shortest prefix detected as marked"; the text need not stay detected
    assert first_crossing_prefix([0.5, 0.01, 0.3, 0.6]) == 2


def test_differs_from_markmywords_get_size() -> None:
    # p at positions 0..5; positions 4 and 5 detected (p <= 0.02).
    # MarkMyWords' VerifierOutput.get_size: the whole text (position 5) is detected, so it
    # walks back from position 4: p[4] = 0.01 <= 0.02 -> position 3: p[3] = 0.4 > 0.02 -> stop,
    # returns 3. The shortest detected prefix is positions 0..4 = 5 tokens.
    p = [0.9, 0.7, 0.5, 0.4, 0.01, 0.005]
    assert first_crossing_prefix(p) == 5


@pytest.mark.parametrize("bad", [[0.5, math.nan], [0.5, 1.5], [-0.1]])
def test_first_detected_prefix_rejects_non_p_values(bad: list[float]) -> None:
    with pytest.raises(ValueError, match=rf"p_values\[{len(bad) - 1}\]"):
        first_crossing_prefix(bad)


def test_first_detected_prefix_rejects_bad_threshold_and_shape() -> None:
    with pytest.raises(ValueError, match="threshold"):
        first_crossing_prefix([0.1], threshold=0.0)
    with pytest.raises(ValueError, match="one-dimensional"):
        first_crossing_prefix([[0.1, 0.2]])


def test_alpha_spending_thresholds_by_hand() -> None:
    # n = 4: H_4 = 1 + 1/2 + 1/3 + 1/4 = 25/12; prefix t gets 0.02 / (t * 25/12) = 0.0096 / t
    assert alpha_spending(4, 0.02) == pytest.approx([0.0096, 0.0048, 0.0032, 0.0024], rel=1e-15)
    for n in (1, 7, 200, 5000):  # the budget is spent exactly (to rounding), never more
        assert alpha_spending(n, 0.02).sum() == pytest.approx(0.02, rel=1e-12)
    # 0.005 <= 0.0096 at t = 1 is detected; 0.004 > 0.0032 at t = 3 is not, 0.002 <= 0.0024 is
    assert first_detected_prefix([0.005, 0.9, 0.9, 0.9]) == 1
    assert first_detected_prefix([0.9, 0.9, 0.004, 0.002]) == 4
    assert first_crossing_prefix([0.9, 0.9, 0.004, 0.002]) == 3


def test_every_rule_is_stored_and_the_default_is_alpha_spending() -> None:
    p = [0.5, 0.01, 0.003, 0.0001]  # H_4 = 25/12: thresholds 0.0096, 0.0048, 0.0032, 0.0024
    assert sizes_by_rule(p) == {"alpha_spending": 3, "first_crossing": 2}
    assert set(SIZE_RULES.names()) >= {"alpha_spending", "first_crossing"}
    with pytest.raises(Exception, match="size_rule nope: unknown size rule"):
        first_detected_prefix(p, rule="nope")


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=60), st.sampled_from([0.01, 0.02, 0.05]))
@settings(max_examples=200, deadline=None)
def test_alpha_spending_never_detects_earlier_than_first_crossing(p: list[float], alpha: float) -> None:
    spent, crossing = first_detected_prefix(p, alpha), first_crossing_prefix(p, alpha)
    assert spent is None or (crossing is not None and spent >= crossing)


def test_watermark_size_is_the_median_of_markmywords_tables() -> None:
    assert watermark_size([7, 3, 5]) == 5.0          # odd count: the middle one
    # even count: sorted 3, 4, 7, 9 -> the mean of 4 and 7, as np.median (MarkMyWords' Table V
    # reports such halves: 114.5, 372.5)
    assert watermark_size([3, 9, 4, 7]) == 5.5
    assert watermark_size([114, 115]) == 114.5
    # sorted 3, 5, inf, inf: the upper middle value is +inf -> +inf
    assert watermark_size([3, None, 5, None]) == math.inf
    # three of four undetected: more than half -> inf
    assert watermark_size([3, None, None, None]) == math.inf
    assert watermark_size([None]) == math.inf
    assert watermark_size([math.inf, 2]) == math.inf   # the upper middle value
    assert watermark_size((s for s in [12, 10, 11])) == 11.0


def test_watermark_size_empty_and_invalid() -> None:
    assert math.isnan(watermark_size([]))
    for bad in ([3, 0], [2, -1], [math.nan]):
        with pytest.raises(ValueError, match=r"sizes\["):
            watermark_size(bad)


sizes_st = st.lists(st.one_of(st.none(), st.integers(1, 500)), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(sizes_st, st.randoms(use_true_random=False))
def test_watermark_size_is_invariant_to_order(sizes: list[int | None], rnd) -> None:
    shuffled = list(sizes)
    rnd.shuffle(shuffled)
    assert watermark_size(shuffled) == watermark_size(sizes)


@settings(max_examples=300, deadline=None)
@given(sizes_st)
def test_watermark_size_is_numpys_median_with_undetected_as_inf(sizes: list[int | None]) -> None:
    e = watermark_size(sizes)
    values = sorted(math.inf if s is None else float(s) for s in sizes)
    n = len(values)
    lower, upper = values[(n - 1) // 2], values[n // 2]
    assert e == (upper if upper == math.inf else (lower + upper) / 2)
    assert e == float(np.median(values))
    assert (e == math.inf) == (sizes.count(None) >= n - n // 2)  # at least half never detected
