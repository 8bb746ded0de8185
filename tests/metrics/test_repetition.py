"""Repetition diagnostics (evalrun.metrics.repetition) on hand-counted texts, and their records."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalrun.metrics.aggregates import compute
from evalrun.metrics.repetition import degenerate, distinct_n, repeated_ngram_rate


def test_distinct_n_and_repeated_ngrams_by_hand() -> None:
    text = "four hundred four hundred four hundred"   # 6 words
    assert distinct_n(text, 1) == 2 / 6
    assert distinct_n(text, 2) == 2 / 5              # (four hundred), (hundred four)
    assert repeated_ngram_rate(text) == 1 - 2 / 3     # 3 four-grams, 2 distinct
    assert distinct_n("The cat sat", 2) == 1.0 and repeated_ngram_rate("The cat sat") is None
    assert distinct_n("A a A", 1) == 1 / 3           # words are case-folded
    assert distinct_n("", 1) is None


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=0, max_size=40))
def test_shares_are_in_the_unit_interval_and_rep_is_one_minus_distinct(ws: list[str]) -> None:
    text = " ".join(ws)
    for n in (1, 2, 4):
        d = distinct_n(text, n)
        assert d is None if len(ws) < n else 0 < d <= 1
    r = repeated_ngram_rate(text)
    assert (r is None) == (len(ws) < 4) and (r is None or r == pytest.approx(1 - distinct_n(text, 4)))


def test_degenerate_is_a_relative_drop_of_more_than_15_percent() -> None:
    assert degenerate(0.41, 0.98) and not degenerate(0.84, 0.98) and degenerate(0.83, 0.98)
    assert not degenerate(0.5, 0.0)


def _row(watermark: str, attack: str, text: str) -> dict:
    return {"pack": "p", "model": "m", "watermark": watermark, "attack": attack, "case_id": text[:5], "repetition": 0,
            "raw_output": text, "error": None, "label": "DETECTED", "score": 1.0,
            "metadata_json": json.dumps({"p_value": 0.001, "num_tokens_scored": 5, "size": 3, "threshold": 0.02})}


def test_records_per_unattacked_group_only() -> None:
    rows = [_row("kgw", "none", "one two one two one two"), _row("kgw", "none", "a b c d e f"),
            _row("kgw", "lowercase", "x x x x")]
    records = {(r.metric, r.attack): r for r in compute(rows) if r.metric.startswith(("distinct", "repeated"))}
    assert set(records) == {("distinct_1", "none"), ("distinct_2", "none"), ("repeated_4gram_rate", "none")}
    assert records[("distinct_2", "none")].value == pytest.approx((2 / 5 + 1.0) / 2)
    assert records[("distinct_2", "none")].n == 2
