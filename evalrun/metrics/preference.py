"""Pairwise judge aggregates (Singh & Zou, sections 3.1-3.3, Figs. 2-3): pure.

Every function takes *outcomes*: for one pair (a watermarked text and its baseline), each
parsed answer of a judge says which text it preferred -- :data:`WATERMARKED`,
:data:`BASELINE` or :data:`TIE` -- regardless of the order the texts were shown in.

* :func:`preference_shares` -- the share of pairs preferring each side and ties (Singh & Zou
  Fig. 2a). A pair asked in both orders counts once, each of its answers with weight 1/2, so
  a judge that always picks the first text comes out at 50/50 in either design. With one
  answer per pair the intervals are Wilson's; with any pair asked twice, a bootstrap over
  pairs (answers of one pair are not independent).
* :func:`position_consistency` -- among pairs answered in both orders, the share whose two
  answers agree on the text (or both tie); a judge that always answers ``[[A]]`` scores 0.
* :func:`first_position_rate` -- the share of decisive answers (not ties) that picked the
  text shown first; 0.5 means no position bias.
* :func:`agreement` -- the share of common pairs two judges (or two prompts) decide the same
  way (Singh & Zou Fig. 3b: "the percentage of classifications that were the same").
* :func:`criterion_means` -- the mean Likert score of a side per criterion (Fig. 2b), with a
  bootstrap interval over answers.
"""

from __future__ import annotations

import math
from typing import Hashable, Mapping, Sequence, TypeVar

import numpy as np

from evalrun.metrics import stats

WATERMARKED = "watermarked"
BASELINE = "baseline"
TIE = "tie"
SIDES = (BASELINE, WATERMARKED, TIE)
#: a pair's key (any hashable; both judges' outcomes use the same kind)
K = TypeVar("K", bound=Hashable)


def _check(outcome: str) -> str:
    if outcome not in SIDES:
        raise ValueError(f"outcome must be one of {SIDES}, got {outcome!r}")
    return outcome


def preference_shares(pairs: Sequence[Sequence[str]], *, seed: int) -> dict[str, stats.Estimate]:
    """side -> share of pairs preferring it (see the module docstring). ``pairs`` holds each
    pair's parsed outcomes (pairs without any are left out by the caller)."""
    pairs = [[_check(o) for o in p] for p in pairs if len(p)]
    if not pairs:
        nan = stats.Estimate(math.nan, math.nan, math.nan)
        return {side: nan for side in SIDES}
    if all(len(p) == 1 for p in pairs):
        return {side: stats.wilson_interval(sum(p[0] == side for p in pairs), len(pairs)) for side in SIDES}
    out = {}
    for side in SIDES:
        per_pair = [sum(o == side for o in p) / len(p) for p in pairs]
        out[side] = stats.bootstrap_mean_ci(per_pair, seed=seed)
    return out


def position_consistency(answers: Sequence[tuple[str, str]]) -> stats.Estimate:
    """Share of pairs whose answers in the two orders agree; ``answers`` holds one
    ``(outcome shown one way, outcome shown the other way)`` per pair asked both ways."""
    same = sum(_check(a) == _check(b) for a, b in answers)
    return stats.wilson_interval(same, len(answers))


def first_position_rate(picked_first: Sequence[bool]) -> stats.Estimate:
    """Share of decisive answers that picked the text shown first (position A)."""
    return stats.wilson_interval(sum(bool(x) for x in picked_first), len(picked_first))


def agreement(a: Mapping[K, str], b: Mapping[K, str]) -> tuple[stats.Estimate, int]:
    """``(share of common pairs decided alike, number of common pairs)`` for two judges'
    outcomes keyed by pair."""
    common = sorted(set(a) & set(b), key=repr)
    same = sum(_check(a[k]) == _check(b[k]) for k in common)
    return stats.wilson_interval(same, len(common)), len(common)


def criterion_means(scores: Sequence[float | None], *, seed: int) -> tuple[stats.Estimate, int]:
    """``(mean score with a bootstrap 95% interval, answers with a score)``; None scores
    (a criterion the answer did not score) are left out."""
    values = np.asarray([float(s) for s in scores if s is not None], dtype=float)
    if values.size and not np.isfinite(values).all():
        raise ValueError("criterion scores must be finite")
    return stats.bootstrap_mean_ci(values.tolist(), seed=seed), int(values.size)
