"""``evalrun tune``: WaterBench's strength search (Tu et al., section 3.2 and Fig. 3).

WaterBench compares watermarks *at equal strength*: the strength of a configuration is its
true-positive rate (TPR), the share of watermarked outputs detected at z >= 4, and each
scheme's hyper-parameters are searched until its TPR is as close as possible to a target (0.7
or 0.95 in the seed) before quality is compared.

**Search.** A scheme's strength grid lives beside the scheme and is registered in
:data:`evalrun.watermark.strength.STRENGTH_GRIDS` (a scheme without one cannot be tuned): an *outer* parameter tried at each listed value and an *inner* one whose
TPR grows with it, searched by bisection. For ``kgw`` and ``unigram`` these are gamma (seed
002 Fig. 3: 0.1, 0.25, 0.5, 0.75, 0.9) and delta (0 to 15). Per gamma, the top of the delta
range is measured first (if even that misses the target, the gamma cannot reach it and the
search moves on); then delta is bisected ``steps`` times, stopping early once a TPR lies within
``tolerance`` of the target. The chosen configuration is the measured one whose TPR is closest
to the target; ties go to the smaller inner value, then to the outer value nearest the
scheme's default (the seed's "minimize the changes to hyper-parameters").

**Refinement** (``refine``, on by default; ``evalrun tune --no-refine`` for the seed's plain
grid choice). Each measurement has binomial noise (about 0.06 at 64 outputs and TPR 0.7) and a
key-dependent part, and the TPR climbs steeply with delta, so the measured point closest to the
target is partly chosen for its luck and a fresh key lands further off (measured on the
embedded model: closest point 0.797 -> 0.844 with another key; 0.656 -> 0.578). So, per outer
value whose measurements bracket the target, a logistic curve of detection against the inner
value is fitted to *all* its measured outputs (:func:`fit_inner`), the inner value where it
reaches the target is measured as one more configuration, and the chosen configuration is the
smallest such inner value (nearest default outer value on ties). Without a bracket the plain
rule above applies.

**Measuring** one configuration generates the pack's cases under it (:func:`run_generation`,
so a configuration measured before -- by this search or by ``evalrun run`` into the same store
-- is read from the store, not generated again), grades them with the pack's grader, and counts
those detected by :func:`evalrun.pack.detection_grader.is_detected` at the chosen z (schemes without
a z-score: the normal-tail p-value of that z). Every measurement is a run in the store; the
search itself is stored as an analysis (kind ``tune``). The key is used, never stored.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from evalrun._util.checks import finite_number
from evalrun._util.errors import EvalrunError
from evalrun._util.hashing import canonical_json, sha256_hex
from evalrun._util.provenance import collect
from evalrun._util.specs import Spec, parse_spec
from evalrun.metrics.stats import wilson_interval
from evalrun.pack.loading import Pack
from evalrun.run.executors import ProviderFactory
from evalrun.run.options import RunOptions
from evalrun.run.pipeline import execute_run
from evalrun.run.plan import params_for
from evalrun.store.database import Store, utc_now
from evalrun.watermark import parse_watermark
from evalrun.watermark.strength import STRENGTH_GRIDS, StrengthGrid
from evalrun.watermark.verdict import is_detected, z_tail


def apply_grid(grid: StrengthGrid, overrides: Sequence[str]) -> StrengthGrid:
    """``grid`` with ``--grid`` overrides: ``<outer>=v1,v2,...`` (values to try) and
    ``<inner>=lo:hi`` (the bisection range)."""
    for text in overrides:
        name, sep, body = text.partition("=")
        where = f"--grid {text}"
        if not sep or not body:
            raise EvalrunError(f"{where}: expected {grid.outer}=v1,v2,... or {grid.inner}=lo:hi")
        if name == grid.outer:
            values = tuple(finite_number(v, where) for v in body.split(","))
            grid = replace(grid, outer_values=tuple(dict.fromkeys(values)))
        elif name == grid.inner:
            lo, colon, hi = body.partition(":")
            if not colon:
                raise EvalrunError(f"{where}: expected {grid.inner}=lo:hi, a range to bisect")
            bounds = (finite_number(lo, where), finite_number(hi, where))
            if not bounds[0] < bounds[1]:
                raise EvalrunError(f"{where}: the range must have lo < hi")
            grid = replace(grid, inner_range=bounds)
        else:
            raise EvalrunError(f"{where}: this scheme's grid has {grid.outer} (values) and {grid.inner} (a range)")
    return grid


@dataclass(frozen=True)
class Trial:
    """One measured configuration."""

    watermark: str
    outer: float
    inner: float
    tpr: float
    ci_low: float
    ci_high: float
    #: watermarked outputs graded, and detected among them
    n: int
    detected: int
    #: outputs that could not be graded (failed calls or graders): left out of the TPR
    errors: int = 0
    generated: int = 0
    cached: int = 0
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


Measure = Callable[[str], Trial]


def candidate_spec(base: Spec, grid: StrengthGrid, outer: float, inner: float) -> str:
    """The canonical spec of one grid point (``base``'s other parameters kept)."""
    params = {**base.params, grid.outer: f"{outer:g}", grid.inner: f"{round(inner, grid.decimals):g}"}
    scheme = parse_watermark(Spec(name=base.name, params=params).canonical())
    assert scheme is not None
    return scheme.spec.canonical()


def fit_inner(trials: Sequence[Trial], target: float) -> float | None:
    """The inner value where a logistic curve fitted to ``trials`` (one outer value: each
    trial's detected / n outputs at its inner value) reaches ``target``; None unless the
    trials bracket the target and the fitted curve rises. Pure."""
    points = [t for t in trials if t.n > 0]
    if not (any(t.tpr < target for t in points) and any(t.tpr > target for t in points)):
        return None
    x, y, w = [], [], []
    for t in points:
        for outcome, count in ((1, t.detected), (0, t.n - t.detected)):
            if count:
                x.append(t.inner)
                y.append(outcome)
                w.append(count)
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1e6, max_iter=1000).fit(np.asarray(x)[:, None], y, sample_weight=w)
    slope, intercept = float(model.coef_[0][0]), float(model.intercept_[0])
    if not slope > 0:
        return None
    return (math.log(target / (1 - target)) - intercept) / slope


def search(measure: Measure, base: Spec, grid: StrengthGrid, *, target: float, steps: int = 6,
           tolerance: float = 0.02, refine: bool = True,
           progress: Callable[[Trial], None] | None = None) -> tuple[Trial, list[Trial]]:
    """``(chosen, tried)``: the search of the module docstring, measuring with ``measure``.
    Pure apart from ``measure``."""
    tried: list[Trial] = []
    seen: dict[str, Trial] = {}

    def at(outer: float, inner: float) -> Trial:
        spec = candidate_spec(base, grid, outer, inner)
        if spec not in seen:
            trial = measure(spec)
            trial = replace(trial, outer=outer, inner=round(inner, grid.decimals))
            seen[spec] = trial
            tried.append(trial)
            if progress:
                progress(trial)
        return seen[spec]

    for outer in grid.outer_values:
        lo, hi = grid.inner_range
        top = at(outer, hi)
        if top.n == 0 or top.tpr < target - tolerance:
            continue  # even the strongest setting of this outer value misses the target
        if abs(top.tpr - target) <= tolerance:
            continue
        for _ in range(steps):
            mid = round((lo + hi) / 2, grid.decimals)
            if mid in (round(lo, grid.decimals), round(hi, grid.decimals)):
                break
            trial = at(outer, mid)
            if abs(trial.tpr - target) <= tolerance:
                break
            if trial.tpr < target:
                lo = mid
            else:
                hi = mid
    usable = [t for t in tried if t.n > 0]
    if not usable:
        raise EvalrunError("no configuration could be measured: every output failed (see the store's errors)")
    refined: list[Trial] = []
    if refine:
        for outer in grid.outer_values:
            inner = fit_inner([t for t in usable if t.outer == outer], target)
            lo, hi = grid.inner_range
            if inner is not None and lo <= inner <= hi:
                refined.append(at(outer, inner))
    if refined:  # every fitted point reaches the target on its curve: the smallest change wins
        chosen = min(refined, key=lambda t: (t.inner, abs(t.outer - grid.outer_default)))
    else:
        chosen = min(usable, key=lambda t: (abs(t.tpr - target), t.inner, abs(t.outer - grid.outer_default)))
    return chosen, tried


@dataclass
class StoreMeasure:
    """Measures a configuration's TPR on ``pack`` x ``options.models[0]`` in ``store``."""

    store: Store
    pack: Pack
    options: RunOptions
    z_threshold: float
    argv: Sequence[str] = ()
    make_provider: ProviderFactory | None = None
    run_ids: list[str] = field(default_factory=list)

    def __call__(self, spec: str) -> Trial:
        options = replace(self.options, watermarks=(spec,), attacks=("none",), judges=())
        run = execute_run(self.store, self.pack, options, argv=self.argv, make_provider=self.make_provider)
        self.run_ids.append(run.run_id)
        evidence = [json.loads(r["metadata_json"]) for r in run.rows
                    if r["error"] is None and r["label"] is not None and r["metadata_json"]]
        detected = sum(detected_at(e, self.z_threshold) for e in evidence)
        est = wilson_interval(detected, len(evidence))
        return Trial(watermark=spec, outer=math.nan, inner=math.nan, tpr=est.value if evidence else 0.0,
                     ci_low=est.low, ci_high=est.high, n=len(evidence), detected=detected, errors=run.errors,
                     generated=run.generated, cached=run.cached, seconds=run.seconds)


def detected_at(evidence: Mapping[str, Any], z_threshold: float) -> bool:
    """Whether a watermarked result's stored evidence is a detection at ``z_threshold``."""
    return is_detected(evidence.get("z_score"), float(evidence["p_value"]), threshold=z_tail(z_threshold),
                       z_threshold=z_threshold)


def plan_search(scheme: str, grid_overrides: Sequence[str], *, target: float, z_threshold: float, steps: int,
                tolerance: float) -> tuple[Spec, StrengthGrid]:
    """The scheme's base spec and grid, every argument checked (before anything is opened)."""
    if not 0.0 < target < 1.0:
        raise EvalrunError(f"--target-tpr {target}: must lie strictly between 0 and 1")
    if not math.isfinite(z_threshold):
        raise EvalrunError(f"--z {z_threshold}: must be a finite number")
    if steps < 1:
        raise EvalrunError(f"--steps {steps}: must be at least 1")
    if not 0.0 <= tolerance < 1.0:
        raise EvalrunError(f"--tolerance {tolerance}: must lie in [0, 1)")
    base = parse_spec(scheme, what="--scheme")
    grid = apply_grid(STRENGTH_GRIDS.get(base.name), grid_overrides)
    fixed = sorted(set(base.params) & {grid.outer, grid.inner})
    if fixed:
        raise EvalrunError(f"--scheme {scheme}: {', '.join(fixed)} is what the search sets; use --grid for its range")
    candidate_spec(base, grid, grid.outer_values[0], grid.inner_range[1])  # a bad base spec fails here
    return base, grid


def tune(store: Store, pack: Pack, options: RunOptions, *, scheme: str, target: float, z_threshold: float,
         grid_overrides: Sequence[str] = (), steps: int = 6, tolerance: float = 0.02, refine: bool = True,
         argv: Sequence[str] = (),
         progress: Callable[[Trial], None] | None = None) -> dict[str, Any]:
    """Run the search on ``pack`` with the one model of ``options``; store it as an analysis
    and return what ``--json`` writes: ``{"watermark", "tpr", "tried", ...}``."""
    base, grid = plan_search(scheme, grid_overrides, target=target, z_threshold=z_threshold, steps=steps,
                             tolerance=tolerance)
    start = time.perf_counter()
    measure = StoreMeasure(store, pack, options, z_threshold, argv=argv)
    chosen, tried = search(measure, base, grid, target=target, steps=steps, tolerance=tolerance, refine=refine,
                           progress=progress)
    model = str(options.models[0])
    result = {"watermark": chosen.watermark, "tpr": chosen.tpr, "tpr_ci": [chosen.ci_low, chosen.ci_high],
              "n": chosen.n, "target_tpr": target, "z_threshold": z_threshold, "pack": pack.name, "model": model,
              "scheme": base.canonical(), "grid": {grid.outer: list(grid.outer_values),
                                                   grid.inner: list(grid.inner_range)},
              "steps": steps, "tolerance": tolerance, "refine": refine, "max_tokens": _max_tokens(pack, options),
              "seed": options.seed, "tried": [t.as_json() for t in tried],
              "seconds": round(time.perf_counter() - start, 3)}
    provenance = collect(list(argv))
    config = {k: result[k] for k in ("pack", "model", "scheme", "target_tpr", "z_threshold", "grid", "steps",
                                     "tolerance", "refine", "seed", "max_tokens")}
    store.store_analysis({
        "analysis_key": sha256_hex("tune", canonical_json(config), canonical_json(measure.run_ids)),
        "kind": "tune", "config_json": canonical_json(config), "result_json": json.dumps(result, sort_keys=True),
        "error": None, "seconds": result["seconds"], "run_ids_json": json.dumps(measure.run_ids),
        "git_sha": provenance.get("git_sha"), "evalrun_version": provenance.get("evalrun_version"),
        "created_at": utc_now()})
    return result


def _max_tokens(pack: Pack, options: RunOptions) -> int:
    return params_for(options, pack).max_tokens
