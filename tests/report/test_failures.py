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


def _fields(example) -> dict[str, str]:
    return dict(example.fields)


def test_a_false_positive_is_solved_only_by_unwatermarked_setups() -> None:
    """A false positive's "Solved by" names the setups where the same case's unwatermarked text
    was not flagged; the watermarked setups that detected their own text solved another task."""
    items = [_result("c1", "none", "DETECTED"), _result("c1", "none+typo", "NOT_DETECTED"),
             _result("c1", "kgw", "DETECTED"), _result("c1", "exp", "DETECTED")]
    items[1].row["watermark"], items[1].row["attack"] = "none", "typo"
    view = default_view("p", items)
    [example] = failures(view, items)
    fields = _fields(example)
    assert fields["Solved by"] == "m [none+typo]"
    assert fields["Expected"] == "NOT_DETECTED (unwatermarked text)"
    alone = failures(view, [items[0], *items[2:]])
    assert _fields(alone[0])["Solved by"] == "no other unwatermarked setup"


def test_a_missed_watermark_is_solved_only_by_watermarked_setups() -> None:
    items = [_result("c1", "kgw", "NOT_DETECTED"), _result("c1", "exp", "DETECTED"),
             _result("c1", "none", "NOT_DETECTED")]
    view = default_view("p", items)
    [example] = failures(view, items)
    assert _fields(example)["Solved by"] == "m [exp]"
    assert _fields(example)["Expected"] == "DETECTED (watermarked text)"


def test_a_long_solved_by_list_names_a_few_and_counts_the_rest() -> None:
    items = [_result("c1", "kgw", "NOT_DETECTED"),
             *[_result("c1", f"kgw:delta={d}", "DETECTED") for d in range(1, 9)]]
    view = default_view("p", items)
    [example] = failures(view, items)
    text = _fields(example)["Solved by"]
    assert text.count("m [kgw:delta=") == 5 and text.endswith(" and 3 more of the case's watermarked setups")
    six = failures(view, items[:7])
    assert _fields(six[0])["Solved by"].count("m [kgw:delta=") == 6  # never "and 1 more"
