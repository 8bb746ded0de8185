"""``evalrun sweep``: MarkMyWords' aggregate metric (Piet et al., section IV-D, Fig. 1,
Table V).

"We first set the watermark's parameters to be optimal with respect to watermark size on a
training set while achieving a target quality and tamper resistance. The aggregate metric is
this watermark's size when run with different random seeds and secret keys, to avoid selection
bias." The seed's constraints are quality degradation <= 1% or <= 10% and tamper resistance
> 0.2 or > 0.

**Per configuration** of the scheme's grid (every combination of the ``--grid`` values; by
default the registered strength grid's gamma values x delta in 1, 2, 4) one run generates the
pack's cases unwatermarked and under the configuration, applies the attacks, asks the quality
judge about every text, and grades (:func:`evalrun.run.pipeline.execute_run`; all cached in the store).
From the stored results (:func:`summarise`, pure):

* size: :func:`evalrun.metrics.watermark_size` of the unattacked watermarked texts (the grade's
  ``size``: the shortest detected prefix at the pack's threshold);
* quality degradation: :func:`evalrun.metrics.quality.quality_degradation` of the mean quality
  of the watermarked and the unwatermarked texts, quality being the asked judge's own reading
  (:func:`evalrun.metrics.benchmark.quality_by_source`): ``rating``, MarkMyWords' grade in [0,
  1]; ``mauve``, its group's MAUVE; a proxy's ``quality`` (``perplexity``: 1 / perplexity, offline);
* tamper resistance: :func:`evalrun.metrics.tamper_resistance` of the attacks' points
  ``(quality_retention(attacked, unattacked watermarked), share still detected)``, paraphrases
  left out as MarkMyWords IV-C (and the report) do.

**Choice and re-measurement.** Among configurations with degradation <= the bound and tamper
resistance > the bound, the one with the smallest size (ties: smaller degradation) is chosen;
it is then generated again under ``--remeasure`` other keys (derived from the run's key, never
stored) and seeds, and the aggregate metric is the watermark size over all those texts with a
bootstrap interval (:func:`evalrun.metrics.watermark_size_ci`), besides each key's size and
their median absolute deviation (Table V prints it in parentheses).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import time
from dataclasses import replace
from typing import Any, Mapping, Sequence

from evalrun._util.checks import finite_number
from evalrun._util.errors import EvalrunError
from evalrun._util.hashing import canonical_json, sha256_hex, stable_int
from evalrun._util.provenance import collect
from evalrun._util.specs import Spec, is_none, parse_spec
from evalrun.analysis.tune import candidate_spec
from evalrun.metrics import quality_retention, tamper_resistance, watermark_size_ci
from evalrun.metrics.aggregates import row_metadata
from evalrun.metrics.benchmark import excluded_from_tamper, quality_by_source, source_of_method
from evalrun.metrics.quality import quality_degradation
from evalrun.metrics.size import watermark_size
from evalrun.pack.loading import Pack
from evalrun.run.options import RunOptions
from evalrun.run.pipeline import execute_run
from evalrun.store.database import Store, utc_now
from evalrun.watermark.strength import STRENGTH_GRIDS

#: delta values swept by default (the outer values come from the scheme's strength grid)
DEFAULT_INNER = (1.0, 2.0, 4.0)


def grid_points(scheme: str, overrides: Sequence[str]) -> tuple[Spec, list[str]]:
    """The base spec and the canonical spec of every grid point: ``--grid name=v1,v2,...``
    lists replace the registered grid's values for that parameter."""
    base = parse_spec(scheme, what="--scheme")
    grid = STRENGTH_GRIDS.get(base.name)
    values: dict[str, tuple[float, ...]] = {grid.outer: grid.outer_values, grid.inner: DEFAULT_INNER}
    for text in overrides:
        name, sep, body = text.partition("=")
        if not sep or not body or ":" in body:
            raise EvalrunError(f"--grid {text}: expected {grid.outer}=v1,v2,... or {grid.inner}=v1,v2,... (a sweep "
                               "tries listed values)")
        if name not in values:
            raise EvalrunError(f"--grid {text}: this scheme's grid has {grid.outer} and {grid.inner}")
        values[name] = tuple(dict.fromkeys(finite_number(v, f"--grid {text}") for v in body.split(",")))
    fixed = sorted(set(base.params) & set(values))
    if fixed:
        raise EvalrunError(f"--scheme {scheme}: {', '.join(fixed)} is what the sweep sets; use --grid")
    specs = [candidate_spec(base, grid, o, i) for o, i in itertools.product(values[grid.outer], values[grid.inner])]
    return base, list(dict.fromkeys(specs))


def _quality(row: Mapping[str, Any], method: str) -> float | None:
    """The row's quality from the judge ``method`` asked for: MarkMyWords' ``rating`` (in [0,
    1]), its group's MAUVE, or a proxy's ``quality`` (the report's own reading,
    :func:`quality_by_source`)."""
    return quality_by_source(row).get(source_of_method(method))


def _graded(row: Mapping[str, Any]) -> bool:
    return row["error"] is None and row["label"] is not None


def summarise(rows: Sequence[Mapping[str, Any]], spec: str, method: str, *, seed: int) -> dict[str, Any]:
    """Size, quality degradation and tamper resistance of ``spec`` from stored results (see
    the module docstring). Pure."""
    plain = [r for r in rows if r["watermark"] == spec and is_none(r["attack"]) and _graded(r)]
    base = [r for r in rows if is_none(r["watermark"]) and is_none(r["attack"]) and _graded(r)]
    sizes = [row_metadata(r).get("size") for r in plain]
    size = watermark_size_ci(sizes, seed=seed) if sizes else None
    q_mark = [q for q in (_quality(r, method) for r in plain) if q is not None]
    q_base = [q for q in (_quality(r, method) for r in base) if q is not None]
    degradation = (quality_degradation(statistics.fmean(q_mark), statistics.fmean(q_base))
                   if q_mark and q_base and statistics.fmean(q_base) > 0 else math.nan)
    points: dict[str, tuple[float, float]] = {}
    # MarkMyWords IV-C leaves paraphrases out of R, as the report does
    attacks = sorted({r["attack"] for r in rows if r["watermark"] == spec and not is_none(r["attack"])
                      and not excluded_from_tamper(r["attack"])})
    for attack in attacks:
        hit = [r for r in rows if r["watermark"] == spec and r["attack"] == attack and _graded(r)]
        q_att = [q for q in (_quality(r, method) for r in hit) if q is not None]
        if not hit or not q_att or not q_mark or statistics.fmean(q_mark) <= 0:
            continue
        points[attack] = (quality_retention(statistics.fmean(q_att), statistics.fmean(q_mark)),
                          sum(r["label"] == "DETECTED" for r in hit) / len(hit))
    return {"watermark": spec, "n": len(plain), "size": None if size is None else size.value,
            "size_ci": None if size is None else [size.low, size.high], "quality_degradation": degradation,
            "quality_n": [len(q_mark), len(q_base)], "tamper_resistance": tamper_resistance(points) if points else None,
            "attack_points": {a: list(p) for a, p in points.items()}}


def choose(configs: Sequence[Mapping[str, Any]], *, max_degradation: float, min_tamper: float) -> dict[str, Any] | None:
    """The eligible configuration of smallest size (ties: smaller degradation), or None. Pure."""
    eligible = [c for c in configs if c["size"] is not None and math.isfinite(c["size"])
                and math.isfinite(c["quality_degradation"]) and c["quality_degradation"] <= max_degradation
                and c["tamper_resistance"] is not None and c["tamper_resistance"] > min_tamper]
    if not eligible:
        return None
    return dict(min(eligible, key=lambda c: (c["size"], c["quality_degradation"])))


def remeasure_key(key: str, i: int) -> str:
    """The i-th re-measurement key, derived from the run's key (used, never stored)."""
    return sha256_hex("sweep-remeasure", key, i)


def median_absolute_deviation(values: Sequence[float]) -> float:
    """Median of ``|x - median|`` (Table V's spread); NaN for none, inf where a value is inf."""
    if not values:
        return math.nan
    m = statistics.median(values)
    if not math.isfinite(m):
        return math.inf
    return float(statistics.median(abs(v - m) for v in values))


def sweep(store: Store, pack: Pack, options: RunOptions, *, scheme: str, grid_overrides: Sequence[str] = (),
          max_degradation: float, min_tamper: float, remeasure: int = 2, argv: Sequence[str] = (),
          progress: Any = None) -> dict[str, Any]:
    """The sweep of the module docstring; stored as an analysis (kind ``sweep``) and returned."""
    if len(options.judges) != 1:
        raise EvalrunError("--judge: sweep needs exactly one quality judge, e.g. perplexity:embedded (offline) or "
                           "rating:<model>")
    if all(is_none(a) for a in options.attacks):
        raise EvalrunError("--attack / --attack-suite: tamper resistance needs attacks (e.g. --attack-suite quick)")
    if remeasure < 1:
        raise EvalrunError(f"--remeasure {remeasure}: must be at least 1")
    key = options.resolved_key()
    if not key:
        raise EvalrunError("sweep needs the watermark key: --key or $EVALRUN_WATERMARK_KEY")
    method = options.judges[0][0]
    base, specs = grid_points(scheme, grid_overrides)
    start = time.perf_counter()
    run_ids: list[str] = []
    configs = []
    attacks = tuple(dict.fromkeys(("none", *options.attacks)))
    for spec in specs:
        run = execute_run(store, pack, replace(options, watermarks=("none", spec), attacks=attacks), argv=argv)
        run_ids.append(run.run_id)
        summary = {**summarise(run.rows, spec, method, seed=stable_int("sweep", spec, bits=31)),
                   "generated": run.generated, "cached": run.cached, "seconds": run.seconds}
        configs.append(summary)
        if progress:
            progress("config", summary)
    chosen = choose(configs, max_degradation=max_degradation, min_tamper=min_tamper)
    result: dict[str, Any] = {
        "pack": pack.name, "model": str(options.models[0]), "scheme": base.canonical(), "quality_judge":
        f"{options.judges[0][0]}:{options.judges[0][1]}", "attacks": [a for a in attacks if not is_none(a)],
        "max_quality_degradation": max_degradation, "min_tamper_resistance": min_tamper, "configs": configs,
        "watermark": None if chosen is None else chosen["watermark"], "remeasure": []}
    if chosen is not None:
        pooled: list[Any] = []
        for i in range(remeasure):
            again = replace(options, key=remeasure_key(key, i), seed=options.seed + 1000 * (i + 1),
                            watermarks=(chosen["watermark"],), attacks=("none",), judges=())
            run = execute_run(store, pack, again, argv=argv)
            run_ids.append(run.run_id)
            sizes = [row_metadata(r).get("size") for r in run.rows if _graded(r)]
            pooled += sizes
            entry = {"index": i, "seed": again.seed, "n": len(sizes), "size": watermark_size(sizes),
                     "seconds": run.seconds}
            result["remeasure"].append(entry)
            if progress:
                progress("remeasure", entry)
        est = watermark_size_ci(pooled, seed=stable_int("sweep-aggregate", chosen["watermark"], bits=31))
        result.update({"aggregate_size": est.value, "aggregate_size_ci": [est.low, est.high], "aggregate_n": len(pooled),
                       "size_mad_over_keys": median_absolute_deviation([e["size"] for e in result["remeasure"]])})
    result["seconds"] = round(time.perf_counter() - start, 3)
    provenance = collect(list(argv))
    config = {k: result[k] for k in ("pack", "model", "scheme", "quality_judge", "attacks", "max_quality_degradation",
                                     "min_tamper_resistance")}
    config.update({"specs": specs, "remeasure": remeasure, "seed": options.seed})
    store.store_analysis({
        "analysis_key": sha256_hex("sweep", canonical_json(config)), "kind": "sweep",
        "config_json": canonical_json(config), "result_json": json.dumps(_finite(result), sort_keys=True),
        "error": None, "seconds": result["seconds"], "run_ids_json": json.dumps(run_ids),
        "git_sha": provenance.get("git_sha"), "evalrun_version": provenance.get("evalrun_version"),
        "created_at": utc_now()})
    return result


def _finite(value: Any) -> Any:
    """JSON-safe: inf -> "inf", NaN -> None (strict JSON has neither)."""
    if isinstance(value, float):
        return None if math.isnan(value) else ("inf" if value == math.inf else value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
