"""Batched detection before grading (``prepare_detection``, a pack grader's ``prepare``):
the grades are those of the item-by-item path, exactly, and they really come from the batch."""

from __future__ import annotations

import numpy as np
import pytest

from evalrun.pack import detection_grader as detection_grading
from evalrun.pack.detection_grader import grade_detection, prepare_detection
from evalrun.pack.grade import GradeContext
from evalrun.watermark import parse_watermark

pytestmark = pytest.mark.numeric  # the embedded model's float32 logits at detection

KEY = "prepare-key"
VOCAB = 300
SPECS = [parse_watermark(s).spec.canonical()
         for s in ("kgw:gamma=0.25,delta=2", "exp", "kgw:seeding=lefthash,gamma=0.25")]


def _watermarked(spec: str, n: int, seed: int) -> tuple[int, ...]:
    """Tokens sampled through the scheme's own processor (so most are detected)."""
    import torch

    scheme = parse_watermark(spec)
    proc = scheme.logits_processor("15485863" if "seeding" in spec else KEY, VOCAB,
                                   temperature=1.0, seed=seed)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (1, 4), generator=g)
    for _ in range(n):
        scores = proc(ids, torch.randn(1, VOCAB, generator=g) * 3)
        ids = torch.cat([ids, torch.multinomial(torch.softmax(scores, -1), 1, generator=g)], 1)
    return tuple(ids[0, 4:].tolist())


def _batch(settings: dict) -> list[tuple[dict, str, GradeContext]]:
    rng = np.random.default_rng(0)
    out = []
    for i, spec in enumerate(SPECS):
        key = "15485863" if "seeding" in spec else KEY
        for j in range(3):
            toks = _watermarked(spec, 40 + 10 * j, seed=10 * i + j)
            out.append(({"id": f"w{i}{j}"}, "t", GradeContext(
                token_ids=toks, watermark=spec, key=key, extra={"vocab_size": VOCAB},
                settings=settings)))
    for j in range(4):  # unwatermarked: detected under every watermark of the run
        toks = tuple(rng.integers(0, VOCAB, 30 + j).tolist())
        out.append(({"id": f"u{j}"}, "t", GradeContext(
            token_ids=toks, watermark="none", key=KEY, extra={"vocab_size": VOCAB},
            settings=settings, run_watermarks=tuple(SPECS[:2]))))
    out.append(({"id": "empty"}, "t", GradeContext(
        token_ids=(), watermark=SPECS[0], key=KEY, extra={"vocab_size": VOCAB}, settings=settings)))
    out.append(({"id": "bad"}, "t", GradeContext(  # an id outside the vocabulary
        token_ids=(1, 2, VOCAB + 5), watermark=SPECS[0], key=KEY, extra={"vocab_size": VOCAB},
        settings=settings)))
    return out


def _grades(batch: list[tuple[dict, str, GradeContext]]) -> list[object]:
    out: list[object] = []
    for case, text, context in batch:
        try:
            out.append(grade_detection(case, text, context))
        except Exception as exc:  # the grade's error, as the harness would store it
            out.append(f"{type(exc).__name__}: {exc}")
    return out


@pytest.mark.parametrize("settings", [{}, {"z_threshold": 4.0}, {"detection_threshold": 0.05}])
def test_prepared_grades_equal_item_by_item_grades(settings: dict,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    batch = _batch(settings)
    monkeypatch.setattr(detection_grading, "_PREPARED", {})
    alone = _grades(batch)
    assert any(getattr(g, "label", None) == "DETECTED" for g in alone)
    assert isinstance(alone[-1], str) and "outside the vocabulary" in alone[-1]
    prepare_detection(batch)
    # every valid (spec, text) pair came from the batch; the bad text's group was left alone
    assert len(detection_grading._PREPARED) >= 9 + 4 * 2
    assert _grades(batch) == alone


def test_prepared_grades_do_not_detect_again(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = [b for b in _batch({}) if b[0]["id"] != "bad"]
    monkeypatch.setattr(detection_grading, "_PREPARED", {})
    want = _grades(batch)
    prepare_detection(batch)

    def refuse(spec: str):  # the per-item path would parse the scheme to detect
        raise AssertionError(f"{spec} detected item by item after prepare")

    monkeypatch.setattr(detection_grading, "parse_watermark", refuse)
    assert _grades(batch) == want


def test_prepared_results_are_per_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A memo entry is only found with the key it was computed under."""
    batch = [b for b in _batch({}) if b[0]["id"].startswith("w0")]
    monkeypatch.setattr(detection_grading, "_PREPARED", {})
    prepare_detection(batch)
    case, text, context = batch[0]
    other = GradeContext(token_ids=context.token_ids, watermark=context.watermark, key="other-key",
                         extra=context.extra, settings=context.settings)
    assert grade_detection(case, text, other).metadata["p_value"] != \
        grade_detection(case, text, context).metadata["p_value"]


def test_a_text_without_tokens_is_never_sized_under_every_rule() -> None:
    """An empty output still counts in the watermark size (as +inf) under each rule, so a
    group's size record is not lost to one text that has no rule's entry."""
    from evalrun.pack import detection_grader

    assert detection_grader._sizes(np.zeros(0), 0.02) == {"alpha_spending": None, "first_crossing": None}
