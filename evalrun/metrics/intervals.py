"""Bootstrap confidence intervals for the aggregates, all through :mod:`evalrun.metrics.stats`' one
percentile bootstrap (:func:`evalrun.metrics.stats.bootstrap_ci` / ``bootstrap_groups_ci``).

Each helper resamples the unit the aggregate is computed over and re-runs the same code as the
point estimate on every resample, so the estimate and its interval cannot drift apart:

* watermark size -- texts (sizes with None as +inf; the bounds may be +inf);
* AUROC, TPR at FPR -- positives and negatives, each within itself (group sizes stay fixed;
  TPR at FPR re-picks its threshold on every resample, so threshold noise is in the interval);
* calibration R^2 -- the (x, y) points, as pairs;
* tamper resistance -- the baseline texts and each attack's texts, each within itself; with a
  group-level quality source (MAUVE: one score per group), each resample also takes the next
  bootstrap replicate of every group's score, so detections and quality vary together.

Every helper needs an explicit ``seed``; the same inputs and seed give the same bits. Intervals
are NaN where the aggregate is undefined (an empty sample) or undefined on more than 5% of the
resamples (e.g. R^2 from two or three points, whose resamples often repeat one point).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence, Tuple

import numpy as np

from evalrun._util.checks import check_fpr, pairs_array, score_array
from evalrun.judges.mauve_score import normal_interval
from evalrun.metrics import stats
from evalrun.metrics.calibration import fit_rows
from evalrun.metrics.detection import auroc_rows, tpr_at_fpr_rows
from evalrun.metrics.size import median_rows, size_array
from evalrun.metrics.tamper import quality_retention, tamper_resistance

__all__ = ["auroc_ci", "calibration_r2_ci", "tamper_resistance_ci", "tpr_at_fpr_ci",
           "watermark_size_ci"]

#: one attack's texts: per-text quality ratings and whether each was still detected
AttackSample = Tuple[Sequence[float], Sequence[bool]]
#: bootstrap replicates of group-level scores: the baseline's, then each attack's by name
GroupReplicates = Tuple[Sequence[float], Mapping[str, Sequence[float]]]


def watermark_size_ci(sizes: Sequence[int | float | None], *, seed: int,
                      n_resamples: int = stats.DEFAULT_RESAMPLES,
                      level: float = stats.DEFAULT_LEVEL) -> stats.Estimate:
    """:func:`~evalrun.metrics.watermark_size` with a bootstrap CI over texts; a bound is
    ``inf`` where more than half of the resampled texts may be undetected."""
    return stats.bootstrap_ci(size_array(sizes), median_rows, seed, n_resamples, level,
                              vectorized=True)


def auroc_ci(positive_scores: Sequence[float], negative_scores: Sequence[float], *,
             seed: int, n_resamples: int = stats.DEFAULT_RESAMPLES,
             level: float = stats.DEFAULT_LEVEL) -> stats.Estimate:
    """:func:`~evalrun.metrics.auroc` with a bootstrap CI resampling each sample within
    itself."""
    pos = score_array(positive_scores, "positive_scores")
    neg = score_array(negative_scores, "negative_scores")
    return stats.bootstrap_groups_ci([pos, neg], auroc_rows, seed, n_resamples, level,
                                     vectorized=True)


def tpr_at_fpr_ci(positive_scores: Sequence[float], negative_scores: Sequence[float],
                  fpr: float, *, seed: int, n_resamples: int = stats.DEFAULT_RESAMPLES,
                  level: float = stats.DEFAULT_LEVEL) -> stats.Estimate:
    """:func:`~evalrun.metrics.tpr_at_fpr` with a bootstrap CI resampling each sample within
    itself (the threshold is chosen again on every resample)."""
    pos = score_array(positive_scores, "positive_scores")
    neg = score_array(negative_scores, "negative_scores")
    check_fpr(fpr)
    return stats.bootstrap_groups_ci([pos, neg], lambda p, n: tpr_at_fpr_rows(p, n, fpr), seed,
                                     n_resamples, level, vectorized=True)


def calibration_r2_ci(x: Sequence[float], y: Sequence[float], *, seed: int,
                      n_resamples: int = stats.DEFAULT_RESAMPLES,
                      level: float = stats.DEFAULT_LEVEL) -> stats.Estimate:
    """:func:`~evalrun.metrics.calibration_r2` with a bootstrap CI resampling (x, y) pairs.
    With few points (WaterDrum uses 6 or 11 proportions) the interval is wide, as it should
    be."""
    return stats.bootstrap_ci(pairs_array(x, y), lambda rows: fit_rows(rows)[1], seed, n_resamples,
                              level, vectorized=True)


def tamper_resistance_ci(baseline_quality: Sequence[float],
                         attacks: Mapping[str, AttackSample], *, seed: int,
                         n_resamples: int = stats.DEFAULT_RESAMPLES,
                         level: float = stats.DEFAULT_LEVEL,
                         replicates: GroupReplicates | None = None) -> stats.Estimate:
    """:func:`~evalrun.metrics.tamper_resistance` from per-text data, with a bootstrap CI.

    ``baseline_quality`` holds the ratings of the unattacked texts; ``attacks`` maps each
    attack (paraphrases already left out) to its texts' ratings and detected flags. Each
    attack's point is ``(quality_retention(mean rating, mean baseline rating), share
    detected)``. The baseline and every attack are resampled within themselves, as independent
    samples: texts shared between attacks are not tied together.

    With ``replicates`` (a group-level source: every text of a group carries its score) see
    :func:`_tamper_replicates_ci`; ``level`` is then 0.95.
    """
    if replicates is not None:
        return _tamper_replicates_ci(baseline_quality, attacks, replicates, seed)
    base = score_array(baseline_quality, "baseline_quality")
    names = list(attacks)
    groups: list[np.ndarray] = [base]
    for name in names:
        ratings, detected = attacks[name]
        q = score_array(ratings, f"attacks[{name!r}] ratings")
        d = np.asarray(detected, dtype=float)
        if d.shape != q.shape or not np.isin(d, (0.0, 1.0)).all():
            raise ValueError(f"attacks[{name!r}]: need one detected flag (True/False) per rating, "
                             f"got {d.size} flags for {q.size} ratings")
        if q.size == 0:
            raise ValueError(f"attacks[{name!r}] has no texts")
        groups.append(np.column_stack([q, d]))
    if base.size:
        quality_retention(1.0, float(base.mean()))  # a bad baseline is an error, not a NaN

    def statistic(b: np.ndarray, *samples: np.ndarray) -> float:
        base_mean = float(b.mean())
        if not base_mean > 0.0:
            return math.nan
        return _resistance(base_mean, [(float(x[:, 0].mean()), float(x[:, 1].mean())) for x in samples])

    return stats.bootstrap_groups_ci(groups, statistic, seed, n_resamples, level)


def _tamper_replicates_ci(baseline_quality: Sequence[float], attacks: Mapping[str, AttackSample],
                          replicates: GroupReplicates, seed: int) -> stats.Estimate:
    """R with quality from group-level scores: resample ``r`` draws each attack's detections
    within itself and takes replicate ``r`` of the baseline's and every attack's score (the
    replicates are independent draws, cycled to the longest list); the interval is R ± 1.96 sd
    of those values, clipped to [0, 1] -- made as each score's own interval is
    (:func:`evalrun.judges.mauve_score.normal_interval`), so it contains R."""
    base_reps, attack_reps = replicates
    names = list(attacks)
    missing = [n for n in names if not len(attack_reps.get(n, ()))]
    if missing or not len(base_reps):
        raise ValueError(f"replicates: none for {'the baseline' if not len(base_reps) else missing[0]!r}")
    flags = {n: np.asarray(attacks[n][1], dtype=float) for n in names}
    point = _resistance(float(np.mean(baseline_quality)),
                        [(float(np.mean(attacks[n][0])), float(flags[n].mean())) for n in names])
    size = max(len(base_reps), *(len(attack_reps[n]) for n in names))
    base = np.resize(np.asarray(base_reps, dtype=float), size)
    reps = {n: np.resize(np.asarray(attack_reps[n], dtype=float), size) for n in names}
    rng = np.random.default_rng(seed)
    values = []
    for r in range(size):
        if not base[r] > 0.0:
            continue
        values.append(_resistance(float(base[r]), [
            (float(reps[n][r]), float(flags[n][rng.integers(0, flags[n].size, flags[n].size)].mean())) for n in names]))
    low, high = normal_interval(point, values, 0.0, 1.0)
    return stats.Estimate(point, low, high)


def _resistance(base_mean: float, attacks: Sequence[tuple[float, float]]) -> float:
    """R from the baseline's mean quality and each attack's (mean quality, share detected)."""
    return tamper_resistance([(quality_retention(q, base_mean), d) for q, d in attacks])
