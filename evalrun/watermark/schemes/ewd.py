"""EWD (Lu et al., "An Entropy-based Text Watermarking Detection Method", ACL 2024): KGW's
generation, detected with each token weighted by the spike entropy of the model's distribution
at its position; ``ewd:gamma=...,delta=...``. The implementation followed is MarkLLM's
(THU-BPM/MarkLLM at 112fa74, ``watermark/ewd/ewd.py``, ``config/EWD.json``).

Parameters and defaults (MarkLLM's config): ``gamma`` 0.5, ``delta`` 2.0, ``prefix_length`` 1,
``z_threshold`` 4.0 (MarkLLM's decision threshold, reported only), ``compat`` none or markllm
(green lists: :mod:`evalrun.watermark.schemes.entropy_green`). Generation is KGW's: ``delta`` added to
every green logit.

Detection reads the model (``needs_model``: ``evalrun detect --model SPEC``; in a run, the
generating model). Position t's spike entropy is ``SE_t = sum_v p_v / (1 + zeta p_v)`` over the
model's distribution after ``ids[:t]`` (the text alone), with ``zeta = (1 - gamma)(e^delta - 1)
/ (1 - gamma + gamma e^delta)``, in float32 as MarkLLM. A position's weight is ``w_t = SE_t -
min SE`` (the minimum over positions ``t >= prefix_length`` of the text, so the least uncertain
position weighs 0).

* ``extra["markllm_score"]`` (compat mode): MarkLLM's weighted z ``(sum_green w - gamma sum w)
  / sqrt(gamma (1 - gamma) sum w^2)`` over every position ``t >= prefix_length``, repeats
  included, in MarkLLM's float32.
* evalrun's p-value (a stated null, not an exact one): over the first occurrences of the null
  units (:mod:`evalrun.watermark.schemes.entropy_green`), the weights are fixed by the text and the
  model and each unit is green independently with the exact probability p, so
  ``S = sum_green w`` has mean ``p sum w`` and variance ``p (1 - p) sum w^2`` exactly; the
  p-value is the normal tail of ``z = (S - p sum w) / sqrt(p (1 - p) sum w^2)`` (the score
  and ``z_score``; p = 1 and z = 0 when every weight is 0). The normal shape is an
  approximation (a weighted sum of Bernoullis); the tests check its false-positive rate at
  0.02 on unwatermarked text.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from evalrun._util.specs import Spec, check_keys
from evalrun.watermark.base import Detection, TokenLogits
from evalrun.watermark.engine import nulls
from evalrun.watermark.schemes.entropy_green import WHAT, EntropyGreenScheme, canonical, common_params

NAME = "ewd"
DEFAULTS: dict[str, float] = {"gamma": 0.5, "delta": 2.0, "prefix_length": 1, "z_threshold": 4.0}
ALLOWED_KEYS = frozenset(DEFAULTS) | {"compat"}


def weighted_z(weights: np.ndarray, green: np.ndarray, p: float) -> float | None:
    """``(sum of green weights - p sum w) / sqrt(p (1 - p) sum w^2)`` in float64; None when
    every weight is 0 (no evidence either way)."""
    w = np.asarray(weights, dtype=np.float64)
    var = p * (1.0 - p) * float(np.dot(w, w))
    if not var > 0:
        return None
    return (float(w[green].sum()) - p * float(w.sum())) / math.sqrt(var)


def _p_of(z: float | None) -> float:
    """The normal tail of a weighted z; 1 without evidence."""
    return 1.0 if z is None else float(nulls.normal_p(np.array([z]))[0])


class EWD(EntropyGreenScheme):
    """KGW generation, spike-entropy-weighted detection (MarkLLM's EWD)."""

    name = NAME
    model_use = "EWD's spike entropies"

    def zeta(self) -> float:
        """MarkLLM's ``z_value``: e^delta through float32, the rest in double."""
        import torch

        alpha = torch.exp(torch.tensor(self.delta)).item()
        return ((1 - self.gamma) * (alpha - 1)) / (1 - self.gamma + (alpha * self.gamma))

    def position_stats(self, rows: np.ndarray) -> np.ndarray:
        import torch

        probs = torch.softmax(torch.from_numpy(np.ascontiguousarray(rows)), dim=-1)
        spike = (probs / (1 + self.zeta() * probs)).sum(dim=-1)
        return spike.numpy().astype(np.float64)

    def _weights(self, spike: np.ndarray, upto: int) -> np.ndarray:
        """``SE_t - min SE`` over positions ``prefix_length <= t < upto`` (float32, as MarkLLM)."""
        k = self.prefix_length
        se = spike[k:upto].astype(np.float32)
        return (se - se.min()).astype(np.float64) if len(se) else np.zeros(0)

    def _markllm_score(self, weights: np.ndarray, green: np.ndarray) -> float | None:
        """MarkLLM's ``_compute_z_score``: the green weight summed in double, the rest float32;
        None where every weight is 0 (MarkLLM divides 0 by 0 and returns NaN, not JSON)."""
        import torch

        observed = sum(float(w) for w, g in zip(weights, green) if g)
        w = torch.tensor(weights, dtype=torch.float)
        numer = observed - self.gamma * torch.sum(w)
        denom = torch.sqrt(torch.sum(torch.square(w)) * self.gamma * (1 - self.gamma))
        if not float(denom) > 0:
            return None
        return float((numer / denom).item())

    def _z(self, spike: np.ndarray, green: np.ndarray, units: np.ndarray, upto: int,
           p_green: float) -> tuple[float | None, int]:
        """evalrun's weighted z of the prefix ``[:upto]`` and its number of units."""
        k = self.prefix_length
        w = self._weights(spike, upto)
        sel = units[k:upto]
        return weighted_z(w[sel], green[k:upto][sel], p_green), int(sel.sum())

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int, *,
               logits: TokenLogits | None = None) -> Detection:
        ids, spike, green, first = self.inputs(token_ids, key, vocab_size, logits)
        n_all, k = len(ids), self.prefix_length
        p_green = self.green_probability(vocab_size)
        z, n = self._z(spike, green, first, n_all, p_green)
        p = _p_of(z)
        extra: dict[str, Any] = {"green_probability": p_green,
                                 "num_green_tokens_weighted": 0.0, "weight_sum": 0.0}
        if n_all > k:
            w = self._weights(spike, n_all)
            sel = first[k:]
            extra["weight_sum"] = float(w[sel].sum())
            extra["num_green_tokens_weighted"] = float(w[sel & green[k:]].sum())
            if self.compat == "markllm":
                markllm = self._markllm_score(w, green[k:])
                extra["markllm_score"] = markllm
                extra["markllm_is_watermarked"] = markllm is not None and markllm > self.z_threshold
        g = int((first & green).sum())
        score = 0.0 if z is None else z
        return Detection(num_tokens_scored=n, score=score, p_value=p, num_green_tokens=g, z_score=score,
                         extra=extra)

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int, *,
                        logits: TokenLogits | None = None) -> np.ndarray:
        ids, spike, green, first = self.inputs(token_ids, key, vocab_size, logits)
        p_green = self.green_probability(vocab_size)
        out = np.ones(len(ids), dtype=np.float64)
        for i in range(self.prefix_length, len(ids)):
            out[i] = _p_of(self._z(spike, green, first, i + 1, p_green)[0])
        return out


def build(spec: Spec) -> EWD:
    """Validate ``ewd:...`` and fill MarkLLM's defaults (module docstring)."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    common = common_params(spec, defaults=DEFAULTS)
    return EWD(canonical(NAME, common), **common)
