"""SWEET (Lee et al., "Who Wrote this Code? Watermarking for Code Generation", ACL 2024):
KGW's green-list bias applied, and counted, only where the model is uncertain;
``sweet:gamma=...,delta=...,entropy_threshold=...``. The implementation followed is MarkLLM's
(THU-BPM/MarkLLM at 112fa74, ``watermark/sweet/sweet.py``, ``config/SWEET.json``).

Parameters and defaults (MarkLLM's config): ``gamma`` 0.5, ``delta`` 2.0,
``entropy_threshold`` 0.9 (nats), ``prefix_length`` 1, ``z_threshold`` 4.0 (MarkLLM's decision
threshold, reported only), ``compat`` none or markllm (green lists: see
:mod:`evalrun.watermark.schemes.entropy_green`).

Generation: at each step, the Shannon entropy of the softmax of the raw scores (before the
temperature); when it exceeds ``entropy_threshold``, ``delta`` is added to the green logits.

Detection reads the model (``needs_model``: ``evalrun detect --model SPEC``; in a run, the
generating model): position t's entropy is that of the model's distribution after
``ids[:t]``, the text alone (no prompt), in float32 as MarkLLM computes it. Positions
``t >= prefix_length`` whose entropy exceeds the threshold are scored.

* ``extra["markllm_score"]`` (compat mode): MarkLLM's z ``(G - gamma T) / sqrt(T gamma (1 -
  gamma))`` over all scored positions, repeats included (MarkLLM raises when none is
  scored; evalrun then leaves the field out).
* evalrun's p-value: the scored positions that are the first occurrence of their null unit
  (:mod:`evalrun.watermark.schemes.entropy_green`); which positions those are depends on the text and
  the model, not on the key, so the green count G of the n units is exactly
  Binomial(n, p) with p the exact green probability (``gamma`` up to 2**-53 natively,
  ``int(V gamma) / V`` in compat mode); score and ``z_score`` are ``(G - p n) / sqrt(n p (1 -
  p))``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from evalrun._util.specs import Spec, check_keys, spec_float
from evalrun.watermark.base import Detection, TokenLogits
from evalrun.watermark.engine import nulls
from evalrun.watermark.schemes.entropy_green import WHAT, EntropyGreenScheme, canonical, common_params

NAME = "sweet"
DEFAULTS: dict[str, float] = {"gamma": 0.5, "delta": 2.0, "entropy_threshold": 0.9, "prefix_length": 1,
                              "z_threshold": 4.0}
ALLOWED_KEYS = frozenset(DEFAULTS) | {"compat"}


def shannon_entropy(rows: Any) -> Any:
    """Entropy in nats of the softmax of each row (torch, in the rows' dtype; ``0 log 0 = 0``)."""
    import torch

    probs = torch.softmax(rows, dim=-1)
    return -torch.where(probs > 0, probs * probs.log(), probs.new_zeros(())).sum(dim=-1)


class SWEET(EntropyGreenScheme):
    """KGW restricted to high-entropy positions (MarkLLM's SWEET)."""

    name = NAME
    model_use = "SWEET's entropies"

    def __init__(self, spec: Spec, *, entropy_threshold: float, **common: Any) -> None:
        super().__init__(spec, **common)
        self.entropy_threshold = entropy_threshold

    def position_stats(self, rows: np.ndarray) -> np.ndarray:
        import torch

        return shannon_entropy(torch.from_numpy(np.ascontiguousarray(rows))).numpy().astype(np.float64)

    def gate(self, scores: Any) -> Any:
        return (shannon_entropy(scores) > self.entropy_threshold).view(-1, 1)

    def _units(self, token_ids: Sequence[int], key: str, vocab_size: int,
               logits: TokenLogits | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(scored with repeats, evalrun's units, green) per position."""
        ids, entropy, green, first = self.inputs(token_ids, key, vocab_size, logits)
        scored = np.zeros(len(ids), dtype=bool)
        scored[self.prefix_length:] = entropy[self.prefix_length:] > self.entropy_threshold
        return scored, scored & first, green

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int, *,
               logits: TokenLogits | None = None) -> Detection:
        scored, units, green = self._units(token_ids, key, vocab_size, logits)
        p_green = self.green_probability(vocab_size)
        n, g = int(units.sum()), int((units & green).sum())
        z = float(nulls.z_scores(np.array([g]), np.array([n]), p_green)[0])
        p = float(nulls.binomial_p(np.array([g]), np.array([n]), p_green)[0])
        total, green_all = int(scored.sum()), int((scored & green).sum())
        extra: dict[str, Any] = {"green_fraction": g / n if n else 0.0, "green_probability": p_green,
                                 "positions_with_repeats": total, "green_with_repeats": green_all}
        if self.compat == "markllm" and total >= 1:
            markllm = float(nulls.z_scores(np.array([green_all]), np.array([total]), self.gamma)[0])
            extra["markllm_score"] = markllm
            extra["markllm_is_watermarked"] = bool(markllm > self.z_threshold)
        return Detection(num_tokens_scored=n, score=z, p_value=p, num_green_tokens=g, z_score=z, extra=extra)

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int, *,
                        logits: TokenLogits | None = None) -> np.ndarray:
        _scored, units, green = self._units(token_ids, key, vocab_size, logits)
        totals = np.cumsum(units, dtype=np.int64)
        counts = np.cumsum(units & green, dtype=np.int64)
        return np.asarray(nulls.binomial_p(counts, totals, self.green_probability(vocab_size)), dtype=np.float64)


def build(spec: Spec) -> SWEET:
    """Validate ``sweet:...`` and fill MarkLLM's defaults (module docstring)."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    common = common_params(spec, defaults=DEFAULTS)
    threshold = spec_float(spec, "entropy_threshold", DEFAULTS["entropy_threshold"], what=WHAT, lo=0.0)
    canon = canonical(NAME, {**common, "entropy_threshold": threshold})
    return SWEET(canon, entropy_threshold=threshold, **common)
