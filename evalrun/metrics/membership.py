"""Membership-inference scores from a model's token log-likelihoods: Min-K% Prob and Min-K%++.

WaterDrum's MIA baseline (Lu et al., App. E.3) is Min-K% Prob (Shi et al., 2024, "Detecting
pretraining data from large language models") with K = 40: the mean log-likelihood of the K%
of a text's tokens the model finds least likely; a text seen in training has few surprising
tokens, so a *higher* score says "member". Min-K%++ (Zhang et al., 2025, "Min-K%++: improved
baseline for detecting pre-training data from large language models") standardises each
token's log-likelihood by the mean and standard deviation of the log-likelihood under the
model's own next-token distribution at that position, before taking the same lowest-K% mean:

    z_t = (log p(x_t) - mu_t) / sigma_t,   mu_t = E_{z~p}[log p(z)],
    sigma_t^2 = E_{z~p}[(log p(z))^2] - mu_t^2.

Conventions (the reference implementations' where they have one): the number of tokens kept
is ``int(n * k)`` as there, but at least 1, so that a short text still gets a score; a
position whose distribution is a point mass (sigma = 0) contributes z = 0; an empty text
scores NaN. The set-level aggregate is :func:`mia_aggregate`: WaterDrum reports "1 - 2 x
AUROC" of forget vs holdout scores while calling it "close to 1 for no unlearning and 0 for
perfect unlearning", which only ``2 x AUROC - 1`` is; that is what is computed.

Pure: numpy arrays in (``logits`` of shape ``[n - 1, V]`` where row t predicts ``ids[t + 1]``,
as :meth:`evalrun.model.token_logits.ModelLogits.__call__` gives them), numbers out.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from evalrun.metrics.detection import auroc

__all__ = ["DEFAULT_K", "mia_aggregate", "min_k_percent", "min_k_plus_plus", "token_log_probs"]

#: WaterDrum App. E.3: "MIN-K% PROB attack with kappa = 40"
DEFAULT_K = 0.4


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"logits must be a [positions, vocab] array, got shape {x.shape}")
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _targets(logits: np.ndarray, ids: Sequence[int]) -> np.ndarray:
    targets = np.asarray(ids, dtype=np.int64)[1:]
    if targets.shape[0] != np.shape(logits)[0]:
        raise ValueError(f"{len(ids)} token ids need {max(len(ids) - 1, 0)} logit rows, "
                         f"got {np.shape(logits)[0]}")
    return targets


def token_log_probs(logits: np.ndarray, ids: Sequence[int]) -> np.ndarray:
    """``log p(ids[t + 1] | ids[:t + 1])`` for each row t of ``logits``."""
    targets = _targets(logits, ids)
    logp = _log_softmax(logits)
    return logp[np.arange(targets.shape[0]), targets]


def _lowest_mean(values: np.ndarray, k: float) -> float:
    if not 0 < k <= 1:
        raise ValueError(f"k must lie in (0, 1], got {k}")
    if values.size == 0:
        return math.nan
    count = max(1, int(values.size * k))
    return float(np.sort(values)[:count].mean())


def min_k_percent(log_probs: Sequence[float] | np.ndarray, k: float = DEFAULT_K) -> float:
    """Min-K% Prob: the mean of the lowest ``k`` share of the token log-likelihoods."""
    return _lowest_mean(np.asarray(log_probs, dtype=np.float64), k)


def min_k_plus_plus(logits: np.ndarray, ids: Sequence[int], k: float = DEFAULT_K) -> float:
    """Min-K%++: the mean of the lowest ``k`` share of the standardised token
    log-likelihoods ``z_t`` (module docstring)."""
    targets = _targets(logits, ids)
    logp = _log_softmax(logits)
    p = np.exp(logp)
    mu = (p * logp).sum(axis=1)
    var = np.clip((p * logp * logp).sum(axis=1) - mu * mu, 0.0, None)
    sigma = np.sqrt(var)
    own = logp[np.arange(targets.shape[0]), targets]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sigma > 0, (own - mu) / np.where(sigma > 0, sigma, 1.0), 0.0)
    return _lowest_mean(z, k)


def mia_aggregate(member_scores: Sequence[float], holdout_scores: Sequence[float]) -> float:
    """WaterDrum's aggregate MIA value of a set: ``2 AUROC - 1`` of its scores against a
    holdout set the model never saw (1: fully separable, no unlearning; 0: perfect
    unlearning); NaN when either sample is empty."""
    return 2.0 * auroc(member_scores, holdout_scores) - 1.0
