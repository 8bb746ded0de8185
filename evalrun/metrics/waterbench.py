"""WaterBench's joint table (WaterBench, Tu et al., section 3.4, Tables 3-5): for each watermark,
its true-positive rate (TP), the true-negative rate of unwatermarked outputs under it (TN), the
generation metric of its outputs (GM) and the drop of GM from the unwatermarked outputs (Drop),
per task, per length category and over all -- computed from stored results. Pure.

* TP: watermarked results whose grade says DETECTED (the grader's rule: z >= the pack's
  ``z_threshold``), with a Wilson interval.
* TN: unwatermarked results of the same pack, model and attack *not* detected under this
  watermark (``metadata["detections"][spec]``; results graded before the watermark was in the
  store have no verdict for it and are left out), with a Wilson interval.
* GM: the mean of the grade's ``gm`` (token F1 or ROUGE-L F1, :mod:`evalrun.pack.overlap`)
  with a bootstrap interval over results; ``gm_unwatermarked`` the same for the baseline.
* Drop: ``(GM_unwatermarked - GM) / GM_unwatermarked`` (WaterBench's relative drop, "↓60.7%").

Only packs whose grades carry ``gm_metric`` (the ``waterbench`` pack's grader) are covered.
Records are named ``wb_tp``, ``wb_tn``, ``wb_gm``, ``wb_gm_unwatermarked`` and ``wb_gm_drop``;
their level is in params: ``{"level": "all"}``, ``{"level": "category", "category": <name>}``
or ``{"level": "task", "task": <name>}``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

from evalrun._util.hashing import stable_int
from evalrun._util.specs import is_none
from evalrun.metrics import stats
from evalrun.metrics.aggregates import MetricRecord, record, row_metadata

#: the levels of the joint table, in the order the report shows them
LEVELS = ("all", "category", "task")
#: the records of the joint table, by the column the report shows them in
KINDS = {"wb_tp": "tp", "wb_tn": "tn", "wb_gm": "gm", "wb_gm_unwatermarked": "gm_unwatermarked",
         "wb_gm_drop": "gm_drop"}

Graded = tuple[Mapping[str, Any], dict[str, Any]]  # (result row, its grade's metadata)


def _levels(row: Mapping[str, Any]) -> list[str]:
    """The row's levels as seed strings (``all``, ``category=<name>``, ``task=<name>``): the
    salt of each level's bootstrap seed, as in earlier releases."""
    try:
        case = json.loads(row.get("case_json") or "{}")
    except ValueError:
        case = {}
    out = ["all"]
    if isinstance(case, dict):
        out += [f"{k}={case[k]}" for k in ("category", "task") if isinstance(case.get(k), str)]
    return out


def level_params(level: str) -> dict[str, str | float]:
    """A level (``all``, ``category=<name>``, ``task=<name>``) as a record's params."""
    kind, _, name = level.partition("=")
    return {"level": "all"} if kind == "all" else {"level": kind, kind: name}


def level_label(params: Mapping[str, str | float]) -> str:
    """How the report shows a record's level: ``all``, ``category=<name>``, ``task=<name>``."""
    kind = str(params.get("level", ""))
    return kind if kind == "all" else f"{kind}={params.get(kind, '')}"


def _est(value: float) -> stats.Estimate:
    return stats.Estimate(value, math.nan, math.nan)


def _record(pack: str, metric: str, est: stats.Estimate, n: int, group: tuple[str, str, str],
            level: str) -> MetricRecord:
    model, wm, attack = group
    return record(pack, metric, est, n, model, wm, attack, params=level_params(level))


def waterbench_records(rows: Iterable[Mapping[str, Any]]) -> list[MetricRecord]:
    """The records of the module docstring, in a stable order."""
    done = [r for r in rows if r.get("error") is None and r.get("label") is not None]
    graded: list[Graded] = [(r, m) for r in done for m in [row_metadata(r)] if "gm_metric" in m]
    base: dict[tuple[str, str, str], list[Graded]] = defaultdict(list)
    marked: dict[tuple[str, str, str, str], list[Graded]] = defaultdict(list)
    for r, m in graded:
        if is_none(r["watermark"]):
            base[(r["pack"], r["model"], r["attack"])].append((r, m))
        else:
            marked[(r["pack"], r["model"], r["watermark"], r["attack"])].append((r, m))
    out: list[MetricRecord] = []
    for (pack, model, wm, attack), members in sorted(marked.items()):
        group = (model, wm, attack)
        by_level: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r, m in members:
            for level in _levels(r):
                by_level[level].append(m)
        base_level: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r, m in base.get((pack, model, attack), []):
            for level in _levels(r):
                base_level[level].append(m)
        for level in sorted(by_level, key=lambda x: (x != "all", x)):
            seed = stable_int("waterbench", pack, model, wm, attack, level, bits=31)
            ms = by_level[level]
            tp = stats.wilson_interval(sum(m.get("detected") is True for m in ms), len(ms))
            out.append(_record(pack, "wb_tp", tp, len(ms), group, level))
            verdicts = [m["detections"][wm]["detected"] for m in base_level.get(level, [])
                        if isinstance(m.get("detections"), dict) and wm in m["detections"]]
            tn = stats.wilson_interval(sum(not v for v in verdicts), len(verdicts))
            out.append(_record(pack, "wb_tn", tn, len(verdicts), group, level))
            gms = [float(m["gm"]) for m in ms if m.get("gm") is not None]
            base_gms = [float(m["gm"]) for m in base_level.get(level, []) if m.get("gm") is not None]
            if not gms:
                continue
            gm = stats.bootstrap_mean_ci(gms, seed=seed)
            out.append(_record(pack, "wb_gm", gm, len(gms), group, level))
            if base_gms:
                gm_base = stats.bootstrap_mean_ci(base_gms, seed=seed + 1)
                out.append(_record(pack, "wb_gm_unwatermarked", gm_base, len(base_gms), group, level))
                drop = (gm_base.value - gm.value) / gm_base.value if gm_base.value > 0 else math.nan
                out.append(_record(pack, "wb_gm_drop", _est(drop), len(gms), group, level))
    return out


def table_rows(records: Sequence[MetricRecord]) -> list[list[str]]:
    """Report rows (pack, model, watermark, attack, level, TP, TN, GM, GM unwatermarked,
    Drop) from :func:`waterbench_records`' output."""
    cells: dict[tuple[str, str, str, str, str], dict[str, MetricRecord]] = defaultdict(dict)
    rank: dict[str, tuple[int, str]] = {}  # level label -> where it sorts: all, categories, tasks
    for r in records:
        if r.metric in KINDS:
            label = level_label(r.params)
            level = str(r.params.get("level", ""))
            rank[label] = (LEVELS.index(level) if level in LEVELS else len(LEVELS), label)
            cells[(r.pack, r.model, r.watermark, r.attack, label)][KINDS[r.metric]] = r
    rows = []

    def pct(r: MetricRecord | None) -> str:
        if r is None or r.value is None:
            return "n/a"
        ci = f" ({100 * r.ci_low:.0f}–{100 * r.ci_high:.0f})" if r.ci_low is not None and r.ci_high is not None else ""
        return f"{100 * r.value:.1f}{ci} [{r.n}]"

    def num(r: MetricRecord | None) -> str:
        return "n/a" if r is None or r.value is None else f"{100 * r.value:.1f}"

    for key in sorted(cells, key=lambda k: (k[:4], rank[k[4]])):
        c = cells[key]
        drop = c.get("gm_drop")
        rows.append([*key[:4], key[4], pct(c.get("tp")), pct(c.get("tn")), num(c.get("gm")),
                     num(c.get("gm_unwatermarked")),
                     "n/a" if drop is None or drop.value is None else f"{100 * drop.value:.1f}%"])
    return rows
