"""metrics.json records of the quality analyses, read from the store: the pairwise judges'
preferences (:mod:`evalrun.metrics.pairwise`, Singh & Zou) and the distinguishability classifiers
(:mod:`evalrun.analysis.distinguish`, Singh & Zou appendix B), for the results of a selection.

They come beside the per-group aggregates of :func:`evalrun.metrics.aggregates.compute`
wherever ``metrics.json`` is written from a store (``evalrun report``, ``evalrun export``), so
the report's quality tables and ``metrics.json`` hold the same numbers.

Distinguishability records, one per stored analysis whose model and watermarked results are in
the selection, with params ``{"classifier": <c>, "embedder": <e>}`` (the embedder spec):

* ``distinguish_accuracy`` -- the mean accuracy over the folds; its interval is Wilson's over
  the texts, each text classified once out of fold (correct texts = each fold's accuracy times
  its size, summed);
* ``distinguish_roc_auc`` -- the mean ROC AUC over the folds (no interval; the report shows
  the spread over folds).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from evalrun.metrics.aggregates import MetricRecord, record
from evalrun.metrics.analyses import sweep_records, tune_records
from evalrun.metrics.pairwise import pair_answers, preference_records
from evalrun.metrics.stats import Estimate, wilson_interval
from evalrun.metrics.waterbench import waterbench_records
from evalrun.store.database import Store


def distinguish_analyses(store: Store, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The stored distinguish results (``analyses.result_json``) about models and watermarks
    the selection holds, oldest first."""
    present = {(r["model"], r["watermark"]) for r in rows}
    out = []
    for a in store.analyses("distinguish"):
        if a["result_json"] is None:
            continue
        result = json.loads(a["result_json"])
        if (result.get("model"), result.get("watermark")) in present:
            out.append(result)
    return out


def distinguish_records(results: Sequence[Mapping[str, Any]]) -> list[MetricRecord]:
    """The records of the module docstring for stored distinguish results."""
    out = []
    for result in results:
        pack = "+".join(result["packs"])
        for name, m in sorted(result["classifiers"].items()):
            sizes = m["fold_sizes"]
            correct = round(sum(acc * size for acc, size in zip(m["accuracy"]["folds"], sizes)))
            interval = wilson_interval(correct, sum(sizes))
            acc = Estimate(m["accuracy"]["mean"], interval.low, interval.high)
            params: dict[str, str | float] = {"classifier": name, "embedder": result["embedder"]}
            for metric, est in (("distinguish_accuracy", acc),
                                ("distinguish_roc_auc", Estimate(m["roc_auc"]["mean"], float("nan"), float("nan")))):
                out.append(record(pack, metric, est, int(result["n"]), result["model"], result["watermark"],
                                  result["attack"], params=params))
    return out


def tune_analyses(store: Store, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The stored ``evalrun tune`` searches on packs and models the selection holds."""
    present = {(r["pack"], r["model"]) for r in rows}
    return [result for a in store.analyses("tune") if a["result_json"] is not None
            for result in [json.loads(a["result_json"])] if (result.get("pack"), result.get("model")) in present]


def sweep_analyses(store: Store, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The stored ``evalrun sweep`` results on packs and models the selection holds."""
    present = {(r["pack"], r["model"]) for r in rows}
    return [result for a in store.analyses("sweep") if a["result_json"] is not None
            for result in [json.loads(a["result_json"])] if (result.get("pack"), result.get("model")) in present]


def quality_records(store: Store, rows: Sequence[Mapping[str, Any]]) -> list[MetricRecord]:
    """Every quality record for the selection ``rows`` (see the module docstring; the tuning
    records are :func:`evalrun.metrics.analyses.tune_records`, WaterBench's TP/TN/GM
    :func:`evalrun.metrics.waterbench.waterbench_records`)."""
    return [*preference_records(pair_answers(store, rows)), *distinguish_records(distinguish_analyses(store, rows)),
            *tune_records(tune_analyses(store, rows)), *waterbench_records(rows),
            *sweep_records(sweep_analyses(store, rows))]
