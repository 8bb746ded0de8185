"""The one detection decision: DETECTED or NOT_DETECTED from a detector's evidence, and the
size rules that say when a text's prefixes first show its watermark.

The shared detection grader, ``evalrun tune`` and the benchmark aggregates all decide with
:func:`is_detected`, so a stored grade and a recomputed aggregate can never disagree.

A text's *size* (MarkMyWords IV-B) is the length of its first prefix judged watermarked. Looking
at every prefix of an n-token text is n tests, so the rule for "judged watermarked" decides how
often an unwatermarked text gets a finite size. The rules (:data:`SIZE_RULES`, registered by
name; an entry maps ``(n, alpha)`` to the p-value threshold of each prefix length 1..n):

* ``alpha_spending`` (the default): prefix t of an n-token text is detected when its p-value
  is at most ``alpha / (t * H_n)``, ``H_n = 1 + 1/2 + ... + 1/n``. The thresholds sum to
  ``alpha``, so by the union bound an unwatermarked text crosses at *any* prefix with
  probability at most ``alpha``, whatever the dependence between prefixes, for every detector
  whose prefix p-values are valid. The weights fall as 1/t: most of the budget goes to short
  prefixes, where a size is decided.
* ``first_crossing``: MarkMyWords' definition, the first prefix with ``p <= alpha``. Every prefix
  is tested at ``alpha``, so an unwatermarked text gets a finite size far more often than
  ``alpha`` (9-16% of random texts at ``alpha = 0.02`` for the schemes measured).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from evalrun._util.checks import check_p_threshold, p_value_array
from evalrun._util.registry import Registry

DETECTED = "DETECTED"
NOT_DETECTED = "NOT_DETECTED"
#: the p-value threshold of MarkMyWords, used when a pack does not set its own
DEFAULT_THRESHOLD = 0.02

#: a size rule: ``(n, alpha) -> thresholds`` of the prefixes of lengths 1..n (float64, shape [n])
SizeRule = Callable[[int, float], np.ndarray]
SIZE_RULES: Registry[SizeRule] = Registry("size rule", "evalrun.size_rules", option="size_rule")
#: the rule of the ``size`` a grade stores and of the report's watermark size
DEFAULT_SIZE_RULE = "alpha_spending"
#: MarkMyWords' rule: every prefix at the detection threshold
FIRST_CROSSING = "first_crossing"


@SIZE_RULES.register(DEFAULT_SIZE_RULE)
def alpha_spending(n: int, alpha: float) -> np.ndarray:
    """``alpha / (t * H_n)`` for t = 1..n: thresholds summing to ``alpha`` (module docstring)."""
    t = np.arange(1, n + 1, dtype=np.float64)
    return alpha / (t * float(np.sum(1.0 / t)))


@SIZE_RULES.register(FIRST_CROSSING)
def first_crossing(n: int, alpha: float) -> np.ndarray:
    """``alpha`` at every prefix (MarkMyWords IV-B as its code applies it)."""
    return np.full(n, float(alpha))


def z_tail(z: float) -> float:
    """The one-sided normal tail ``1 - Phi(z)``: the p-value a z-score threshold stands for."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def is_detected(z_score: float | None, p_value: float, *, threshold: float, z_threshold: float | None = None) -> bool:
    """The one detection rule: ``z_score >= z_threshold`` when both exist, else ``p_value <=
    threshold`` (the grader and ``evalrun tune`` both decide with it)."""
    if z_threshold is not None and z_score is not None:
        return math.isfinite(z_score) and z_score >= z_threshold
    return p_value <= threshold


def first_detected_prefix(p_values: Sequence[float], threshold: float = DEFAULT_THRESHOLD,
                          rule: str = DEFAULT_SIZE_RULE) -> int | None:
    """Length in tokens of the shortest prefix the size ``rule`` detects at level ``threshold``
    (``first_crossing``: ``p <= threshold``); None if none is.

    ``p_values[i]`` is the p-value of the first ``i + 1`` tokens (as
    ``WatermarkScheme.prefix_p_values`` returns them), so the answer is ``i + 1`` for the first
    such ``i``. NaN or out-of-range p-values are errors, not "undetected".
    """
    check_p_threshold(threshold)
    p = p_value_array(p_values)
    hits = np.flatnonzero(p <= SIZE_RULES.get(rule)(len(p), threshold))
    return int(hits[0]) + 1 if hits.size else None


def sizes_by_rule(p_values: Sequence[float], threshold: float = DEFAULT_THRESHOLD) -> dict[str, int | None]:
    """:func:`first_detected_prefix` under every registered size rule (what a grade stores)."""
    return {rule: first_detected_prefix(p_values, threshold, rule) for rule in SIZE_RULES.names()}
