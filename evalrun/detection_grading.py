"""The detection grader shared by the watermark benchmark packs (seed 000's tasks).

A pack's ``grader.py`` is one line calling :func:`grade_detection`. It detects the item's
watermark on the token ids the stages stored -- the attacked text's, re-tokenized with the
generating model's tokenizer, after an attack -- and labels the output DETECTED when the
p-value is at most the pack's ``detection_threshold`` (seed 000 uses 0.02). The evidence goes
into the grade's metadata: ``p_value``, ``z_score`` (green-list schemes), ``num_tokens_scored``
and ``size``, the length of the shortest detected prefix (seed 000 IV-B; None when no prefix
is detected), from which :func:`evalrun.metrics.watermark_size` makes the watermark size.

A pack may set ``z_threshold`` (WaterBench, seed 002, uses z = 4): an output is then DETECTED
when the detector's z-score is at least that, for schemes that give one (green-list schemes);
for the others, when the p-value is at most the normal tail at that z (``1 - Phi(4) = 3.2e-5``,
the same false-positive level). The watermark size then uses that p-value too. Packs without
it keep the p-value rule.

An unwatermarked output is the false-positive side: it is detected under every watermark the
store holds for its pack and model (``context.run_watermarks``), each detection in
``metadata["detections"][spec]``; its label is DETECTED if any of them fires. Without token ids
detection cannot be done, and the grade fails with the reason (a GRADER_ERROR row), never a
silent NOT_DETECTED.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from evalrun.grading import Grade, GradeContext
from evalrun.specs import is_none

DETECTED = "DETECTED"
NOT_DETECTED = "NOT_DETECTED"
#: the p-value threshold of seed 000 (MarkMyWords), used when a pack does not set its own
DEFAULT_THRESHOLD = 0.02


def z_tail(z: float) -> float:
    """The one-sided normal tail ``1 - Phi(z)``: the p-value a z-score threshold stands for."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def is_detected(z_score: float | None, p_value: float, *, threshold: float, z_threshold: float | None = None) -> bool:
    """The one detection rule: ``z_score >= z_threshold`` when both exist, else ``p_value <=
    threshold`` (the grader and ``evalrun tune`` both decide with it)."""
    if z_threshold is not None and z_score is not None:
        return math.isfinite(z_score) and z_score >= z_threshold
    return p_value <= threshold


def _detect(spec: str, token_ids: tuple[int, ...], key: str, vocab_size: int, threshold: float,
            z_threshold: float | None = None) -> dict[str, Any]:
    """One detection with its evidence (``threshold`` is the p-value rule; with
    ``z_threshold``, see the module docstring)."""
    from evalrun.metrics import first_detected_prefix
    from evalrun.watermark import parse_watermark

    scheme = parse_watermark(spec)
    assert scheme is not None
    detection = scheme.detect(token_ids, key, vocab_size)
    size = first_detected_prefix(scheme.prefix_p_values(token_ids, key, vocab_size), threshold) if token_ids else None
    detected = is_detected(detection.z_score, detection.p_value, threshold=threshold, z_threshold=z_threshold)
    z = detection.z_score
    return {"p_value": float(detection.p_value), "z_score": None if z is None or not math.isfinite(z) else float(z),
            "score": float(detection.score), "num_tokens_scored": int(detection.num_tokens_scored),
            "size": size, "detected": bool(detected)}


def _rule(evidence: Mapping[str, Any], threshold: float, z_threshold: float | None) -> str:
    """``z = 5.1 over 40 tokens (>= 4)`` or ``p = 0.001 over 40 tokens (<= 0.02)``."""
    detected = evidence["detected"]
    if z_threshold is not None and evidence["z_score"] is not None:
        return (f"z = {evidence['z_score']:.3g} over {evidence['num_tokens_scored']} tokens "
                f"({'>=' if detected else '<'} {z_threshold:g})")
    return (f"p = {evidence['p_value']:.3g} over {evidence['num_tokens_scored']} tokens "
            f"({'<=' if detected else '>'} {threshold:g})")


def grade_detection(case: Mapping[str, Any], output: str, context: GradeContext) -> Grade:
    """DETECTED (score 1) or NOT_DETECTED (score 0), with the detector's evidence."""
    z_setting = context.settings.get("z_threshold")
    if z_setting is not None and (isinstance(z_setting, bool) or not isinstance(z_setting, (int, float))
                                  or not math.isfinite(z_setting)):
        raise ValueError(f"pack.toml z_threshold = {z_setting!r}: must be a finite number (WaterBench uses 4)")
    z_threshold = None if z_setting is None else float(z_setting)
    threshold = (z_tail(z_threshold) if z_threshold is not None
                 else float(context.settings.get("detection_threshold", DEFAULT_THRESHOLD)))
    rule: dict[str, Any] = {"threshold": threshold}
    if z_threshold is not None:
        rule["z_threshold"] = z_threshold
    if context.token_ids is None:
        raise ValueError(f"no token ids to detect on: {context.token_note or 'the store holds none'}")
    vocab_size = context.extra.get("vocab_size")
    if not isinstance(vocab_size, int):
        raise ValueError("the stored output does not record its model's vocab_size, which detection needs")
    if not context.key:
        raise ValueError("detection needs the watermark key (--key or EVALRUN_WATERMARK_KEY)")
    marked = not is_none(context.watermark)
    specs = [context.watermark] if marked else list(context.run_watermarks)
    if not specs:
        return Grade(0.0, NOT_DETECTED, "no watermark in this pack and model to detect",
                     {**rule, "detections": {}})
    found = {spec: _detect(spec, context.token_ids, context.key, vocab_size, threshold, z_threshold)
             for spec in specs}
    if marked:
        evidence = found[context.watermark]
        label = DETECTED if evidence["detected"] else NOT_DETECTED
        return Grade(1.0 if evidence["detected"] else 0.0, label, _rule(evidence, threshold, z_threshold),
                     {**evidence, **rule})
    fired = sorted(spec for spec, ev in found.items() if ev["detected"])
    reason = (f"false positive under {', '.join(fired)}" if fired
              else f"not detected under {len(found)} watermark(s)")
    return Grade(1.0 if fired else 0.0, DETECTED if fired else NOT_DETECTED, reason,
                 {**rule, "detections": found})


def grade_with_generation_metric(case: Mapping[str, Any], output: str, context: GradeContext) -> Grade:
    """:func:`grade_detection`, with the output's generation metric (WaterBench's GM, seed 002)
    against ``case["reference"]`` in the metadata: ``gm`` (None when the case's ``gm_metric``
    is ``none``) and ``gm_metric``."""
    from evalrun.metrics.overlap import GENERATION_METRICS

    grade = grade_detection(case, output, context)
    name = case.get("gm_metric", "none")
    if name != "none" and name not in GENERATION_METRICS:
        raise ValueError(f"case {case.get('id')}: gm_metric {name!r} is unknown; known: "
                         f"{', '.join(['none', *GENERATION_METRICS])}")
    gm = None if name == "none" else GENERATION_METRICS[name](output, str(case.get("reference", "")))
    return Grade(grade.score, grade.label, grade.reason, {**grade.metadata, "gm": gm, "gm_metric": name})
