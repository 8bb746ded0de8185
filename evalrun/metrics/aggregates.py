"""Registered aggregates over stored results, and ``metrics.json``.

An aggregate takes the results of one group -- one pack, model, watermark and attack -- and
returns named estimates. The run summary, ``evalrun report`` and ``evalrun export`` compute
every registered aggregate over their selection and write the records to ``metrics.json``
(one record per aggregate: pack, metric, params, value, n, ci_low, ci_high, model, watermark,
attack), the numbers the report's tables show, machine-readable.

``metric`` is a bare name (``quality_retention``, ``tpr_at_fpr``); what else tells two records
of one metric and group apart -- the quality source, the target FPR, the judge, the
temperature -- is in ``params``, a flat ``{name: str | float}`` dict (``{}`` for most metrics),
never packed into the name: read ``record.params["quality"]``, do not split the name.
Aggregates register in :data:`AGGREGATES` (third-party ones through the ``evalrun.metrics``
entry-point group).

An aggregate may return a fourth item, the watermark its estimate is about, when that is not
the group's own: the false-positive rate of unwatermarked texts is a property of the detector
that looked at them; and a fifth, the record's params (the fourth is then None for the
group's own watermark). Aggregates that compare groups -- watermarked against unwatermarked
texts (ROC AUC), attacked against unattacked (quality retention), all attacks of a watermark
(tamper resistance) -- register in :data:`SELECTION_AGGREGATES` instead: they receive every
row of the selection and return whole records (entry-point group
``evalrun.selection_metrics``). The watermark benchmark's aggregates (MarkMyWords) live in
:mod:`evalrun.metrics.benchmark`, which the package imports (``evalrun/metrics/__init__``), so
:func:`compute` always includes them.

Values are floats; ``+inf`` (a watermark size when most texts are never detected) stays
``inf`` in a :class:`MetricRecord` and is written as ``null`` in metrics.json, like NaN (JSON
has no infinity).

:func:`mean_score` is the one definition of a mean score used everywhere (summary table,
``--fail-under``, report, metrics.json): each case's repetitions are averaged first, a result
that could not be graded (failed model call, attack or grader) counting 0, then the cases;
its 95% interval is a bootstrap over cases with a seed derived from the group.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Tuple, Union, cast

from evalrun._util.files import write_text
from evalrun._util.hashing import stable_int
from evalrun._util.registry import Registry
from evalrun.metrics import stats

#: columns of a metrics.json record, in order
FIELDS = ("pack", "metric", "params", "value", "n", "ci_low", "ci_high", "model", "watermark", "attack")

#: a record's dimensions besides its group: name -> text or number (``{"quality": "rating"}``)
Params = dict[str, Union[str, float]]


@dataclass(frozen=True)
class MetricRecord:
    pack: str
    metric: str
    value: float | None
    n: int
    ci_low: float | None
    ci_high: float | None
    model: str
    watermark: str
    attack: str
    #: what tells records of one metric and group apart (quality source, target FPR, judge...);
    #: empty for most metrics. Left out of the hash (a dict has none); equality compares it.
    params: Params = field(default_factory=dict, hash=False)

    def as_json(self) -> dict[str, Any]:
        """The record as metrics.json holds it: a non-finite number (NaN, +-inf) is null."""
        return {f: _finite(getattr(self, f)) if f in _NUMBERS else
                dict(self.params) if f == "params" else getattr(self, f) for f in FIELDS}

    @property
    def params_key(self) -> tuple[tuple[str, str | float], ...]:
        """``params`` as a hashable, order-free key (see :func:`params_key`)."""
        return params_key(self.params)


#: params that describe a record rather than tell it apart from others: how its interval was
#: made (``interval``), whether it saturates (``saturated``), what it rests on that a reader
#: should weigh (``caveat``). Not part of :func:`params_key`, so a reader finds
#: ``{"quality": "mauve"}`` whatever its notes say.
NOTES = frozenset({"interval", "saturated", "caveat"})


def params_key(params: Mapping[str, str | float] | None) -> tuple[tuple[str, str | float], ...]:
    """A params dict as a sorted tuple of items, :data:`NOTES` left out: how records are
    indexed and compared."""
    return tuple(sorted((k, v) for k, v in (params or {}).items() if k not in NOTES))


_NUMBERS = ("value", "ci_low", "ci_high")

Row = Mapping[str, Any]
#: ``(metric name, estimate, n)``; ``(metric name, estimate, n, watermark)`` for an estimate
#: about another watermark than the group's (see the module docstring); or
#: ``(metric name, estimate, n, watermark or None, params)`` for a record with params (None:
#: the group's watermark)
Estimated = Union[Tuple[str, stats.Estimate, int], Tuple[str, stats.Estimate, int, str],
                  Tuple[str, stats.Estimate, int, Optional[str], Mapping[str, Union[str, float]]]]
#: ``(rows of one group, group seed) -> [(metric name, estimate, n[, watermark[, params]])]``
Aggregate = Callable[[Sequence[Row], int], Sequence[Estimated]]
AGGREGATES: Registry[Aggregate] = Registry("metric", "evalrun.metrics", option="--metric")
#: ``(every row of the selection) -> records``: aggregates comparing groups
SelectionAggregate = Callable[[Sequence[Row]], Sequence[MetricRecord]]
SELECTION_AGGREGATES: Registry[SelectionAggregate] = Registry(
    "selection metric", "evalrun.selection_metrics", option="--metric")


def graded(row: Row) -> bool:
    return row["error"] is None and row["label"] is not None and row["score"] is not None


def row_metadata(row: Row) -> dict[str, Any]:
    """A result row's grade metadata (``metadata_json``) as a dict; an empty one when absent
    or unreadable, so an aggregate skips the row instead of failing the whole report."""
    text = row.get("metadata_json")
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def group_seed(pack: str, model: str, watermark: str, attack: str) -> int:
    """A group's bootstrap seed: stable, and independent of which other groups exist."""
    return stable_int("metrics", pack, model, watermark, attack, bits=31)


def case_means(rows: Iterable[Row]) -> dict[tuple[str, ...], float]:
    """(pack, model, watermark, attack, case_id) -> mean over its repetitions, a result
    without a grade counting 0."""
    acc: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for r in rows:
        key = (r["pack"], r["model"], r["watermark"], r["attack"], r["case_id"])
        acc[key].append(float(r["score"]) if graded(r) else 0.0)
    return {k: sum(v) / len(v) for k, v in sorted(acc.items())}


def mean_score(rows: Sequence[Row], seed: int) -> stats.Estimate:
    """The mean score of a group of results (see the module docstring)."""
    return _mean_of_cases(case_means(rows), seed)


def _mean_of_cases(means: Mapping[tuple[str, ...], float], seed: int) -> stats.Estimate:
    return stats.bootstrap_mean_ci(list(means.values()), seed=seed)


@AGGREGATES.register("mean_score")
def _mean_score(rows: Sequence[Row], seed: int) -> list[tuple[str, stats.Estimate, int]]:
    means = case_means(rows)
    return [("mean_score", _mean_of_cases(means, seed), len(means))]


@AGGREGATES.register("label_rate")
def _label_rates(rows: Sequence[Row], seed: int) -> list[Estimated]:
    """Share of graded results with each label (Wilson interval): ``rate``, params
    ``{"label": LABEL}``."""
    done = [r for r in rows if graded(r)]
    labels = sorted({r["label"] for r in done})
    return [("rate", stats.wilson_interval(sum(r["label"] == label for r in done), len(done)), len(done), None,
             {"label": label}) for label in labels]


@AGGREGATES.register("error_rate")
def _error_rate(rows: Sequence[Row], seed: int) -> list[tuple[str, stats.Estimate, int]]:
    """Share of results without a grade: failed model calls, attacks or graders."""
    return [("error_rate", stats.wilson_interval(sum(r["error"] is not None for r in rows), len(rows)), len(rows))]


def _number(x: float | None) -> float | None:
    """NaN (undefined) -> None; +-inf is kept (see :meth:`MetricRecord.as_json`)."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def record(pack: str, metric: str, est: stats.Estimate, n: int, model: str, watermark: str,
           attack: str, *, params: Mapping[str, str | float] | None = None) -> MetricRecord:
    """One record from an estimate (NaN -> None): the one constructor every builder uses.
    ``metric`` is a bare name; its dimensions go in ``params``, whose values must be text or
    finite numbers (metrics.json holds them as they are); a :data:`NOTES` param may be a flag."""
    for key, v in (params or {}).items():
        if isinstance(v, bool) and key in NOTES:
            continue  # a flag such as ``saturated``
        if isinstance(v, bool) or not isinstance(v, (str, int, float)) or (
                isinstance(v, float) and not math.isfinite(v)):
            raise ValueError(f"metric {metric!r}: param {key!r} must be text or a finite number, got {v!r}")
    return MetricRecord(pack=pack, metric=metric, value=_number(est.value), n=n,
                        ci_low=_number(est.low), ci_high=_number(est.high), model=model,
                        watermark=watermark, attack=attack, params=dict(params or {}))


def compute(rows: Iterable[Row]) -> list[MetricRecord]:
    """Every registered aggregate over each (pack, model, watermark, attack) group, then every
    selection aggregate over all the rows."""
    rows = list(rows)
    groups: dict[tuple[str, str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r["pack"], r["model"], r["watermark"], r["attack"])].append(r)
    out = []
    for (pack, model, watermark, attack), members in sorted(groups.items()):
        seed = group_seed(pack, model, watermark, attack)
        for name in AGGREGATES.names():
            for metric, est, n, *extra in AGGREGATES.get(name)(members, seed):
                about = cast(Optional[str], extra[0]) if extra else None
                params = cast(Optional[Mapping[str, Union[str, float]]], extra[1]) if len(extra) > 1 else None
                out.append(record(pack, metric, est, n, model, watermark if about is None else about, attack,
                                  params=params))
    for name in SELECTION_AGGREGATES.names():
        out.extend(SELECTION_AGGREGATES.get(name)(rows))
    return out


def write_metrics_json(records: Sequence[MetricRecord], path: str | Path, *, what: str = "metrics.json") -> Path:
    """A JSON list of records at ``path``, one per line-wrapped object (NaN written as null),
    written whole or not at all (``what`` names the option in errors)."""
    body = ",\n".join(" " + json.dumps(r.as_json(), allow_nan=False) for r in records)
    return write_text(path, f"[\n{body}\n]\n" if records else "[]\n", what=what)


def metrics_path_beside(path: str | Path) -> Path:
    """Where the run summary and export write metrics.json: ``results.sqlite`` ->
    ``results.metrics.json`` next to it."""
    path = Path(path)
    return path.with_name(f"{path.stem}.metrics.json")


# WaterDrum: forget/retain verification scores and AUROC per model
AGGREGATES.register_lazy("waterdrum", "evalrun.unlearning.aggregates:waterdrum_aggregate")
# repetition diagnostics of the unattacked outputs of detection packs: distinct-1/2, rep-4
AGGREGATES.register_lazy("repetition", "evalrun.metrics.repetition:repetition_aggregate")
