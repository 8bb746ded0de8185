"""WaterDrum's aggregates (sections 3 and 5, App. E.3).

Per model (a registered aggregate, so ``metrics.json`` of any report carries them): the
aggregate metric of the forget and of the retain set is the uniform mean, over the set's
data points, of each point's verification score (its repetitions averaged first, as the seed
averages its 10 outputs per query); ``waterdrum_auroc`` is the AUROC of retain vs forget
scores (D1 when the model is the retrained one).

Across models (:func:`summarize`, given each model's role): both aggregates scaled so that the
original model is 1.0 (section 5: "all metrics are scaled to 1.0 when evaluated on the
original model"), D1 = AUROC on the retrained model, D2 = :func:`evalrun.metrics.calibration_r2`
of the scaled forget aggregate against k/|F| over the retrained (k = 0), calibration and
original (k = |F|) models, as the seed's Fig. 3 uses 0 %, ..., 100 %. The same function
serves the baseline metrics (:mod:`evalrun.unlearning.baselines`), given their set aggregate.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from evalrun.metrics import auroc, auroc_ci, calibration_r2, calibration_r2_ci, proportional_fit, stats

CI_SEED = 0
FORGET = "forget"
RETAIN = "retain"


def point_scores(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{set: {case_id: mean verification score}}`` of one model's graded waterdrum rows
    (rows without the evidence -- errors, other packs -- are left out)."""
    acc: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        text = r.get("metadata_json")
        if r.get("error") is not None or not text:
            continue
        meta = json.loads(text)
        if "verification_score" not in meta or meta.get("set") not in (FORGET, RETAIN):
            continue
        acc[(meta["set"], str(r["case_id"]))].append(float(meta["verification_score"]))
    out: dict[str, dict[str, float]] = {FORGET: {}, RETAIN: {}}
    for (part, case_id), values in sorted(acc.items()):
        out[part][case_id] = sum(values) / len(values)
    return out


def waterdrum_aggregate(rows: Sequence[Mapping[str, Any]], seed: int
                        ) -> list[tuple[str, stats.Estimate, int]]:
    """The registered ``waterdrum`` aggregate of one (pack, model, watermark, attack) group:
    forget/retain mean verification score (bootstrap CI over points) and retain-vs-forget
    AUROC; nothing for groups without verification evidence."""
    scores = point_scores(rows)
    forget, retain = list(scores[FORGET].values()), list(scores[RETAIN].values())
    if not forget and not retain:
        return []
    out = []
    for name, values in (("waterdrum_forget_score", forget), ("waterdrum_retain_score", retain)):
        if values:
            out.append((name, stats.bootstrap_mean_ci(values, seed=seed), len(values)))
    if forget and retain:
        value = auroc(retain, forget)
        out.append(("waterdrum_auroc", stats.Estimate(value, math.nan, math.nan),
                    len(forget) + len(retain)))
    return out


@dataclass(frozen=True)
class Role:
    """What a model is in the experiment: ``original``, ``retrained``, ``calibration``
    (with ``fraction`` = k/|F|) or ``unlearned`` (with the algorithm's name)."""

    kind: str
    fraction: float | None = None
    label: str = ""


@dataclass
class Summary:
    """The cross-model results: per model raw and scaled aggregates, D1 and D2."""

    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    d1_auroc: float = math.nan
    d2_r2: float = math.nan
    d2_slope: float = math.nan
    #: 95% bootstrap intervals (seeded): D1 resampling each set, D2 resampling the points
    d1_ci: tuple[float, float] = (math.nan, math.nan)
    d2_ci: tuple[float, float] = (math.nan, math.nan)
    calibration: list[tuple[float, float]] = field(default_factory=list)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


#: a set's aggregate value from one model's point scores and the set's name
SetAggregate = Callable[[Mapping[str, Mapping[str, float]], str], float]


def uniform_mean(scores: Mapping[str, Mapping[str, float]], part: str) -> float:
    """WaterDrum's aggregate (App. E.3) for every metric but MIA: the uniform mean over the
    set's points; NaN for an empty set."""
    return _mean(list(scores.get(part, {}).values()))


def scale_to_original(value: float, original: float) -> float:
    """``value / original``: WaterDrum section 5 scales every metric "to 1.0 when evaluated
    on the original model", so metrics of different units share one axis; NaN when the
    original's value is 0 or NaN."""
    return value / original if original and math.isfinite(original) else math.nan


def summarize(per_model: Mapping[str, Mapping[str, Mapping[str, float]]],
              roles: Mapping[str, Role], aggregate: SetAggregate = uniform_mean) -> Summary:
    """D1, D2 and the scaled aggregates from each model's :func:`point_scores` (or any
    metric's per-point scores in that shape; ``aggregate`` turns a set's scores into its
    value, :func:`uniform_mean` by default); ``roles`` must name exactly one original and
    one retrained model."""
    originals = [m for m, r in roles.items() if r.kind == "original"]
    retrained = [m for m, r in roles.items() if r.kind == "retrained"]
    if len(originals) != 1 or len(retrained) != 1:
        raise ValueError("summarize needs exactly one original and one retrained model, got "
                         f"{len(originals)} and {len(retrained)}")
    missing = [m for m in roles if m not in per_model]
    if missing:
        raise ValueError(f"no waterdrum results for model(s) {', '.join(missing)}")
    base = per_model[originals[0]]
    base_f, base_r = aggregate(base, FORGET), aggregate(base, RETAIN)
    out = Summary()
    for model, role in roles.items():
        s = per_model[model]
        f, r = aggregate(s, FORGET), aggregate(s, RETAIN)
        out.models[model] = {
            "role": role.kind, "label": role.label or role.kind, "fraction": role.fraction,
            "forget": f, "retain": r,
            "forget_scaled": scale_to_original(f, base_f),
            "retain_scaled": scale_to_original(r, base_r),
            "n_forget": len(s[FORGET]), "n_retain": len(s[RETAIN]),
            "auroc": auroc(list(s[RETAIN].values()), list(s[FORGET].values()))
            if s[FORGET] and s[RETAIN] else math.nan,
        }
    out.d1_auroc = out.models[retrained[0]]["auroc"]
    re = per_model[retrained[0]]
    if re[FORGET] and re[RETAIN]:
        est = auroc_ci(list(re[RETAIN].values()), list(re[FORGET].values()), seed=CI_SEED)
        out.d1_ci = (est.low, est.high)
    points = []
    for model, role in roles.items():
        x = {"retrained": 0.0, "original": 1.0}.get(role.kind, role.fraction)
        if role.kind in ("retrained", "original", "calibration") and x is not None:
            points.append((float(x), out.models[model]["forget_scaled"]))
    points.sort()
    out.calibration = points
    if len(points) >= 2 and all(math.isfinite(y) for _, y in points):
        fit = proportional_fit([p[0] for p in points], [p[1] for p in points])
        out.d2_r2 = calibration_r2([p[0] for p in points], [p[1] for p in points])
        out.d2_slope = fit.slope
        est = calibration_r2_ci([p[0] for p in points], [p[1] for p in points], seed=CI_SEED)
        out.d2_ci = (est.low, est.high)
    return out
