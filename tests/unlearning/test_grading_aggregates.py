"""The waterdrum grader (pure) and aggregates: owner ids, verification evidence, D1/D2 maths."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from evalrun.metrics import auroc, calibration_r2
from evalrun.pack.grade import GradeContext
from evalrun.unlearning.aggregates import Role, point_scores, summarize, waterdrum_aggregate
from evalrun.unlearning.grading import NOT_VERIFIED, VERIFIED, grade_verification
from evalrun.unlearning.keys import FROM_OWNER, FROM_SECRET, owner_waterfall_id
from evalrun.watermark.schemes.waterfall import Waterfall, permutation

V = 512
SETTINGS = {"detection_threshold": 0.05, "k_p": 1, "n_gram": 2}


def marked_tokens(owner_id: int, n: int = 60, seed: int = 1) -> list[int]:
    """Tokens whose index under their context's permutation is near 0 (cos ~ 1): a text
    strongly marked for ``owner_id``."""
    rng = np.random.default_rng(seed)
    ids = [int(rng.integers(V))]
    for _ in range(n):
        perm = permutation(owner_id, (ids[-1],), V)
        inverse = np.argsort(perm)
        ids.append(int(inverse[rng.integers(0, 8)]))  # one of the 8 tokens mapped to 0..7
    return ids


def ctx(tokens: list[int] | None, key: str | None = None) -> GradeContext:
    return GradeContext(token_ids=None if tokens is None else tuple(tokens), key=key,
                        extra={"vocab_size": V}, settings=SETTINGS)


def test_owner_ids_without_and_with_a_secret() -> None:
    assert owner_waterfall_id(7, None) == 7
    derived = {owner_waterfall_id(o, "s3cret") for o in range(50)}
    assert len(derived) == 50 and all(0 <= d < 2**32 for d in derived)
    assert owner_waterfall_id(3, "s3cret") == owner_waterfall_id(3, "s3cret")
    assert owner_waterfall_id(3, "s3cret") != owner_waterfall_id(3, "other")
    with pytest.raises(Exception, match="non-negative"):
        owner_waterfall_id(-1, None)


def test_grader_verifies_the_case_owner_only() -> None:
    tokens = marked_tokens(4)
    case = {"id": "c", "owner": 4, "set": "retain", "prompt": "p"}
    g = grade_verification(case, "text", ctx(tokens))
    expected = Waterfall().detect(tokens, "4", V)
    assert g.label == VERIFIED and g.score == 1.0
    assert g.metadata["verification_score"] == pytest.approx(expected.score)
    assert g.metadata["verification_score"] > 0.9
    assert g.metadata["p_value"] == pytest.approx(expected.p_value)
    assert g.metadata["set"] == "retain" and g.metadata["owner"] == 4
    other = grade_verification({**case, "owner": 5}, "text", ctx(tokens))
    assert other.label == NOT_VERIFIED and abs(other.metadata["verification_score"]) < 0.4


def test_grader_with_a_secret_uses_the_derived_id_and_never_records_the_secret() -> None:
    wid = owner_waterfall_id(2, "k-123")
    tokens = marked_tokens(wid)
    case = {"id": "c", "owner": 2, "set": "forget", "prompt": "p"}
    g = grade_verification(case, "x", ctx(tokens, key="k-123"))
    assert g.label == VERIFIED and g.metadata["key_source"] == FROM_SECRET
    assert "k-123" not in g.metadata_json() and str(wid) not in g.metadata_json()
    plain = grade_verification(case, "x", ctx(tokens))  # owner index 2 instead
    assert plain.metadata["verification_score"] < 0.5 and plain.metadata["key_source"] == FROM_OWNER


def test_grader_without_token_ids_raises() -> None:
    with pytest.raises(ValueError, match="no token ids"):
        grade_verification({"id": "c", "owner": 0, "set": "forget", "prompt": "p"}, "x",
                           ctx(None))


def row(case_id: str, part: str, q: float, model: str = "m", error: str | None = None) -> dict:
    return {"case_id": case_id, "model": model, "error": error,
            "metadata_json": json.dumps({"verification_score": q, "set": part})}


def test_point_scores_average_repetitions_and_skip_errors() -> None:
    rows = [row("a", "forget", 0.1), row("a", "forget", 0.3), row("b", "retain", 0.5),
            row("c", "retain", 0.9, error="boom"), {"case_id": "d", "error": None, "metadata_json": None}]
    assert point_scores(rows) == {"forget": {"a": pytest.approx(0.2)}, "retain": {"b": 0.5}}
    names = [n for n, _, _ in waterdrum_aggregate(rows, seed=0)]
    assert names == ["waterdrum_forget_score", "waterdrum_retain_score", "waterdrum_auroc"]
    assert waterdrum_aggregate([{"case_id": "x", "error": None, "metadata_json": "{}"}], 0) == []


def test_summarize_scales_to_the_original_and_computes_d1_d2() -> None:
    def scores(forget: list[float], retain: list[float]) -> dict:
        return {"forget": {f"f{i}": v for i, v in enumerate(forget)},
                "retain": {f"r{i}": v for i, v in enumerate(retain)}}

    per_model = {"orig": scores([0.4, 0.4], [0.5, 0.3]), "re": scores([0.0, 0.02], [0.35, 0.45]),
                 "c50": scores([0.2, 0.22], [0.4, 0.4]), "gd": scores([0.1, 0.1], [0.2, 0.2])}
    roles = {"orig": Role("original"), "re": Role("retrained"), "c50": Role("calibration", 0.5),
             "gd": Role("unlearned", None, "gradient_difference")}
    s = summarize(per_model, roles)
    assert s.models["orig"]["forget_scaled"] == pytest.approx(1.0)
    assert s.models["c50"]["forget_scaled"] == pytest.approx(0.21 / 0.4)
    assert s.models["gd"]["retain_scaled"] == pytest.approx(0.5)
    assert s.d1_auroc == auroc([0.35, 0.45], [0.0, 0.02]) == 1.0
    xs, ys = [0.0, 0.5, 1.0], [0.01 / 0.4, 0.21 / 0.4, 1.0]
    assert s.calibration == [pytest.approx((x, y)) for x, y in zip(xs, ys)]
    assert s.d2_r2 == pytest.approx(calibration_r2(xs, ys))
    assert s.d1_ci == (1.0, 1.0)  # every resample separates perfectly
    assert all(math.isnan(c) or c <= 1.0 for c in s.d2_ci)  # NaN where resamples are degenerate
    with pytest.raises(ValueError, match="exactly one original"):
        summarize(per_model, {"re": Role("retrained")})
    assert math.isnan(summarize({"orig": scores([], [0.1]), "re": scores([], [0.1])},
                                {"orig": Role("original"), "re": Role("retrained")}).d1_auroc)
