"""ROUGE-L (Lin, 2004): the longest common subsequence (LCS) of a candidate and a reference.

WaterDrum (Lu et al., App. E.3) uses ROUGE-L recall of a model's answer against the data point
it was queried with, following TOFU (Maini et al., 2024) and MUSE (Shi et al., 2025); KnowMem is
the same recall on question-answer pairs. Implemented here rather than with ``rouge-score``
(Google's reference package): that package is not installed, evalrun never downloads at run
time, and sentence-level ROUGE-L is one dynamic programme. It follows ``rouge-score``'s
``rougeL`` without stemming (its default):

* tokens: the text lower-cased, every run of characters other than ``a-z0-9`` a separator
  (``rouge_score.tokenize``; non-ASCII letters are separators there too);
* ``precision = LCS / len(candidate)``, ``recall = LCS / len(reference)``,
  ``fmeasure = 2 P R / (P + R)``; all three are 0 when either side has no tokens or nothing
  in common (``rouge_scorer._score_lcs``).

Pure: strings in, numbers out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

__all__ = ["RougeL", "lcs_length", "rouge_l", "rouge_tokens"]

_SEPARATORS = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class RougeL:
    """ROUGE-L of one candidate against one reference."""

    precision: float
    recall: float
    fmeasure: float


def rouge_tokens(text: str) -> list[str]:
    """``rouge-score``'s default tokens: lower-cased ASCII alphanumeric runs."""
    return [t for t in _SEPARATORS.split(text.lower()) if t]


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of ``a`` and ``b`` (two-row dynamic
    programme, O(len(a) len(b)) time, O(len(b)) memory)."""
    if len(b) > len(a):
        a, b = b, a
    if not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def rouge_l(reference: str, candidate: str) -> RougeL:
    """ROUGE-L precision, recall and F1 of ``candidate`` (the model's answer) against
    ``reference`` (the data point); see the module docstring for the conventions."""
    ref, cand = rouge_tokens(reference), rouge_tokens(candidate)
    lcs = lcs_length(ref, cand)
    if not lcs:
        return RougeL(0.0, 0.0, 0.0)
    p, r = lcs / len(cand), lcs / len(ref)
    return RougeL(p, r, 2 * p * r / (p + r))
