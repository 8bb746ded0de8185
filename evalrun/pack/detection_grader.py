"""The detection grader shared by the watermark benchmark packs (MarkMyWords' tasks).

A pack names it in pack.toml (``grader = "detection"``: :data:`BUILTIN`), or its grader.py calls
:func:`grade_detection`. It detects the item's
watermark on the token ids the stages stored -- the attacked text's, re-tokenized with the
generating model's tokenizer, after an attack -- and labels the output DETECTED when the
p-value is at most the pack's ``detection_threshold`` (MarkMyWords uses 0.02). The evidence goes
into the grade's metadata: ``p_value``, ``z_score`` (green-list schemes), ``num_tokens_scored``
``size``, the length of the shortest detected prefix (MarkMyWords IV-B; None when no prefix
is detected) under the default size rule (``alpha_spending``: an unwatermarked text gets a
finite size with probability at most the threshold), and ``sizes``, the size under every
registered rule (:data:`evalrun.watermark.verdict.SIZE_RULES`; ``first_crossing`` is MarkMyWords'
own), from which :func:`evalrun.metrics.watermark_size` makes the watermark size.

A pack may set ``z_threshold`` (WaterBench, uses z = 4): an output is then DETECTED
when the detector's z-score is at least that, for schemes that give one (green-list schemes);
for the others, when the p-value is at most the normal tail at that z (``1 - Phi(4) = 3.2e-5``,
the same false-positive level). The watermark size then uses that p-value too. Packs without
it keep the p-value rule.

An unwatermarked output is the false-positive side: it is detected under every watermark the
store holds for its pack and model (``context.run_watermarks``), each detection in
``metadata["detections"][spec]``; its label is DETECTED if any of them fires. Without token ids
detection cannot be done, and the grade fails with the reason (a GRADER_ERROR row), never a
silent NOT_DETECTED.

A watermarked output whose case has a reference answer (the case's ``reference``, e.g.
WaterBench's human answers; ``context.reference_token_ids``, the answer in ids of the output's
tokenizer) also carries the reference's detection under the output's watermark and key in
``metadata["reference_detection"]`` (``p_value``, ``z_score``, ``score``,
``num_tokens_scored``, ``detected``, by the same rule): WaterBench measures true negatives on
those human texts (its ``detect_human.py``), not on model outputs. It does not change the
output's label.

Schemes whose detector reads the model (SWEET, EWD, Unbiased: ``needs_model``) are detected
with the logits of the output's generating model (:mod:`evalrun.model.token_logits`, loaded
once per process): the one case where grading runs a model, because those detectors are
defined by it. The forward pass is deterministic and made one text at a time, so a regrade on
the same machine and library versions gives the same numbers; a model that gives no logits (an
API model) makes the grade fail with the reason.

:func:`prepare_detection` is its ``prepare`` (a grader.py exports it under that name): the harness
hands it the items about to be graded, and it detects them all in a few batched calls (one
per watermark and vocabulary) whose results the per-item grades then look up -- the same
numbers, computed in bulk.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Mapping, Sequence

from evalrun._util.specs import is_none
from evalrun.model.providers import stored_model
from evalrun.pack.builtin_graders import BuiltinGrader
from evalrun.pack.grade import Grade, GradeContext
from evalrun.pack.overlap import OVERLAP_METRICS
from evalrun.watermark import parse_watermark
from evalrun.watermark.verdict import (
    DEFAULT_SIZE_RULE,
    DEFAULT_THRESHOLD,
    DETECTED,
    NOT_DETECTED,
    SIZE_RULES,
    is_detected,
    sizes_by_rule,
    z_tail,
)

#: detections computed in bulk by :func:`prepare_detection` for the items about to be graded:
#: (spec, vocab size, key fingerprint, p-value threshold, model, token ids) -> (Detection, sizes).
#: Process memory only (never stored); replaced by each ``prepare`` call, so it stays bounded.
_PREPARED: dict[tuple[Any, ...], tuple[Any, dict[str, int | None]]] = {}


def _memo_key(spec: str, vocab_size: int, key: str, threshold: float,
              token_ids: tuple[int, ...], model: str) -> tuple[Any, ...]:
    return (spec, vocab_size, hashlib.sha256(key.encode()).digest(), threshold, model, token_ids)


def _model_kwargs(scheme: Any, model: str) -> dict[str, Any]:
    """``{"logits": ...}`` of the generating model for schemes whose detector reads it (SWEET,
    EWD, Unbiased; loaded once per process), else nothing."""
    if not getattr(scheme, "needs_model", False):
        return {}
    if not model:
        raise ValueError(f"--watermark {scheme.spec}: detection needs the generating model, which the "
                         "stored output does not name")
    from evalrun.model.token_logits import model_logits

    return {"logits": model_logits(stored_model(model))}


def _never_sized() -> dict[str, int | None]:
    """No prefix detected, under every size rule (a text without tokens)."""
    return dict.fromkeys(SIZE_RULES.names())


def _sizes(prefix_p_values: Any, threshold: float) -> dict[str, int | None]:
    """The text's size under every size rule (no tokens: never detected, under every rule)."""
    return sizes_by_rule(prefix_p_values, threshold) if len(prefix_p_values) else _never_sized()


def _detect(spec: str, token_ids: tuple[int, ...], key: str, vocab_size: int, threshold: float,
            z_threshold: float | None = None, model: str = "") -> dict[str, Any]:
    """One detection with its evidence (``threshold`` is the p-value rule; with
    ``z_threshold``, see the module docstring)."""
    found = _PREPARED.get(_memo_key(spec, vocab_size, key, threshold, token_ids, model))
    if found is not None:
        detection, sizes = found
    else:
        scheme = parse_watermark(spec)
        assert scheme is not None
        kwargs = _model_kwargs(scheme, model)
        detection = scheme.detect(token_ids, key, vocab_size, **kwargs)
        sizes = _sizes(scheme.prefix_p_values(token_ids, key, vocab_size, **kwargs), threshold) if token_ids else _never_sized()
    detected = is_detected(detection.z_score, detection.p_value, threshold=threshold, z_threshold=z_threshold)
    z = detection.z_score
    return {"p_value": float(detection.p_value), "z_score": None if z is None or not math.isfinite(z) else float(z),
            "score": float(detection.score), "num_tokens_scored": int(detection.num_tokens_scored),
            "size": sizes.get(DEFAULT_SIZE_RULE), "sizes": sizes, "detected": bool(detected)}


def _rule(evidence: Mapping[str, Any], threshold: float, z_threshold: float | None) -> str:
    """``z = 5.1 over 40 tokens (>= 4)`` or ``p = 0.001 over 40 tokens (<= 0.02)``."""
    detected = evidence["detected"]
    if z_threshold is not None and evidence["z_score"] is not None:
        return (f"z = {evidence['z_score']:.3g} over {evidence['num_tokens_scored']} tokens "
                f"({'>=' if detected else '<'} {z_threshold:g})")
    return (f"p = {evidence['p_value']:.3g} over {evidence['num_tokens_scored']} tokens "
            f"({'<=' if detected else '>'} {threshold:g})")


def _thresholds(settings: Mapping[str, Any]) -> tuple[float, float | None]:
    """``(p-value threshold, z threshold or None)`` of a pack's settings."""
    z_setting = settings.get("z_threshold")
    if z_setting is not None and (isinstance(z_setting, bool) or not isinstance(z_setting, (int, float))
                                  or not math.isfinite(z_setting)):
        raise ValueError(f"pack.toml z_threshold = {z_setting!r}: must be a finite number (WaterBench uses 4)")
    z_threshold = None if z_setting is None else float(z_setting)
    threshold = (z_tail(z_threshold) if z_threshold is not None
                 else float(settings.get("detection_threshold", DEFAULT_THRESHOLD)))
    return threshold, z_threshold


def _specs(context: GradeContext) -> list[str]:
    """The watermarks an output is detected under: its own, or (unwatermarked) every one of
    its pack and model."""
    return [context.watermark] if not is_none(context.watermark) else list(context.run_watermarks)


def prepare_detection(batch: Sequence[tuple[Mapping[str, Any], str, GradeContext]]) -> None:
    """Detect, in one batched call per watermark and vocabulary
    (:meth:`~evalrun.watermark.base.WatermarkScheme.detect_many` and
    ``prefix_p_values_many``, equal text by text to the single-text methods), everything the
    coming :func:`grade_detection` calls will ask for. Items the grader would refuse are
    left to it; a group whose batched call fails is left to the item-by-item path."""
    groups: dict[tuple[str, int, str, float, str], dict[tuple[int, ...], None]] = {}
    for _case, _output, context in batch:
        vocab_size = context.extra.get("vocab_size")
        if context.token_ids is None or not context.key or not isinstance(vocab_size, int):
            continue
        if context.token_ids and not (0 <= min(context.token_ids) and max(context.token_ids) < vocab_size):
            continue  # the detector refuses it; left out so its group's batch goes through
        try:
            threshold, _ = _thresholds(context.settings)
        except ValueError:
            continue
        for spec in _specs(context):
            groups.setdefault((spec, vocab_size, context.key, threshold, context.model), {})[context.token_ids] = None
        reference = _reference_ids(context, vocab_size)
        if reference is not None:
            groups[(context.watermark, vocab_size, context.key, threshold, context.model)][reference] = None
    prepared: dict[tuple[Any, ...], tuple[Any, dict[str, int | None]]] = {}
    for (spec, vocab_size, key, threshold, model), texts in groups.items():
        ids = list(texts)
        try:
            scheme = parse_watermark(spec)
            if scheme is None:
                continue
            kwargs = _model_kwargs(scheme, model)
            dets = scheme.detect_many(ids, key, vocab_size, **kwargs)
            prefixes = scheme.prefix_p_values_many(ids, key, vocab_size, **kwargs)
            sizes = [_sizes(p, threshold) for p in prefixes]
        except Exception:  # noqa: BLE001 - the item-by-item path raises it for its item
            continue
        for one, det, size in zip(ids, dets, sizes):
            prepared[_memo_key(spec, vocab_size, key, threshold, one, model)] = (det, size)
    _PREPARED.clear()
    _PREPARED.update(prepared)


def _reference_ids(context: GradeContext, vocab_size: int) -> tuple[int, ...] | None:
    """The reference answer's ids to detect: a watermarked output's, when the store holds them
    and they index its vocabulary (else there is no verdict on it, and metrics fall back)."""
    ids = context.reference_token_ids
    if ids is None or is_none(context.watermark) or (ids and not (0 <= min(ids) and max(ids) < vocab_size)):
        return None
    return ids


def grade_detection(case: Mapping[str, Any], output: str, context: GradeContext) -> Grade:
    """DETECTED (score 1) or NOT_DETECTED (score 0), with the detector's evidence."""
    threshold, z_threshold = _thresholds(context.settings)
    rule: dict[str, Any] = {"threshold": threshold}
    if z_threshold is not None:
        rule["z_threshold"] = z_threshold
    marked = not is_none(context.watermark)
    specs = _specs(context)
    if not specs:  # an unwatermarked output with nothing to detect: no ids or key needed
        return Grade(0.0, NOT_DETECTED, "no watermark in this pack and model to detect",
                     {**rule, "detections": {}})
    if context.token_ids is None:
        raise ValueError(f"no token ids to detect on: {context.token_note or 'the store holds none'}")
    vocab_size = context.extra.get("vocab_size")
    if not isinstance(vocab_size, int):
        raise ValueError("the stored output does not record the vocabulary size its token ids index, which "
                         "detection needs: pass --vocab-size N (or --tokenizer PATH) for outputs produced"
                         " outside evalrun")
    if not context.key:
        raise ValueError("detection needs the watermark key (--key or EVALRUN_WATERMARK_KEY)")
    found = {spec: _detect(spec, context.token_ids, context.key, vocab_size, threshold, z_threshold, context.model)
             for spec in specs}
    if marked:
        evidence = found[context.watermark]
        label = DETECTED if evidence["detected"] else NOT_DETECTED
        metadata = {**evidence, **rule}
        reference = _reference_ids(context, vocab_size)
        if reference is not None:
            verdict = _detect(context.watermark, reference, context.key, vocab_size, threshold, z_threshold,
                              context.model)
            metadata["reference_detection"] = {k: v for k, v in verdict.items() if k not in ("size", "sizes")}
        return Grade(1.0 if evidence["detected"] else 0.0, label, _rule(evidence, threshold, z_threshold), metadata)
    fired = sorted(spec for spec, ev in found.items() if ev["detected"])
    reason = (f"false positive under {', '.join(fired)}" if fired
              else f"not detected under {len(found)} watermark(s)")
    return Grade(1.0 if fired else 0.0, DETECTED if fired else NOT_DETECTED, reason,
                 {**rule, "detections": found})


def grade_with_generation_metric(case: Mapping[str, Any], output: str, context: GradeContext) -> Grade:
    """:func:`grade_detection`, with the output's generation metric (WaterBench's GM)
    against ``case["reference"]`` in the metadata: ``gm`` (None when the case's ``gm_metric``
    is ``none``) and ``gm_metric``."""
    grade = grade_detection(case, output, context)
    name = case.get("gm_metric", "none")
    if name != "none" and name not in OVERLAP_METRICS:
        raise ValueError(f"case {case.get('id')}: gm_metric {name!r} is unknown; known: "
                         f"{', '.join(['none', *OVERLAP_METRICS.names()])}")
    gm = None if name == "none" else OVERLAP_METRICS.get(name)(output, str(case.get("reference", "")))
    return Grade(grade.score, grade.label, grade.reason, {**grade.metadata, "gm": gm, "gm_metric": name})


def _grade_builtin(case: Mapping[str, Any], output: str, settings: Mapping[str, Any], context: GradeContext) -> Grade:
    return grade_detection(case, output, context)


#: ``grader = "detection"`` in pack.toml: this module's grader without a grader.py
BUILTIN = BuiltinGrader("detection", 1, _grade_builtin, (), labels=("DETECTED", "NOT_DETECTED"),
                        prepare=prepare_detection, reads_context=True)
