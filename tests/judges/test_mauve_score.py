"""MAUVE against the mauve-text package's own numbers (scripts/mauve_reference.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun.judges.mauve_score import (
    default_buckets,
    mauve,
    mauve_from_histograms,
    mauve_with_interval,
    normal_interval,
    quantize,
)

REFERENCE = json.loads((Path(__file__).parent / "data" / "mauve_reference.json").read_text())


@pytest.mark.parametrize("case", REFERENCE["histograms"], ids=lambda c: f"{len(c['p'])}-buckets")
def test_divergence_curve_area_matches_mauve_text(case: dict) -> None:
    assert mauve_from_histograms(np.array(case["p"]), np.array(case["q"])) == pytest.approx(case["mauve"], abs=1e-12)


@pytest.mark.parametrize("case", REFERENCE["embeddings"], ids=lambda c: f"{c['buckets']}-clusters")
def test_whole_score_matches_mauve_text_where_clusters_are_unambiguous(case: dict) -> None:
    p, q = np.array(case["p"]), np.array(case["q"])
    p_hist, q_hist = quantize(p, q, case["buckets"])
    # cluster numbering differs between k-means implementations: compare the histograms as
    # sets of (P mass, Q mass) per bucket
    ours = sorted(zip(np.round(p_hist, 12), np.round(q_hist, 12)))
    theirs = sorted(zip(np.round(case["p_hist"], 12), np.round(case["q_hist"], 12)))
    assert ours == theirs
    assert mauve(p, q, buckets=case["buckets"]) == pytest.approx(case["mauve"], abs=1e-9)


def test_identical_samples_score_one_and_disjoint_samples_near_zero() -> None:
    rng = np.random.default_rng(0)
    p = rng.normal(size=(40, 6))
    assert mauve(p, p) == pytest.approx(1.0)
    far = rng.normal(size=(40, 6)) * 0.01 + 50.0
    near = rng.normal(size=(40, 6)) * 0.01 - 50.0
    assert mauve(near, far) < 0.01


def test_identical_histograms_score_one_where_mauve_text_scores_three_quarters() -> None:
    # mauve-text 0.4.0 gives 0.75 here: its argsort leaves the tied curve points off the frontier
    half = np.array([0.5, 0.5])
    assert mauve_from_histograms(half, half) == 1.0


def test_buckets_follow_mauve_text_auto_rule() -> None:
    assert default_buckets(100, 100) == 10
    assert default_buckets(100, 14) == 2  # at least two
    assert default_buckets(300, 155) == 16  # round(15.5) = 16


def test_interval_brackets_the_score_and_is_reproducible() -> None:
    rng = np.random.default_rng(1)
    p = rng.normal(size=(60, 5))
    q = rng.normal(size=(60, 5)) + 0.5
    first = mauve_with_interval(p, q, resamples=20, bootstrap_seed=7)
    again = mauve_with_interval(p, q, resamples=20, bootstrap_seed=7)
    assert first == again
    assert first.low <= first.high and len(first.replicates) == 20
    assert (first.p_count, first.q_count, first.buckets) == (60, 60, 6)
    assert 0.0 < first.score < 1.0
    assert first.low <= first.score <= first.high


def test_normal_interval_is_centred_on_the_point_and_clipped() -> None:
    assert normal_interval(0.9, [0.7, 0.8]) == pytest.approx((0.9 - 0.13859, 0.9 + 0.13859), abs=1e-5)
    assert normal_interval(0.95, [0.5, 0.9], 0.0, 1.0)[1] == 1.0
    assert all(math.isnan(v) for v in normal_interval(0.5, [0.4]))


def test_the_bootstrap_resamples_prompts_so_identical_samples_stay_at_one() -> None:
    p = np.random.default_rng(2).normal(size=(50, 4))
    same = mauve_with_interval(p, p.copy(), resamples=10)
    assert (same.score, same.low, same.high) == pytest.approx((1.0, 1.0, 1.0), abs=1e-12)
    with pytest.raises(ValueError, match="one length"):
        mauve_with_interval(p, p[:40])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=12), st.data())
def test_histogram_score_is_symmetric_and_in_unit_interval(raw: list[float], data: st.DataObject) -> None:
    other = data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(raw), max_size=len(raw)))
    p, q = np.array(raw) + 1e-3, np.array(other) + 1e-3  # the reference's KL is +inf on empty buckets
    p, q = p / p.sum(), q / q.sum()
    score = mauve_from_histograms(p, q)
    assert 0.0 <= score <= 1.0 + 1e-12
    assert score == pytest.approx(mauve_from_histograms(q, p), abs=1e-6)  # the grid is symmetric up to rounding
    assert mauve_from_histograms(p, p) == pytest.approx(1.0, abs=1e-9)
