"""Repetition diagnostics: does a scheme's output loop?

A watermark with too little entropy to work with (``exp`` with a one-token window and no skip,
for instance) can make a model repeat itself ("four hundred four hundred ..."); its quality
then looks fine to a proxy such as perplexity and its detection is trivially strong. These
records say so, per (pack, model, watermark) over the unattacked outputs:

* ``distinct_1``, ``distinct_2``: the share of a text's word unigrams (bigrams) that are
  distinct (Li et al. 2016's distinct-n, computed per text and averaged over texts, so a long
  text does not weigh more), words being lower-cased whitespace-separated tokens;
* ``repeated_4gram_rate``: the share of a text's word 4-grams that repeat an earlier one in
  the same text (Welleck et al. 2019's rep-n with n = 4), averaged over texts.

Each carries a 95% bootstrap interval over texts. The report warns when a scheme's
``distinct_2`` is more than 15% below its model's unwatermarked outputs' (:func:`degenerate`).
"""

from __future__ import annotations

from typing import Callable, Sequence

from evalrun._util.hashing import stable_int
from evalrun._util.specs import is_none
from evalrun.metrics import stats
from evalrun.metrics.aggregates import Estimated, Row, graded

#: how far below the unwatermarked outputs' distinct-2 a scheme's may fall before the report
#: calls its outputs degenerate
DEGENERATE_DROP = 0.15


def words(text: str) -> list[str]:
    return text.lower().split()


def distinct_n(text: str, n: int) -> float | None:
    """Distinct word n-grams over all word n-grams of ``text`` (None: fewer than n words)."""
    w = words(text)
    grams = [tuple(w[i:i + n]) for i in range(len(w) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None


def repeated_ngram_rate(text: str, n: int = 4) -> float | None:
    """Share of ``text``'s word n-grams that occurred earlier in it (None: fewer than n words)."""
    share = distinct_n(text, n)
    return None if share is None else 1.0 - share


def degenerate(distinct_2: float, baseline_distinct_2: float, drop: float = DEGENERATE_DROP) -> bool:
    """Whether a scheme's distinct-2 is more than ``drop`` (relative) below the baseline's."""
    return baseline_distinct_2 > 0 and distinct_2 < (1.0 - drop) * baseline_distinct_2


def repetition_aggregate(rows: Sequence[Row], seed: int) -> list[Estimated]:
    """The records of the module docstring for an unattacked group of a detection pack."""
    if not rows or not is_none(rows[0]["attack"]) or not any(
            (r["label"] or "") in ("DETECTED", "NOT_DETECTED") for r in rows):
        return []
    texts: list[str] = [str(r.get("raw_output")) for r in rows if graded(r) and r.get("raw_output")]
    measures: dict[str, Callable[[str], float | None]] = {
        "distinct_1": lambda t: distinct_n(t, 1), "distinct_2": lambda t: distinct_n(t, 2),
        "repeated_4gram_rate": repeated_ngram_rate}
    out: list[Estimated] = []
    for metric, measure in measures.items():
        values = [v for v in map(measure, texts) if v is not None]
        if values:
            est = stats.bootstrap_mean_ci(values, seed=stable_int("metrics", seed, metric, bits=31))
            out.append((metric, est, len(values)))
    return out
