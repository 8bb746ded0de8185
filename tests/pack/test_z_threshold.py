"""The detection grader's ``z_threshold`` rule (WaterBench, section 3.2: an output is
watermarked when its z-score is at least 4), on token sequences built to have a chosen number
of green tokens under a real kgw green list."""

from __future__ import annotations

import math

import pytest

from evalrun.pack.detection_grader import DETECTED, NOT_DETECTED, grade_detection, z_tail
from evalrun.pack.grade import GradeContext
from evalrun.watermark import parse_watermark

pytestmark = pytest.mark.numeric  # float z-scores at a threshold

KEY = "z-rule-key"
VOCAB = 1000
KGW = parse_watermark("kgw:gamma=0.25,delta=2").spec.canonical()


def tokens_with_green(n: int, green: int, spec: str = KGW) -> tuple[int, ...]:
    """``n`` distinct tokens whose first ``green`` scored tokens are green under ``spec`` and
    ``KEY`` and the rest red, chosen greedily with the scheme's own detector."""
    scheme = parse_watermark(spec)
    out = [0]
    candidates = iter(range(1, VOCAB))
    used = {0}
    while len(out) < n + 1:
        want_green = scheme.detect(out, KEY, VOCAB).num_green_tokens < green if len(out) > 1 else green > 0
        for t in candidates:
            if t in used:
                continue
            before = scheme.detect(out, KEY, VOCAB).num_green_tokens if len(out) > 1 else 0
            after = scheme.detect([*out, t], KEY, VOCAB).num_green_tokens
            if (after > before) == want_green:
                out.append(t)
                used.add(t)
                break
        else:  # pragma: no cover - a vocabulary of 1000 always has both colours
            raise AssertionError("ran out of candidate tokens")
        candidates = iter(range(1, VOCAB))
    return tuple(out)


def grade(tokens: tuple[int, ...], settings: dict, watermark: str = KGW, run_watermarks: tuple[str, ...] = ()):
    context = GradeContext(token_ids=tokens, watermark=watermark, key=KEY, extra={"vocab_size": VOCAB},
                           settings=settings, run_watermarks=run_watermarks)
    return grade_detection({"id": "c"}, "text", context)


def test_z_tail_is_the_normal_tail() -> None:
    assert z_tail(0.0) == pytest.approx(0.5)
    assert z_tail(4.0) == pytest.approx(3.167e-5, rel=1e-3)
    assert z_tail(1.959964) == pytest.approx(0.025, rel=1e-5)


def test_z_rule_and_p_rule_differ_between_z_2_and_4() -> None:
    # 64 scored tokens at gamma 0.25: 16 green expected, sd sqrt(12) ~ 3.46
    middling = tokens_with_green(64, 26)   # z ~ 2.9: p < 0.02 but z < 4
    strong = tokens_with_green(64, 32)     # z ~ 4.6
    scheme = parse_watermark(KGW)
    z_mid, z_strong = scheme.detect(middling, KEY, VOCAB).z_score, scheme.detect(strong, KEY, VOCAB).z_score
    assert 2.1 < z_mid < 4.0 < z_strong

    p_rule = grade(middling, {"detection_threshold": 0.02})
    assert p_rule.label == DETECTED and "threshold" in p_rule.metadata and "z_threshold" not in p_rule.metadata
    z_rule = grade(middling, {"z_threshold": 4})
    assert z_rule.label == NOT_DETECTED and z_rule.score == 0.0
    assert z_rule.metadata["z_threshold"] == 4.0 and z_rule.metadata["threshold"] == pytest.approx(z_tail(4.0))
    assert z_rule.metadata["z_score"] == pytest.approx(z_mid) and z_rule.reason.startswith(f"z = {z_mid:.3g}")
    assert "(< 4)" in z_rule.reason
    assert grade(strong, {"z_threshold": 4}).label == DETECTED
    assert "(>= 4)" in grade(strong, {"z_threshold": 4}).reason
    # a pack may pick another z; the p-value rule ignores it only when it is absent
    assert grade(middling, {"z_threshold": 2.5}).label == DETECTED


def test_the_false_positive_side_uses_the_z_rule_too() -> None:
    middling = tokens_with_green(64, 26)
    assert grade(middling, {"detection_threshold": 0.02}, watermark="none", run_watermarks=(KGW,)).label == DETECTED
    plain = grade(middling, {"z_threshold": 4}, watermark="none", run_watermarks=(KGW,))
    assert plain.label == NOT_DETECTED and plain.metadata["detections"][KGW]["detected"] is False


def test_schemes_without_a_z_score_use_the_equivalent_p_value() -> None:
    exp = parse_watermark("exp:randomness=window,context=1").spec.canonical()
    scheme = parse_watermark(exp)
    for length in (8, 30, 60):
        tokens = tuple(range(3, 3 + length))
        detection = scheme.detect(tokens, KEY, VOCAB)
        assert detection.z_score is None
        g = grade(tokens, {"z_threshold": 4}, watermark=exp)
        assert (g.label == DETECTED) == (detection.p_value <= z_tail(4.0))
        assert g.reason.startswith("p = ") and g.metadata["threshold"] == pytest.approx(z_tail(4.0))


def test_a_bad_z_threshold_names_the_setting() -> None:
    with pytest.raises(ValueError, match="z_threshold"):
        grade(tokens_with_green(10, 5), {"z_threshold": "four"})
    with pytest.raises(ValueError, match="z_threshold"):
        grade(tokens_with_green(10, 5), {"z_threshold": math.nan})
