"""WaterBench's joint table (WaterBench, Tu et al., section 3.4, Tables 3-5): for each watermark,
its true-positive rate (TP), the true-negative rate of human reference answers under it (TN), the
generation metric of its outputs (GM) and the drop of GM from the unwatermarked outputs (Drop),
per task, per length category and over all -- computed from stored results. Pure.

* TP: watermarked results whose grade says DETECTED (the grader's rule: z >= the pack's
  ``z_threshold``), with a Wilson interval. WaterBench counts z > 4: the two differ only for a
  z-score of exactly the threshold, which a count-based z-score takes at some lengths (kgw at
  gamma 0.25: 48 scored tokens, 24 green), so the record's params say how many outputs sat
  there (``tp_at_threshold``; for grades with a ``z_threshold``): WaterBench's TP is
  ``(value * n - tp_at_threshold) / n``.
* TN, as WaterBench measures it (``detect_human.py``): the cases' reference answers *not*
  detected under this watermark, each detected with the run's key and the model's tokenizer at
  grading (``metadata["reference_detection"]`` of the watermarked results; one verdict per case
  and key, however many repetitions carry it). A case with no reference answer (open-ended
  tasks), or whose results carry no verdict on it (stores graded before reference answers were
  detected: run ``evalrun run`` again on the store to add them), counts its unwatermarked
  results of the same pack, model and attack instead (``metadata["detections"][spec]``;
  results graded before the watermark was in the store have no verdict and are left out). The
  record's params say how many of each it counted: ``tn_references``, ``tn_outputs``, and
  ``tn_references_missing`` (cases with a reference but no verdict on it) when there are any.
  Wilson interval. The reference answers are detected as written: an attack changes only
  the outputs.
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
from evalrun.pack.grade import reference_text

#: the levels of the joint table, in the order the report shows them
LEVELS = ("all", "category", "task")
#: the records of the joint table, by the column the report shows them in
KINDS = {"wb_tp": "tp", "wb_tn": "tn", "wb_gm": "gm", "wb_gm_unwatermarked": "gm_unwatermarked",
         "wb_gm_drop": "gm_drop"}

Graded = tuple[Mapping[str, Any], dict[str, Any]]  # (result row, its grade's metadata)


def _case(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row's case as run ({} when unreadable)."""
    try:
        case = json.loads(row.get("case_json") or "{}")
    except ValueError:
        return {}
    return case if isinstance(case, dict) else {}


def _case_id(row: Mapping[str, Any]) -> str:
    return str(row.get("case_id") or _case(row).get("id", ""))


def _levels(row: Mapping[str, Any]) -> list[str]:
    """The row's levels as seed strings (``all``, ``category=<name>``, ``task=<name>``): the
    salt of each level's bootstrap seed, as in earlier releases."""
    case = _case(row)
    return ["all", *(f"{k}={case[k]}" for k in ("category", "task") if isinstance(case.get(k), str))]


def _reference_verdicts(members: Sequence[Graded]) -> dict[str, dict[tuple[Any, ...], bool]]:
    """Case id -> its reference answer's verdicts (detected or not) under the group's
    watermark, one per distinct detection: repetitions of a case carry the same verdict for
    the same key and count once; another key's verdict counts apart, as its outputs do."""
    out: dict[str, dict[tuple[Any, ...], bool]] = defaultdict(dict)
    for r, m in members:
        ref = m.get("reference_detection")
        if isinstance(ref, dict) and isinstance(ref.get("detected"), bool):
            evidence = (ref.get("z_score"), ref.get("p_value"), ref.get("num_tokens_scored"))
            out[_case_id(r)][evidence] = ref["detected"]
    return out


def _at_threshold(graded: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``{"tp_at_threshold": k}``: how many of the grades (with a ``z_threshold``) have a
    z-score of exactly that threshold -- detected at z >= it, not by WaterBench's z > 4; {}
    when none has a z threshold."""
    ruled = [m for m in graded if isinstance(m.get("z_threshold"), (int, float))]
    if not ruled:
        return {}
    return {"tp_at_threshold": sum(m.get("z_score") == m["z_threshold"] for m in ruled)}


def _tn(wm: str, references: Mapping[str, Mapping[tuple[Any, ...], bool]], base: Sequence[Graded],
        cases: set[str]) -> tuple[list[bool], int, int]:
    """The TN verdicts (True: detected) of the ``cases`` of one level: reference answers where
    the case has a verdict on one, else its unwatermarked results' verdicts under ``wm``; and
    how many of them came from unwatermarked results, and from cases with a reference answer
    but no verdict on it."""
    verdicts = [v for c in sorted(cases) for v in references.get(c, {}).values()]
    outputs, missing = [], set()
    for r, m in base:
        case_id = _case_id(r)
        if case_id in references or not isinstance(m.get("detections"), dict) or wm not in m["detections"]:
            continue
        outputs.append(bool(m["detections"][wm]["detected"]))
        if reference_text(_case(r)) is not None:
            missing.add(case_id)
    return verdicts + outputs, len(outputs), len(missing)


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
        base_rows: dict[str, list[Graded]] = defaultdict(list)
        for r, m in base.get((pack, model, attack), []):
            for level in _levels(r):
                base_level[level].append(m)
                base_rows[level].append((r, m))
        references = _reference_verdicts(members)
        level_cases: dict[str, set[str]] = defaultdict(set)
        for r, _m in members:
            for level in _levels(r):
                level_cases[level].add(_case_id(r))
        for level in sorted(by_level, key=lambda x: (x != "all", x)):
            seed = stable_int("waterbench", pack, model, wm, attack, level, bits=31)
            ms = by_level[level]
            tp = stats.wilson_interval(sum(m.get("detected") is True for m in ms), len(ms))
            out.append(record(pack, "wb_tp", tp, len(ms), model, wm, attack,
                              params={**level_params(level), **_at_threshold(ms)}))
            verdicts, outputs, missing = _tn(wm, references, base_rows.get(level, []), level_cases[level])
            tn = stats.wilson_interval(sum(not v for v in verdicts), len(verdicts))
            counts = {"tn_references": len(verdicts) - outputs, "tn_outputs": outputs,
                      **({"tn_references_missing": missing} if missing else {})}
            out.append(record(pack, "wb_tn", tn, len(verdicts), model, wm, attack,
                              params={**level_params(level), **counts}))
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


def _tn_sources(r: MetricRecord) -> str:
    """``: 26 ref + 6 out`` for a TN record counted on both reference answers and
    unwatermarked outputs (with ``, 3 refs missing`` for cases with a reference but no verdict
    on it); nothing for other records."""
    refs, outs = r.params.get("tn_references"), r.params.get("tn_outputs")
    if refs is None or outs is None:
        return ""
    missing = r.params.get("tn_references_missing")
    return f": {refs:g} ref + {outs:g} out" + (f", {missing:g} refs missing" if missing else "")


def table_rows(records: Sequence[MetricRecord]) -> list[list[str]]:
    """Report rows (pack, model, watermark, attack, level, TP, TN, GM, GM unwatermarked,
    Drop) from :func:`waterbench_records`' output; the TN cell says where its verdicts came
    from (reference answers, unwatermarked outputs)."""
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
        tied = r.params.get("tp_at_threshold")
        at = f", {tied:g} at the threshold" if tied else ""
        return f"{100 * r.value:.1f}{ci} [{r.n}{_tn_sources(r)}{at}]"

    def num(r: MetricRecord | None) -> str:
        return "n/a" if r is None or r.value is None else f"{100 * r.value:.1f}"

    for key in sorted(cells, key=lambda k: (k[:4], rank[k[4]])):
        c = cells[key]
        drop = c.get("gm_drop")
        rows.append([*key[:4], key[4], pct(c.get("tp")), pct(c.get("tn")), num(c.get("gm")),
                     num(c.get("gm_unwatermarked")),
                     "n/a" if drop is None or drop.value is None else f"{100 * drop.value:.1f}%"])
    return rows
