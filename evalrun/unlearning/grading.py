"""The ``waterdrum`` pack's grader: verify the case owner's watermark on the output.

WaterDrum (section 4, P3 and App. E.3) scores the model's text output *without* the
query with the owner's verification operator; that value is the unlearning metric of one
data point. With Waterfall (the default) it is the q-score (the mean of
``cos(2 pi k_p index / V)`` over the scored tokens, :mod:`evalrun.watermark.schemes.waterfall`);
pack.toml's ``owner_watermark`` may name another scheme adapted to many owners
(:mod:`evalrun.unlearning.owner_watermarks`: KGW's z-score, SynthID's mean g-value,
EXP-edit's alignment score; WaterDrum Table 4). The grade keeps the value in
``metadata["verification_score"]`` with the p-value of the scheme's null, tokens scored, the
owner and the case's set; the aggregates (:mod:`evalrun.unlearning.aggregates`) average it.
The label is VERIFIED when the p-value is at most the pack's ``detection_threshold``; the
score is 1 then, else 0 (a low score is a result: for a forget-set case on a well-unlearned
model it is the goal).

Pure: it reads the stored token ids and the pack's settings only. The owner's id comes from
:func:`evalrun.unlearning.keys.owner_waterfall_id` (the run's secret key, when given, never
appears in the metadata).
"""

from __future__ import annotations

from typing import Any, Mapping

from evalrun.pack.grade import Grade, GradeContext
from evalrun.unlearning.keys import key_source
from evalrun.unlearning.owner_watermarks import OwnerWatermark, owner_watermark
from evalrun.watermark.schemes.waterfall import DEFAULT_K_P, DEFAULT_N_GRAM

VERIFIED = "VERIFIED"
NOT_VERIFIED = "NOT_VERIFIED"
DEFAULT_THRESHOLD = 0.05


def verifier_spec(settings: Mapping[str, Any]) -> str:
    """The spec the pack verifies with: ``owner_watermark`` of pack.toml, else Waterfall with
    pack.toml's ``k_p`` and ``n_gram`` (the pack's settings before ``owner_watermark``)."""
    spec = settings.get("owner_watermark")
    if isinstance(spec, str) and spec.strip():
        return spec
    return (f"waterfall:k_p={int(settings.get('k_p', DEFAULT_K_P))},"
            f"n_gram={int(settings.get('n_gram', DEFAULT_N_GRAM))}")


def verifier(settings: Mapping[str, Any]) -> OwnerWatermark:
    """The owner-keyed scheme the pack verifies with (see :func:`verifier_spec`)."""
    return owner_watermark(verifier_spec(settings), what="owner_watermark")


def grade_verification(case: Mapping[str, Any], output: str, context: GradeContext) -> Grade:
    """VERIFIED (1) / NOT_VERIFIED (0) with the verification value as evidence."""
    if context.token_ids is None:
        raise ValueError(f"no token ids to verify on: {context.token_note or 'the store holds none'}")
    vocab_size = context.extra.get("vocab_size")
    if not isinstance(vocab_size, int):
        raise ValueError("the stored output does not record its model's vocab_size, which "
                         "watermark verification needs")
    settings = context.settings
    threshold = float(settings.get("detection_threshold", DEFAULT_THRESHOLD))
    owner = int(case["owner"])
    marked = verifier(settings)
    value, det = marked.verify(context.token_ids, owner, context.key, vocab_size)
    ok = det.num_tokens_scored > 0 and det.p_value <= threshold
    meta = {"verification_score": value, "p_value": float(det.p_value),
            "z_score": None if det.z_score is None else float(det.z_score),
            "num_tokens_scored": int(det.num_tokens_scored), "owner": owner,
            "set": str(case["set"]), "threshold": threshold,
            "owner_watermark": marked.scheme.spec.name, "value": marked.adapter.value_name,
            "key_source": key_source(context.key)}
    reason = (f"owner {owner}: {marked.adapter.value_name} {value:.4f}, p = {det.p_value:.3g} over "
              f"{det.num_tokens_scored} tokens")
    return Grade(1.0 if ok else 0.0, VERIFIED if ok else NOT_VERIFIED, reason, meta)
