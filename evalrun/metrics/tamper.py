"""Tamper resistance: how much quality an attacker must give up to remove the watermark
(MarkMyWords, Piet et al., section IV-C and Fig. 3).

Each attack is one point ``(quality retention, detection rate)`` in the unit square: x is
``Q_A = clip(mean attacked quality / mean baseline quality, 0, 1)`` and y the share of attacked
texts still detected, so the paper's "(1, 0)" is the perfect attack, (1, 1) no attack and
(0, 0) the trivial attack that returns an empty string. Mixing two attacks at random reaches
any point of the segment between them (on average), so what an attacker can achieve is bounded
by the *lower* convex hull of the attacks together with (0, 0) and (1, 1). The tamper
resistance is ``R = 2 x`` the area under that hull: 1 when no attack beats the diagonal
(including no attacks at all), 0 when some attack keeps full quality and removes every mark.

Paraphrase attacks are left out by the caller (matching attack names case-insensitively), as
the paper does, because they need large or closed models; translations are kept.

MarkMyWords' code (``convex_hull``, ``prepare_for_hull`` and ``summarize_robustness`` in
``src/watermark_benchmark/utils/summarize.py``) has the same orientation (x quality, y share
still watermarked) and computes the area another way: it adds (0, 0), (0, b) and (1, b), where
``b`` is the detection rate without attack, takes the area of the whole convex hull
(``scipy.spatial.ConvexHull``) and subtracts it from ``b``; it reports that area (at most 0.5)
rather than twice it, and drops attacks whose names contain "dipper" or "gpt". With ``b = 1``,
as in the paper's text, the areas agree; here the no-attack corner is always (1, 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Tuple, Union

from evalrun.metrics.quality import quality_ratio

__all__ = ["AttackPoint", "best_attack", "lower_hull", "quality_retention",
           "tamper_resistance"]

Point = Tuple[float, float]
#: points as a sequence of ``(quality_retention, detection_rate)`` or a mapping attack -> point
Points = Union[Iterable[Point], Mapping[str, Point]]

#: MarkMyWords' quality bar for the "best attack" (Fig. 3: "the best attack preserving 80% quality")
DEFAULT_MIN_QUALITY = 0.8


@dataclass(frozen=True)
class AttackPoint:
    """One attack's position on the tamper-resistance plot."""

    name: str
    quality_retention: float
    detection_rate: float


def quality_retention(attacked_mean: float, baseline_mean: float) -> float:
    """``Q_A = clip(attacked_mean / baseline_mean, 0, 1)`` (MarkMyWords IV-C): an attack that
    happens to score above the baseline (rating noise) retains all quality, never more."""
    return min(1.0, max(0.0, quality_ratio(attacked_mean, baseline_mean, "attacked")))


def lower_hull(points: Points) -> list[Point]:
    """Vertices of the lower convex hull of ``points`` plus (0, 0) and (1, 1), left to right.

    Starts at (0, 0) and ends at (1, 1) (after a vertical edge when some attack sits at x = 1
    below it); points on a hull edge are not vertices. x is quality retention, y detection rate.
    """
    pts = sorted(set(_validated(points)) | {(0.0, 0.0), (1.0, 1.0)})
    hull: list[Point] = []
    for p in pts:  # Andrew's monotone chain, lower half: keep only left (counter-clockwise) turns
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) <= 0.0:
            hull.pop()
        hull.append(p)
    return hull


def tamper_resistance(points: Points) -> float:
    """``R = 2 x`` the area under :func:`lower_hull` of the attacks' ``(quality retention,
    detection rate)`` points; 1.0 with no attacks. In [0, 1]; lowering any point's detection
    rate never raises it."""
    hull = lower_hull(points)
    area = sum((x1 - x0) * (y0 + y1) / 2.0 for (x0, y0), (x1, y1) in zip(hull, hull[1:]))
    return min(1.0, max(0.0, 2.0 * area))


def best_attack(points: Points,
                min_quality: float = DEFAULT_MIN_QUALITY) -> AttackPoint | None:
    """The attack with the lowest detection rate among those keeping quality retention
    ``>= min_quality`` (MarkMyWords Fig. 3; its code's ``summarize_robustness`` threshold 0.8,
    inclusive). Ties go to the higher quality retention, then the smaller name. None when no
    attack keeps enough quality.

    ``points`` maps attack names to points, or is a sequence of points (named by index)."""
    if not 0.0 <= min_quality <= 1.0:
        raise ValueError(f"min_quality must be in [0, 1], got {min_quality!r}")
    named = _named(points)
    eligible = [AttackPoint(name, q, d) for name, (q, d) in named if q >= min_quality]
    if not eligible:
        return None
    return min(eligible, key=lambda a: (a.detection_rate, -a.quality_retention, a.name))


def _cross(o: Point, a: Point, b: Point) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _named(points: Points) -> list[tuple[str, Point]]:
    """``(name, point)`` pairs, checked: both coordinates finite and in [0, 1]."""
    if isinstance(points, Mapping):
        items = [(str(k), f"attack {k!r}", v) for k, v in points.items()]
    else:
        items = [(str(i), f"point {i}", v) for i, v in enumerate(points)]
    out = []
    for name, shown, value in items:
        try:
            q, d = (float(v) for v in value)
        except (TypeError, ValueError):
            raise ValueError(f"{shown} = {value!r} is not a (quality_retention, detection_rate) "
                             "pair of numbers") from None
        for axis, v in (("quality retention", q), ("detection rate", d)):
            if not 0.0 <= v <= 1.0:  # also rejects NaN
                raise ValueError(f"{shown} = {value!r}: {axis} {v!r} is not in [0, 1]")
        out.append((name, (q, d)))
    return out


def _validated(points: Points) -> list[Point]:
    return [p for _, p in _named(points)]
