"""Truth Ratio (TOFU, Maini et al., 2024), a WaterDrum baseline on question-answer data.

For a question q, a paraphrase a~ of its correct answer and perturbed (wrong) answers a^_i,
with every probability normalised by the answer's length (``P(a | q)^(1 / |a|)``, i.e. the
exponent of minus the mean per-token negative log-likelihood):

    R_truth = mean_i P(a^_i | q)^(1/|a^_i|) / P(a~ | q)^(1/|a~|)

TOFU's code (``aggregate_eval_stat``) averages the perturbed answers' *log* probabilities, a
geometric mean; so does :func:`truth_ratio`. A model that knows the answer makes R small;
:func:`truth_score` is TOFU's reported per-question value ``max(0, 1 - R_truth)`` (higher:
the model prefers the truth), the form WaterDrum scales to 1.0 on the original model.

Inputs are mean per-token negative log-likelihoods (what the ``hf``/``embedded`` providers'
``perplexities`` return); pure.
"""

from __future__ import annotations

import math
from typing import Sequence

__all__ = ["truth_ratio", "truth_score"]


def truth_ratio(paraphrased_nll: float, perturbed_nlls: Sequence[float]) -> float:
    """``R_truth`` from the mean per-token NLL of the paraphrased correct answer and of each
    perturbed answer; NaN without perturbed answers."""
    if not perturbed_nlls:
        return math.nan
    values = [paraphrased_nll, *perturbed_nlls]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"negative log-likelihoods must be finite, got {values}")
    mean_perturbed = sum(perturbed_nlls) / len(perturbed_nlls)
    return math.exp(paraphrased_nll - mean_perturbed)


def truth_score(ratio: float) -> float:
    """TOFU's per-question Truth Ratio value ``max(0, 1 - R_truth)``."""
    return max(0.0, 1.0 - ratio)
