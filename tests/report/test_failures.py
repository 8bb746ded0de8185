"""The failure section: for a detection pack, a failure is a label wrong for its ground truth."""

from __future__ import annotations

from evalrun.report.data import Result, default_view
from evalrun.report.tables import failures, is_failure


def _result(case_id: str, watermark: str, label: str) -> Result:
    row = {"pack": "p", "case_id": case_id, "model": "m", "watermark": watermark, "attack": "none",
           "repetition": 0, "label": label, "score": 1.0 if label == "DETECTED" else 0.0, "error": None,
           "reason": "r", "raw_output": "text", "attacked_output": None, "metadata_json": None, "extra_json": None,
           "group_value": None}
    return Result(row=row, case={"id": case_id}, system=f"m [{watermark}]")


def test_only_misses_and_false_positives_are_failures_of_a_detection_pack() -> None:
    items = [_result("c1", "kgw", "DETECTED"), _result("c2", "kgw", "NOT_DETECTED"),
             _result("c3", "none", "NOT_DETECTED"), _result("c4", "none", "DETECTED")]
    view = default_view("p", items)
    assert [is_failure(view, r) for r in items] == [False, True, False, True]
    shown = {e.title.split(" — ")[0] for e in failures(view, items, limit=10)}
    assert shown == {"c2", "c4"}  # the unwatermarked text correctly NOT_DETECTED is no failure
