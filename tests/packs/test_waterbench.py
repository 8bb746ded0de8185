"""The ``waterbench`` pack (WaterBench's five length categories, our own cases) and its
generation metrics: token F1 and ROUGE-L F1 against hand-computed values, and the grader
that adds them to the detection grade."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun.pack.overlap import lcs_length, normalise_tokens, rouge_l, token_f1

CATEGORIES = ("short_input_short_answer", "short_input_long_answer", "long_input_short_answer",
              "long_input_long_answer", "open_ended")


def test_the_pack_has_five_categories_with_several_tasks_each() -> None:
    from evalrun.pack.loading import load_pack, resolve_pack

    pack = load_pack(resolve_pack("waterbench", []))
    assert not pack.case_errors and pack.meta["z_threshold"] == 4.0 and pack.group_field == "category"
    tasks: dict[str, set[str]] = defaultdict(set)
    for case in pack.cases:
        tasks[case.data["category"]].add(case.data["task"])
        assert (case.data["gm_metric"] == "none") == (case.data["category"] == "open_ended")
        assert ("reference" in case.data) == (case.data["gm_metric"] != "none")
    assert set(tasks) == set(CATEGORIES) and all(len(t) >= 2 for t in tasks.values())
    assert len(pack.cases) >= 30


def test_a_case_without_its_reference_is_refused_by_the_schema(tmp_path) -> None:
    import json
    import shutil

    from evalrun.pack.loading import load_pack, resolve_pack

    src = resolve_pack("waterbench", [])
    dst = tmp_path / "waterbench"
    shutil.copytree(src, dst)
    bad = {"id": "c1-bad", "category": "short_input_short_answer", "task": "1-1 knowledge probing",
           "input": "What colour is the sky?", "gm_metric": "f1"}
    (dst / "cases" / "extra.jsonl").write_text(json.dumps(bad) + "\n")
    errors = load_pack(dst).case_errors
    assert len(errors) == 1 and "reference" in str(errors[0]) and "extra.jsonl" in str(errors[0])


def test_token_f1_by_hand() -> None:
    assert token_f1("The answer is Jane Austen.", "Jane Austen") == pytest.approx(2 * (2 / 4) * 1 / (2 / 4 + 1))
    assert token_f1("Mercury", "mercury!") == 1.0
    assert token_f1("", "x") == 0.0 and token_f1("a the an", "the") == 0.0  # articles only: empty
    assert token_f1("eight eight legs", "eight legs") == pytest.approx(0.8)  # counts clipped: 2 of 3, 2 of 2


def test_rouge_l_by_hand() -> None:
    # LCS "one three four": precision 3/4, recall 3/4
    assert lcs_length("one two three four".split(), "one three four five".split()) == 3
    assert rouge_l("one two three four", "one three four five") == pytest.approx(0.75)
    assert rouge_l("four three two one", "one two three four") == pytest.approx(0.25)
    assert rouge_l("same words here", "Same words, here.") == 1.0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from("abcde"), max_size=12), st.lists(st.sampled_from("abcde"), max_size=12))
def test_lcs_matches_a_brute_force_definition(a: list[str], b: list[str]) -> None:
    from functools import lru_cache

    @lru_cache(maxsize=None)
    def lcs(i: int, j: int) -> int:
        if i == len(a) or j == len(b):
            return 0
        return lcs(i + 1, j + 1) + 1 if a[i] == b[j] else max(lcs(i + 1, j), lcs(i, j + 1))

    assert lcs_length(a, b) == lcs(0, 0)
    f = rouge_l(" ".join(a), " ".join(b))
    assert 0.0 <= f <= 1.0 and f == rouge_l(" ".join(b), " ".join(a))
    assert token_f1(" ".join(a), " ".join(b)) >= f - 1e-12  # a subsequence is a sub-bag


def test_normalisation() -> None:
    assert normalise_tokens("The “Quick”, brown — fox!") == ["quick", "brown", "fox"]


def test_the_grader_adds_the_generation_metric() -> None:
    from evalrun.pack.detection_grader import grade_with_generation_metric
    from evalrun.pack.grade import GradeContext
    from evalrun.watermark import parse_watermark

    spec = parse_watermark("kgw:gamma=0.25").spec.canonical()
    ctx = GradeContext(token_ids=tuple(range(5, 40)), watermark=spec, key="k", extra={"vocab_size": 100},
                       settings={"z_threshold": 4.0})
    case = {"id": "c1-x", "gm_metric": "f1", "reference": "Jane Austen"}
    g = grade_with_generation_metric(case, "It was Jane Austen.", ctx)
    assert g.metadata["gm"] == pytest.approx(token_f1("It was Jane Austen.", "Jane Austen"))
    assert g.metadata["gm_metric"] == "f1" and g.label in ("DETECTED", "NOT_DETECTED") and "z_score" in g.metadata
    assert grade_with_generation_metric({"id": "c5", "gm_metric": "none"}, "x", ctx).metadata["gm"] is None
    with pytest.raises(ValueError, match="gm_metric 'bleu' is unknown"):
        grade_with_generation_metric({"id": "c", "gm_metric": "bleu", "reference": "x"}, "x", ctx)


def _row(watermark: str, case_id: str, category: str, task: str, meta: dict, error: str | None = None) -> dict:
    import json

    return {"pack": "waterbench", "model": "m", "watermark": watermark, "attack": "none", "error": error,
            "label": None if error else ("DETECTED" if meta.get("detected") else "NOT_DETECTED"),
            "case_json": json.dumps({"id": case_id, "category": category, "task": task}),
            "metadata_json": json.dumps(meta)}


def test_tp_tn_gm_and_drop_per_task_and_category_by_hand() -> None:
    from evalrun.metrics.waterbench import level_label, table_rows, waterbench_records

    W = "kgw:delta=2"
    rows = [
        _row(W, "a1", "cat_a", "1-1 t", {"detected": True, "gm": 0.5, "gm_metric": "f1"}),
        _row(W, "a2", "cat_a", "1-2 u", {"detected": False, "gm": 0.3, "gm_metric": "f1"}),
        _row(W, "b1", "cat_b", "2-1 v", {"detected": True, "gm": None, "gm_metric": "none"}),
        _row(W, "b2", "cat_b", "2-1 v", {}, error="call failed"),
        _row("none", "a1", "cat_a", "1-1 t", {"gm": 1.0, "gm_metric": "f1", "detections": {W: {"detected": False}}}),
        _row("none", "a2", "cat_a", "1-2 u", {"gm": 0.6, "gm_metric": "f1", "detections": {W: {"detected": True}}}),
        _row("none", "b1", "cat_b", "2-1 v", {"gm": None, "gm_metric": "none", "detections": {}}),
        # another pack's grades (no gm_metric) are not WaterBench's
        {**_row(W, "x", "cat_a", "1-1 t", {"detected": True}), "pack": "other"},
    ]
    records = {(r.metric, level_label(r.params)): r for r in waterbench_records(rows)}
    assert records["wb_tp", "all"].params == {"level": "all"}
    assert records["wb_tp", "category=cat_a"].params == {"level": "category", "category": "cat_a"}
    assert records["wb_tp", "all"].value == pytest.approx(2 / 3) and records["wb_tp", "all"].n == 3
    assert records["wb_tp", "category=cat_a"].value == 0.5 and records["wb_tp", "category=cat_b"].value == 1.0
    # TN: a1 not detected, a2 detected; b1 has no verdict under W and is left out
    assert records["wb_tn", "all"].value == 0.5 and records["wb_tn", "all"].n == 2
    assert records["wb_gm", "all"].value == pytest.approx(0.4) and records["wb_gm_unwatermarked", "all"].value == 0.8
    assert records["wb_gm_drop", "all"].value == pytest.approx(0.5)
    assert records["wb_gm_drop", "task=1-1 t"].value == pytest.approx(0.5)
    assert records["wb_gm_drop", "task=1-1 t"].params == {"level": "task", "task": "1-1 t"}
    assert ("wb_gm", "category=cat_b") not in records  # open-ended: no GM
    assert all(r.pack == "waterbench" for r in records.values())
    table = table_rows(list(records.values()))
    assert [row[4] for row in table][:3] == ["all", "category=cat_a", "category=cat_b"]
    assert table[0][9] == "50.0%" and table[0][5].startswith("66.7")


def test_main_benchmark_aggregates_count_a_z_threshold_pack_by_the_graders_rule() -> None:
    """detection_rate and false_positive_rate agree with the grader's labels at z >= 4, where
    ``p <= 1 - Phi(4)`` (binomial p) would count other texts."""
    import json

    from evalrun.metrics.aggregates import compute
    from evalrun.pack.detection_grader import z_tail

    W = "kgw:delta=2"
    t = z_tail(4.0)
    # z >= 4 but the exact p above the normal tail, and the other way round
    marked = [{"p_value": 2 * t, "z_score": 4.2, "detected": True}, {"p_value": t / 2, "z_score": 3.9, "detected": False},
              {"p_value": 0.5, "z_score": 0.1, "detected": False}, {"p_value": 3 * t, "z_score": 4.5, "detected": True}]
    plain = [{"p_value": t / 3, "z_score": 3.5, "detected": False}, {"p_value": 0.9, "z_score": -1.0, "detected": False}]
    rows = []
    for i, e in enumerate(marked):
        rows.append({"pack": "waterbench", "model": "m", "watermark": W, "attack": "none", "case_id": f"c{i}",
                     "error": None, "label": "DETECTED" if e["detected"] else "NOT_DETECTED", "score": 1.0,
                     "params_json": "{}", "metadata_json": json.dumps({**e, "threshold": t, "z_threshold": 4.0,
                                                                       "num_tokens_scored": 40, "size": None})})
    for i, e in enumerate(plain):
        rows.append({"pack": "waterbench", "model": "m", "watermark": "none", "attack": "none", "case_id": f"c{i}",
                     "error": None, "label": "NOT_DETECTED", "score": 0.0, "params_json": "{}",
                     "metadata_json": json.dumps({"threshold": t, "z_threshold": 4.0,
                                                  "detections": {W: {**e, "num_tokens_scored": 40}}})})
    records = {(r.metric, r.watermark): r for r in compute(rows)}
    assert records[("detection_rate", W)].value == 0.5  # p <= t would say 1/4
    assert records[("detection_rate", W)].n == 4
    assert records[("false_positive_rate", W)].value == 0.0  # p <= t would count the first: 0.5
