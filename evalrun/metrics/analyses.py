"""metrics.json records of the stored analyses: ``evalrun tune`` (WaterBench's strength search,
Tu et al.) and ``evalrun sweep`` (MarkMyWords' aggregate metric, Piet et al.)."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from evalrun.metrics.aggregates import MetricRecord, record
from evalrun.metrics.stats import Estimate


def tune_records(analyses: Sequence[Mapping[str, Any]]) -> list[MetricRecord]:
    """metrics.json records of stored searches: ``tuned_tpr``, params ``{"target_tpr": T}``,
    for the chosen configuration (Wilson interval over its graded outputs)."""
    out = []
    for result in analyses:
        est = Estimate(result["tpr"], *result["tpr_ci"])
        out.append(record(result["pack"], "tuned_tpr", est, result["n"], result["model"], result["watermark"], "none",
                          params={"target_tpr": float(result["target_tpr"])}))
    return out


def sweep_records(results: Sequence[Mapping[str, Any]]) -> list[MetricRecord]:
    """metrics.json records: ``aggregate_size``, params ``{"max_quality_degradation": D,
    "min_tamper_resistance": R}`` (the sweep's bounds), of each stored sweep with a chosen
    configuration (inf written as null)."""
    def num(x: Any) -> float:  # metrics.json has no infinity: an infinite size is written as null
        return math.nan if x is None or x == "inf" else float(x)

    out = []
    for r in results:
        if not r.get("watermark") or "aggregate_size" not in r:
            continue
        low, high = r["aggregate_size_ci"]
        bounds = {"max_quality_degradation": float(r["max_quality_degradation"]),
                  "min_tamper_resistance": float(r["min_tamper_resistance"])}
        out.append(record(r["pack"], "aggregate_size", Estimate(num(r["aggregate_size"]), num(low), num(high)),
                          int(r["aggregate_n"]), r["model"], r["watermark"], "none", params=bounds))
    return out
