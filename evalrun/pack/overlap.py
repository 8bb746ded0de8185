"""Reference-overlap generation metrics (WaterBench's GM, Tu et al. sections 3.3-3.4, which
takes them from LongBench): token F1 for short answers and ROUGE-L F1 for long ones. Pure.

Both compare normalised word tokens: lower-cased, punctuation removed, the articles "a", "an"
and "the" dropped (SQuAD's normalisation, which LongBench's F1 uses). ROUGE-L's F1 is the
harmonic mean of the longest common subsequence's precision and recall (Lin 2004, beta = 1).
An empty prediction or reference scores 0.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Callable

from evalrun._util.registry import Registry

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "\u2018\u2019\u201c\u201d\u2013\u2014")


def normalise_tokens(text: str) -> list[str]:
    """Lower-case words without punctuation or articles."""
    return _ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split()


def _f1(overlap: int, n_pred: int, n_ref: int) -> float:
    if overlap == 0 or n_pred == 0 or n_ref == 0:
        return 0.0
    precision, recall = overlap / n_pred, overlap / n_ref
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, reference: str) -> float:
    """F1 of the two texts' bags of normalised tokens."""
    pred, ref = normalise_tokens(prediction), normalise_tokens(reference)
    overlap = sum((Counter(pred) & Counter(ref)).values())
    return _f1(overlap, len(pred), len(ref))


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, O(len(a) len(b)))."""
    if len(a) < len(b):
        a, b = b, a
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, 1):
            cur = row[j]
            row[j] = prev + 1 if x == y else max(row[j], row[j - 1])
            prev = cur
    return row[-1]


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 over normalised tokens."""
    pred, ref = normalise_tokens(prediction), normalise_tokens(reference)
    return _f1(lcs_length(pred, ref), len(pred), len(ref))


#: name (a pack case's ``gm_metric``) -> metric; third-party ones through the
#: ``evalrun.overlap_metrics`` entry-point group
OVERLAP_METRICS: Registry[Callable[[str, str], float]] = Registry(
    "overlap metric", "evalrun.overlap_metrics", option="gm_metric")
OVERLAP_METRICS.register("f1", token_f1)
OVERLAP_METRICS.register("rouge_l", rouge_l)
