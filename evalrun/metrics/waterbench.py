"""WaterBench's joint table (Tu et al., seed 002 section 3.4, Tables 3-5): for each watermark,
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
* Drop: ``(GM_unwatermarked - GM) / GM_unwatermarked`` (the seed's relative drop, "↓60.7%").

Only packs whose grades carry ``gm_metric`` (the ``waterbench`` pack's grader) are covered.
Records are named ``wb_<tp|tn|gm|gm_unwatermarked|gm_drop>:<level>``, ``<level>`` being ``all``,
``category=<name>`` or ``task=<name>``.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

from evalrun._util.hashing import stable_int
from evalrun._util.specs import is_none
from evalrun.metrics import stats
from evalrun.metrics.aggregates import MetricRecord, row_metadata


def _levels(row: Mapping[str, Any]) -> list[str]:
    try:
        case = json.loads(row.get("case_json") or "{}")
    except ValueError:
        case = {}
    out = ["all"]
    if isinstance(case, dict):
        out += [f"{k}={case[k]}" for k in ("category", "task") if isinstance(case.get(k), str)]
    return out


def _est(value: float) -> stats.Estimate:
    return stats.Estimate(value, math.nan, math.nan)


def waterbench_records(rows: Iterable[Mapping[str, Any]]) -> list[MetricRecord]:
    """The records of the module docstring, in a stable order."""
    from evalrun.metrics.aggregates import _number

    graded = [r for r in rows if r.get("error") is None and r.get("label") is not None]
    graded = [(r, row_metadata(r)) for r in graded]
    graded = [(r, m) for r, m in graded if "gm_metric" in m]
    base: dict[tuple[str, str, str], list[tuple[Mapping[str, Any], dict[str, Any]]]] = defaultdict(list)
    marked: dict[tuple[str, str, str, str], list[tuple[Mapping[str, Any], dict[str, Any]]]] = defaultdict(list)
    for r, m in graded:
        if is_none(r["watermark"]):
            base[(r["pack"], r["model"], r["attack"])].append((r, m))
        else:
            marked[(r["pack"], r["model"], r["watermark"], r["attack"])].append((r, m))
    out: list[MetricRecord] = []

    def add(pack: str, metric: str, est: stats.Estimate, n: int, model: str, wm: str, attack: str) -> None:
        out.append(MetricRecord(pack=pack, metric=metric, value=_number(est.value), n=n, ci_low=_number(est.low),
                                ci_high=_number(est.high), model=model, watermark=wm, attack=attack))

    for (pack, model, wm, attack), members in sorted(marked.items()):
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
            add(pack, f"wb_tp:{level}", tp, len(ms), model, wm, attack)
            verdicts = [m["detections"][wm]["detected"] for m in base_level.get(level, [])
                        if isinstance(m.get("detections"), dict) and wm in m["detections"]]
            add(pack, f"wb_tn:{level}", stats.wilson_interval(sum(not v for v in verdicts), len(verdicts)),
                len(verdicts), model, wm, attack)
            gms = [float(m["gm"]) for m in ms if m.get("gm") is not None]
            base_gms = [float(m["gm"]) for m in base_level.get(level, []) if m.get("gm") is not None]
            if not gms:
                continue
            gm = stats.bootstrap_mean_ci(gms, seed=seed)
            add(pack, f"wb_gm:{level}", gm, len(gms), model, wm, attack)
            if base_gms:
                gm_base = stats.bootstrap_mean_ci(base_gms, seed=seed + 1)
                add(pack, f"wb_gm_unwatermarked:{level}", gm_base, len(base_gms), model, wm, attack)
                drop = (gm_base.value - gm.value) / gm_base.value if gm_base.value > 0 else math.nan
                add(pack, f"wb_gm_drop:{level}", _est(drop), len(gms), model, wm, attack)
    return out


def table_rows(records: Sequence[MetricRecord]) -> list[list[str]]:
    """Report rows (pack, model, watermark, attack, level, TP, TN, GM, GM unwatermarked,
    Drop) from :func:`waterbench_records`' output."""
    cells: dict[tuple[str, str, str, str, str], dict[str, MetricRecord]] = defaultdict(dict)
    for r in records:
        kind, _, level = r.metric.partition(":")
        if kind.startswith("wb_"):
            cells[(r.pack, r.model, r.watermark, r.attack, level)][kind[3:]] = r
    rows = []

    def pct(r: MetricRecord | None) -> str:
        if r is None or r.value is None:
            return "n/a"
        ci = f" ({100 * r.ci_low:.0f}–{100 * r.ci_high:.0f})" if r.ci_low is not None else ""
        return f"{100 * r.value:.1f}{ci} [{r.n}]"

    def num(r: MetricRecord | None) -> str:
        return "n/a" if r is None or r.value is None else f"{100 * r.value:.1f}"

    order = {"all": 0, "category": 1, "task": 2}
    for key in sorted(cells, key=lambda k: (k[:4], order.get(k[4].split("=")[0], 3), k[4])):
        c = cells[key]
        drop = c.get("gm_drop")
        rows.append([*key[:4], key[4], pct(c.get("tp")), pct(c.get("tn")), num(c.get("gm")),
                     num(c.get("gm_unwatermarked")),
                     "n/a" if drop is None or drop.value is None else f"{100 * drop.value:.1f}%"])
    return rows
