"""WaterBench's TN on human reference answers (its ``detect_human.py``): the detection grader
detects a watermarked result's reference answer under the result's watermark and key, and
``wb_tn`` counts those verdicts -- one per case and key -- where a case has one, and the
unwatermarked outputs where it has none (or where an older store holds no verdict)."""

from __future__ import annotations

import json

import pytest

from evalrun.metrics.waterbench import level_label, table_rows, waterbench_records
from evalrun.pack.detection_grader import grade_detection, prepare_detection
from evalrun.pack.grade import GradeContext
from evalrun.watermark import parse_watermark
from evalrun.watermark.base import WatermarkScheme

KEY = "reference-tn-key"
VOCAB = 300
SETTINGS = {"z_threshold": 4.0}


def _scheme() -> WatermarkScheme:
    scheme = parse_watermark("kgw:gamma=0.25,delta=4")
    assert scheme is not None
    return scheme


SPEC = _scheme().spec.canonical()


def _watermarked(n: int, seed: int, key: str = KEY) -> tuple[int, ...]:
    """Tokens sampled through the scheme's own processor under ``key``."""
    import torch

    proc = _scheme().logits_processor(key, VOCAB, temperature=1.0, seed=seed)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (1, 1), generator=g)
    for _ in range(n):
        scores = proc(ids, torch.randn(1, VOCAB, generator=g))
        ids = torch.cat([ids, torch.multinomial(torch.softmax(scores, -1), 1, generator=g)], 1)
    return tuple(ids[0].tolist())


def _plain(n: int, seed: int) -> tuple[int, ...]:
    import numpy as np

    return tuple(int(t) for t in np.random.default_rng(seed).integers(0, VOCAB, n))


def _context(reference: tuple[int, ...] | None, watermark: str = SPEC) -> GradeContext:
    return GradeContext(token_ids=_plain(60, 1), watermark=watermark, key=KEY, extra={"vocab_size": VOCAB},
                        settings=SETTINGS, run_watermarks=(SPEC,), reference_token_ids=reference)


def test_a_watermarked_reference_is_detected_and_a_plain_one_is_not() -> None:
    marked, plain = _watermarked(80, 3), _plain(80, 4)
    z = _scheme().detect(marked, KEY, VOCAB).z_score
    assert z is not None and z > 6  # the text really carries the mark
    on_marked = grade_detection({"id": "m"}, "x", _context(marked)).metadata
    on_plain = grade_detection({"id": "p"}, "x", _context(plain)).metadata
    assert on_marked["reference_detection"]["detected"] is True and on_marked["reference_detection"]["z_score"] >= 4
    assert on_plain["reference_detection"]["detected"] is False
    assert set(on_marked["reference_detection"]) == {"p_value", "z_score", "score", "num_tokens_scored", "detected"}
    # the output's own verdict is untouched by its reference's
    assert on_marked["detected"] == on_plain["detected"] == grade_detection({"id": "p"}, "x", _context(None)).metadata[
        "detected"]
    assert "reference_detection" not in grade_detection({"id": "p"}, "x", _context(None)).metadata
    # another key: the same text is human text to that detector
    other = GradeContext(token_ids=_plain(60, 1), watermark=SPEC, key="another-key", extra={"vocab_size": VOCAB},
                         settings=SETTINGS, reference_token_ids=marked)
    assert grade_detection({"id": "m"}, "x", other).metadata["reference_detection"]["detected"] is False


def test_unwatermarked_results_and_out_of_vocabulary_references_get_no_reference_verdict() -> None:
    plain_result = grade_detection({"id": "p"}, "x", _context(_watermarked(40, 5), watermark="none"))
    assert "reference_detection" not in plain_result.metadata and SPEC in plain_result.metadata["detections"]
    bad = grade_detection({"id": "p"}, "x", _context((1, 2, VOCAB + 7)))
    assert "reference_detection" not in bad.metadata and bad.label in ("DETECTED", "NOT_DETECTED")


def test_batched_detection_gives_the_same_reference_verdicts() -> None:
    from evalrun.pack import detection_grader

    batch = [({"id": f"c{i}"}, "x", _context(ref)) for i, ref in enumerate((_watermarked(50, 7), _plain(50, 8)))]
    alone = [grade_detection(*item).metadata for item in batch]
    prepare_detection(batch)
    assert any(ids == batch[0][2].reference_token_ids for (*_, ids) in detection_grader._PREPARED)
    assert [grade_detection(*item).metadata for item in batch] == alone


def _row(watermark: str, case: dict, meta: dict, repetition: int = 0) -> dict:
    return {"pack": "waterbench", "model": "m", "watermark": watermark, "attack": "none", "error": None,
            "case_id": case["id"], "repetition": repetition,
            "label": "DETECTED" if meta.get("detected") else "NOT_DETECTED",
            "case_json": json.dumps(case), "metadata_json": json.dumps({"gm": None, "gm_metric": "f1", **meta})}


def _ref(detected: bool, z: float) -> dict:
    return {"detected": detected, "z_score": z, "p_value": 0.5, "num_tokens_scored": 30, "score": 8.0}


W = "kgw:delta=4"
MARKED = {"id": "a-marked", "category": "cat_a", "task": "1-1 t", "reference": "a text made with the key"}
PLAIN = {"id": "a-plain", "category": "cat_a", "task": "1-1 t", "reference": "a human answer"}
OPEN = {"id": "b-open", "category": "cat_b", "task": "5-1 v"}
OLD = {"id": "b-old", "category": "cat_b", "task": "5-1 v", "reference": "graded before references were"}


def _records(rows: list[dict]) -> dict:
    return {(r.metric, level_label(r.params)): r for r in waterbench_records(rows)}


def test_tn_counts_reference_answers_once_per_case_and_outputs_where_there_is_none() -> None:
    rows = [
        # a reference that is watermarked text: a false positive, whatever the unwatermarked output says
        *(_row(W, MARKED, {"detected": True, "reference_detection": _ref(True, 7.5)}, rep) for rep in range(3)),
        _row("none", MARKED, {"detections": {W: {"detected": False}}}),
        # a plain reference: a true negative, even where the unwatermarked output was detected
        *(_row(W, PLAIN, {"detected": True, "reference_detection": _ref(False, 0.3)}, rep) for rep in range(3)),
        _row("none", PLAIN, {"detections": {W: {"detected": True}}}),
        # no reference: its unwatermarked outputs, each of them
        _row(W, OPEN, {"detected": True}),
        _row("none", OPEN, {"detections": {W: {"detected": True}}}),
        _row("none", OPEN, {"detections": {W: {"detected": False}}}, repetition=1),
        # a reference without a verdict (an older store): its unwatermarked output, said in params
        _row(W, OLD, {"detected": False}),
        _row("none", OLD, {"detections": {W: {"detected": False}}}),
    ]
    records = _records(rows)
    tn = records["wb_tn", "all"]
    # verdicts: MARKED detected, PLAIN not, OPEN detected + not, OLD not -> 3 of 5 not detected
    assert (tn.value, tn.n) == (pytest.approx(3 / 5), 5)
    assert tn.params == {"level": "all", "tn_references": 2, "tn_outputs": 3, "tn_references_missing": 1}
    cat_a = records["wb_tn", "category=cat_a"]
    assert (cat_a.value, cat_a.n) == (0.5, 2) and cat_a.params["tn_outputs"] == 0
    assert "tn_references_missing" not in cat_a.params
    cat_b = records["wb_tn", "category=cat_b"]
    assert (cat_b.value, cat_b.n) == (pytest.approx(2 / 3), 3) and cat_b.params["tn_references"] == 0
    assert records["wb_tp", "all"].n == 8  # TP still counts every watermarked output
    cells = {row[4]: row[6] for row in table_rows(list(records.values()))}
    assert cells["all"] == "60.0 (23–88) [5: 2 ref + 3 out, 1 refs missing]"
    assert cells["category=cat_a"].endswith("[2: 2 ref + 0 out]")


def test_another_keys_reference_verdict_counts_apart() -> None:
    rows = [_row(W, PLAIN, {"detected": True, "reference_detection": _ref(False, 0.3)}),
            _row(W, PLAIN, {"detected": True, "reference_detection": _ref(False, -1.2)}, repetition=1)]
    tn = _records(rows)["wb_tn", "all"]
    assert (tn.value, tn.n, tn.params["tn_references"]) == (1.0, 2, 2)


def test_a_store_without_reference_verdicts_reads_as_before() -> None:
    rows = [_row(W, PLAIN, {"detected": True}), _row("none", PLAIN, {"detections": {W: {"detected": True}}}),
            _row(W, OPEN, {"detected": True}), _row("none", OPEN, {"detections": {W: {"detected": False}}})]
    tn = _records(rows)["wb_tn", "all"]
    assert (tn.value, tn.n) == (0.5, 2)
    assert tn.params == {"level": "all", "tn_references": 0, "tn_outputs": 2, "tn_references_missing": 1}


def test_tp_says_how_many_outputs_sit_exactly_at_the_threshold() -> None:
    """z >= 4 (the grader) and WaterBench's z > 4 differ only at z = 4 exactly, which kgw's
    count-based z-score takes (gamma 0.25: 24 green of 48 scored gives 4.0 in floating point)."""
    import numpy as np

    from evalrun.watermark.engine.nulls import z_scores

    tie = float(z_scores(np.array(24), np.array(48), 0.25))
    assert tie == 4.0
    rows = [_row(W, PLAIN, {"detected": True, "z_score": tie, "z_threshold": 4.0}),
            _row(W, PLAIN, {"detected": True, "z_score": 4.2, "z_threshold": 4.0}, repetition=1),
            _row(W, OPEN, {"detected": False, "z_score": 3.9, "z_threshold": 4.0})]
    records = _records(rows)
    tp = records["wb_tp", "all"]
    assert (tp.value, tp.n, tp.params["tp_at_threshold"]) == (pytest.approx(2 / 3), 3, 1)
    assert records["wb_tp", "category=cat_b"].params["tp_at_threshold"] == 0
    cells = {row[4]: row[5] for row in table_rows(list(records.values()))}
    assert cells["all"].endswith("[3, 1 at the threshold]") and cells["category=cat_b"].endswith("[1]")
    # grades without a z threshold (a p-value pack) say nothing about it
    assert "tp_at_threshold" not in _records([_row(W, OPEN, {"detected": True, "z_score": 4.0})])["wb_tp", "all"].params
