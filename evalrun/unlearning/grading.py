"""The ``waterdrum`` pack's grader: verify the case owner's Waterfall key on the output.

WaterDrum (section 4, P3 and App. E.3) scores the model's text output *without* the
query with the owner's Waterfall verification operator; that q-score (the mean of
``cos(2 pi k_p index / V)`` over the scored tokens, :mod:`evalrun.watermark.schemes.waterfall`) is the
unlearning metric of one data point. The grade keeps it in ``metadata["verification_score"]``
with the p-value of the normal null, tokens scored, the owner and the case's set; the
aggregates (:mod:`evalrun.unlearning.aggregates`) average it. The label is VERIFIED when the
p-value is at most the pack's ``detection_threshold``; the score is 1 then, else 0 (a low
score is a result: for a forget-set case on a well-unlearned model it is the goal).

Pure: it reads the stored token ids and the pack's settings only. The owner's Waterfall id
comes from :func:`evalrun.unlearning.keys.owner_waterfall_id` (the run's secret key, when
given, never appears in the metadata).
"""

from __future__ import annotations

from typing import Any, Mapping

from evalrun.pack.grade import Grade, GradeContext
from evalrun.unlearning.keys import key_source, owner_waterfall_id
from evalrun.watermark.schemes.waterfall import DEFAULT_K_P, DEFAULT_N_GRAM, Waterfall

VERIFIED = "VERIFIED"
NOT_VERIFIED = "NOT_VERIFIED"
DEFAULT_THRESHOLD = 0.05


def verifier(settings: Mapping[str, Any]) -> Any:
    """The Waterfall scheme the pack verifies with (``k_p``, ``n_gram`` of pack.toml)."""
    return Waterfall(k_p=int(settings.get("k_p", DEFAULT_K_P)),
                     n_gram=int(settings.get("n_gram", DEFAULT_N_GRAM)))


def grade_verification(case: Mapping[str, Any], output: str, context: GradeContext) -> Grade:
    """VERIFIED (1) / NOT_VERIFIED (0) with the verification score as evidence."""
    if context.token_ids is None:
        raise ValueError(f"no token ids to verify on: {context.token_note or 'the store holds none'}")
    vocab_size = context.extra.get("vocab_size")
    if not isinstance(vocab_size, int):
        raise ValueError("the stored output does not record its model's vocab_size, which "
                         "Waterfall verification needs")
    settings = context.settings
    threshold = float(settings.get("detection_threshold", DEFAULT_THRESHOLD))
    owner = int(case["owner"])
    wid = owner_waterfall_id(owner, context.key)
    det = verifier(settings).detect(context.token_ids, str(wid), vocab_size)
    ok = det.num_tokens_scored > 0 and det.p_value <= threshold
    meta = {"verification_score": float(det.score), "p_value": float(det.p_value),
            "z_score": None if det.z_score is None else float(det.z_score),
            "num_tokens_scored": int(det.num_tokens_scored), "owner": owner,
            "set": str(case["set"]), "threshold": threshold,
            "key_source": key_source(context.key)}
    reason = (f"owner {owner}: q = {det.score:.4f}, p = {det.p_value:.3g} over "
              f"{det.num_tokens_scored} tokens")
    return Grade(1.0 if ok else 0.0, VERIFIED if ok else NOT_VERIFIED, reason, meta)
