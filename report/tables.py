"""Every table of the report, computed from loaded results. Cells are formatted strings.

Counting conventions, used by every table and by the tests that re-count with SQL:
* a result is *graded* when it has a label and no error; rates divide by graded results;
* errors (``error`` set: a failed model call, or a grader that failed, label GRADER_ERROR)
  are counted in their own column, never as a label;
* mean scores average each case's repetitions first, then the cases (bootstrap CI over cases),
  a result without a grade (an error) counting 0 -- the one definition in
  :mod:`evalrun.metrics.aggregates`;
* rates carry a Wilson 95% interval over graded results, from
  :func:`evalrun.metrics.stats.wilson_interval` (:func:`label_rate`; the report has no formula
  of its own).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from itertools import combinations
from typing import Any, Iterable, Sequence

import numpy as np

from evalrun._util.display import interval_text
from evalrun._util.specs import is_none
from evalrun.metrics import aggregates, stats
from evalrun.report.data import PackView, ReportData, Result, is_detection_view, slug, systems
from evalrun.report.document import Example, Table
from evalrun.store.database import run_status
from evalrun.watermark.verdict import DETECTED, NOT_DETECTED

NA = "n/a"
OUTPUT_CHARS = 160      # model output shown in per-case tables
EXAMPLE_CHARS = 600     # model output shown in failure examples
COMPACT_CHARS = 120     # reason / output in report.md's compact per-case rows (a full spec fits)
#: a system name longer than this is shown by its key (S1, S2, ...) in the appendix's long tables
KEY_NAME_CHARS = 40


# -- formatting ----------------------------------------------------------------------------

def pct(x: float) -> str:
    return NA if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def pct_ci(est: stats.Estimate) -> str:
    return NA if math.isnan(est.low) else interval_text(est.low, est.high, percent=True)


def num(x: float | None, digits: int = 3) -> str:
    return NA if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def num_ci(est: stats.Estimate, digits: int = 3) -> str:
    return NA if math.isnan(est.low) else f"({est.low:.{digits}f}, {est.high:.{digits}f})"


def shorten(text: str | None, limit: int) -> str:
    if text is None:
        return NA
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# -- shared aggregates ---------------------------------------------------------------------

def by_system(items: Iterable[Result]) -> dict[str, list[Result]]:
    out: dict[str, list[Result]] = defaultdict(list)
    for r in items:
        out[r.system].append(r)
    return out


def case_scores(items: Iterable[Result]) -> dict[str, float]:
    """case_id -> mean score over its repetitions (one system's items; the one definition)."""
    return {key[-1]: v for key, v in aggregates.case_means([r.row for r in items]).items()}


def case_labels(items: Iterable[Result]) -> dict[str, list[str]]:
    """case_id -> labels of its graded repetitions, in repetition order."""
    acc: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for r in items:
        if r.graded:
            acc[r.case_id].append((r.repetition, r.label))
    return {cid: [lab for _, lab in sorted(v)] for cid, v in sorted(acc.items())}


def mean_score(items: Sequence[Result], seed: int | None = None) -> stats.Estimate:
    """The one mean score (:func:`evalrun.metrics.aggregates.mean_score`: ungraded results
    count 0); a whole system's uses its group's seed, so its interval equals metrics.json's."""
    if seed is None:
        first = items[0]
        seed = aggregates.group_seed(first.pack, first.model, first.watermark, first.attack)
    return aggregates.mean_score([r.row for r in items], seed)


def label_rate(items: Iterable[Result], label: str | None) -> stats.Estimate:
    """Share of the graded results of ``items`` labelled ``label``, with its Wilson 95%
    interval: :func:`evalrun.metrics.stats.wilson_interval` on the counts (NaNs for none)."""
    graded = [r for r in items if r.graded]
    return stats.wilson_interval(sum(r.label == label for r in graded), len(graded))


def flip(items: Sequence[Result]) -> str:
    flipped, eligible = stats.flip_rate(case_labels(items))
    return NA if eligible == 0 else f"{pct(flipped / eligible)} ({flipped}/{eligible})"


def _seed(*parts: str) -> int:
    """A stable per-table seed so adding a model does not change another model's CI."""
    h = 0
    for ch in "\x1f".join(parts):
        h = (h * 131 + ord(ch)) % 2_147_483_647
    return (stats.DEFAULT_SEED + h) % 2_147_483_647


# -- pack summaries ------------------------------------------------------------------------

def label_summary(view: PackView, items: Sequence[Result]) -> Table:
    """The WMID report's summary per model: cases, label counts, success rate (Wilson), mean score
    (bootstrap over cases), flip rate; for extraction also the control false-positive rate."""
    groups = by_system(items)
    has_ungraded = any(not r.graded and not r.has_error for r in items)
    rate_name = view.success_rate_name
    headers = ["model", "cases", "results", *view.labels, "errors"]
    if has_ungraded:
        headers.append("ungraded")
    headers += [rate_name, "95% CI (Wilson)", "mean score", "95% CI (bootstrap)", "flip rate"]
    if view.control_group:
        headers += ["FP rate on controls", "FP 95% CI"]
    rows = []
    for name in systems(items):
        rs = groups[name]
        graded = [r for r in rs if r.graded]
        counts = Counter(r.label for r in graded)
        rate = label_rate(graded, view.success)
        mean = mean_score(rs)
        row = [name, str(len({r.case_id for r in rs})), str(len(rs)),
               *[str(counts[lab]) for lab in view.labels],
               str(sum(r.has_error for r in rs))]
        if has_ungraded:
            row.append(str(sum(not r.graded and not r.has_error for r in rs)))
        row += [pct(rate.value), pct_ci(rate), num(mean.value), num_ci(mean), flip(rs)]
        if view.control_group:
            fp = false_positive_rate(view, rs)
            row += [pct(fp.value), pct_ci(fp)]
        rows.append(row)
    extra = sorted({r.label for r in items if r.graded} - set(view.labels))
    caption = (f"{rate_name} = {view.success} / graded results; errors are failed model calls and "
               "grader errors, in no label column.")
    if view.control_group:
        caption += (f" FP rate = {view.false_positive} / graded results on "
                    f"{view.control_group} cases.")
    if extra:
        caption += f" Labels outside the pack's set: {', '.join(extra)} (see the generic table)."
    return Table(id=f"{slug(view.name)}-summary", headers=headers, rows=rows, caption=caption)


def false_positive_rate(view: PackView, items: Sequence[Result]) -> stats.Estimate:
    """Share of the graded control results labelled as a false positive (Wilson 95%)."""
    return label_rate((r for r in items if r.group == view.control_group), view.false_positive)


def group_breakdown(view: PackView, items: Sequence[Result]) -> Table:
    """Label counts and success rate per model and group (family / scheme)."""
    field = view.group_field or "group"
    present = sorted({r.group for r in items}, key=lambda g: (g not in view.groups,
                     view.groups.index(g) if g in view.groups else 0, g))
    cells: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for r in items:
        cells[(r.system, r.group)].append(r)
    rate_name = f"{view.success} rate" if view.success else "mean score"
    headers = ["model", field, "results", *view.labels, "errors", rate_name, "95% CI"]
    rows = []
    for name in systems(items):
        for g in present:
            rs = cells.get((name, g), [])
            if not rs:
                continue
            graded = [r for r in rs if r.graded]
            counts = Counter(r.label for r in graded)
            if view.success:
                est = label_rate(graded, view.success)
                rate, ci = pct(est.value), pct_ci(est)
            else:
                est = mean_score(rs, _seed(view.name, name, g))
                rate, ci = num(est.value), num_ci(est)
            rows.append([name, g, str(len(rs)), *[str(counts[lab]) for lab in view.labels],
                         str(sum(r.has_error for r in rs)), rate, ci])
    return Table(id=f"{slug(view.name)}-by-{slug(field)}", headers=headers, rows=rows,
                 caption=f"Per model and {field}.")


def generic_summary(view: PackView, items: Sequence[Result]) -> Table:
    """For any pack: label counts, score distribution and mean score (bootstrap CI)."""
    labels = sorted({r.label for r in items if r.graded})
    headers = ["model", "cases", "results", *labels, "errors", "min", "p25", "median", "p75",
               "max", "mean score", "95% CI (bootstrap)", "flip rate"]
    rows = []
    groups = by_system(items)
    for name in systems(items):
        rs = groups[name]
        graded = [r for r in rs if r.graded]
        counts = Counter(r.label for r in graded)
        scores = np.array([float(r.score) for r in graded if r.score is not None])
        if scores.size:
            qs = [num(float(q)) for q in np.quantile(scores, [0.0, 0.25, 0.5, 0.75, 1.0])]
        else:
            qs = [NA] * 5
        mean = mean_score(rs)
        rows.append([name, str(len({r.case_id for r in rs})), str(len(rs)),
                     *[str(counts[lab]) for lab in labels], str(sum(r.has_error for r in rs)),
                     *qs, num(mean.value), num_ci(mean), flip(rs)])
    return Table(id=f"{slug(view.name)}-generic", headers=headers, rows=rows,
                 caption="Score quantiles over graded results; mean score averages each "
                         "case's repetitions, then the cases.")


def system_keys(items: Iterable[Result]) -> dict[str, str]:
    """Short keys (S1, S2, ... in :func:`systems` order) for the appendix's long tables when a
    system's name is too long to repeat on every row (a watermark spec with all its
    parameters); {} when every name is short enough to show as it is."""
    names = systems(items)
    if all(len(n) <= KEY_NAME_CHARS for n in names):
        return {}
    return {n: f"S{i}" for i, n in enumerate(names, 1)}


def keys_table(view: PackView, items: Sequence[Result], keys: dict[str, str]) -> Table:
    """What each key of :func:`system_keys` stands for, with the full watermark and attack specs."""
    first: dict[str, Result] = {}
    counts: Counter[str] = Counter()
    for r in items:
        first.setdefault(r.system, r)
        counts[r.system] += 1
    rows = [[keys[n], first[n].model, first[n].watermark, first[n].attack, str(counts[n])] for n in keys]
    return Table(id=f"{slug(view.name)}-keys", headers=["key", "model", "watermark", "attack", "results"],
                 rows=rows, text_columns=(2,),
                 caption="The appendix's tables name each model, watermark and attack by its key.", spec_columns=())


def stability(view: PackView, items: Sequence[Result], keys: dict[str, str] | None = None) -> Table | None:
    """Cases whose label or score differs across repetitions (None when n = 1); ``keys``: the
    systems' keys (:func:`system_keys`) to show in place of their names."""
    if max((r.repetition for r in items), default=0) < 1:
        return None
    keys = keys or {}
    rows = []
    groups = by_system(items)
    field = view.group_field or "group"
    for name in systems(items):
        rs = groups[name]
        group_of = {r.case_id: r.group for r in rs}
        scores: dict[str, list[float]] = defaultdict(list)
        for r in sorted(rs, key=lambda r: r.repetition):
            if r.graded and r.score is not None:
                scores[r.case_id].append(float(r.score))
        for cid, labels in case_labels(rs).items():
            if len(set(labels)) > 1 or len(set(scores[cid])) > 1:
                rows.append([cid, group_of[cid], keys.get(name, name), " / ".join(labels),
                             " / ".join(num(s, 2) for s in scores[cid]),
                             num(float(np.mean(scores[cid])))])
    return Table(id=f"{slug(view.name)}-stability",
                 headers=["case_id", field, "key" if keys else "model", "labels by repetition",
                          "scores by repetition", "per-case mean"],
                 rows=rows, caption="Cases whose grade changed across repetitions.")


def paired_comparisons(view: PackView, items: Sequence[Result],
                       keys: dict[str, str] | None = None) -> Table | None:
    """Every pair of models on their common cases: mean difference with a paired bootstrap
    CI, and the sign test on per-case means. None with fewer than two models. ``keys``: the
    systems' keys (:func:`system_keys`) to show in place of their names."""
    names = systems(items)
    if len(names) < 2:
        return None
    keys = keys or {}
    groups = by_system(items)
    means = {n: case_scores(groups[n]) for n in names}
    rows = []
    for a, b in combinations(names, 2):
        common = sorted(set(means[a]) & set(means[b]))
        xa = [means[a][c] for c in common]
        xb = [means[b][c] for c in common]
        diff = stats.paired_bootstrap_ci(xa, xb, seed=_seed(view.name, a, b))
        sign = stats.sign_test(xa, xb)
        rows.append([keys.get(a, a), keys.get(b, b), str(len(common)), num(float(np.mean(xa)) if xa else None),
                     num(float(np.mean(xb)) if xb else None), num(diff.value, 3),
                     num_ci(diff), f"{sign.wins}/{sign.losses}/{sign.ties}",
                     NA if not common else f"{sign.p_value:.3g}"])
    return Table(id=f"{slug(view.name)}-paired",
                 headers=["key A" if keys else "model A", "key B" if keys else "model B", "common cases", "mean A", "mean B",
                          "A − B", "95% CI (paired bootstrap)", "A better / B better / tie",
                          "sign test p"],
                 rows=rows,
                 caption="Per-case mean scores compared on the cases both models answered; "
                         "a CI excluding 0 (or a small p) means the difference is unlikely "
                         "to be noise from the case sample.")


# -- appendix ------------------------------------------------------------------------------

def per_case(view: PackView, items: Sequence[Result], *, compact: bool = False,
             keys: dict[str, str] | None = None) -> Table:
    """One row per result: the WMID report's appendix A.1 / A.2 columns. ``compact`` (report.md,
    where the main job's 2,100 results must stay readable): no evidence column, reason and output
    cut to :data:`COMPACT_CHARS`, no group column when every case has the same group (the
    caption names it), and each system by its key in ``keys`` (:func:`system_keys`)."""
    multi = max((r.repetition for r in items), default=0) > 0
    field = {"family": "task_family"}.get(view.group_field or "", view.group_field or "group")
    groups = {r.group for r in items}
    one_group = compact and len(groups) == 1
    headers = ["case_id"] + ([] if one_group else [field]) + ["key" if keys else "model"] \
        + (["rep"] if multi else []) + ["score", "label"]
    extraction = view.per_case_expected
    headers += ["expected", "got"] if extraction else ["reason"]
    evidence = not compact and any(r.metadata for r in items)
    if evidence:
        headers.append("evidence")
    keys = keys or {}
    chars = COMPACT_CHARS if compact else OUTPUT_CHARS
    rows = []
    for r in sorted(items, key=lambda r: (r.case_id, r.system, r.repetition)):
        row = [r.case_id] + ([] if one_group else [r.group]) + [keys.get(r.system, r.system)] \
            + ([str(r.repetition)] if multi else [])
        if r.errored:
            row += [NA, NA]
        elif r.grader_error or r.attack_error:
            row += [NA, r.label]
        elif not r.graded:
            row += [NA, "(ungraded)"]
        else:
            row += [num(float(r.score), 2), r.label]
        if extraction:
            row += [str(r.case.get(view.expected_field or "expected", NA)),
                    f"error: {r.error}" if r.errored else shorten(r.output, chars)]
        else:
            reason = f"error: {r.error}" if r.error else (r.reason or "")
            row.append(shorten(reason, chars) if compact else reason)
        if evidence:
            row.append(_evidence_text(r.metadata))
        rows.append(row)
    text_cols = tuple(range(len(headers) - (2 if evidence else 1), len(headers)))
    caption = f"Every case's {field}: {next(iter(groups))}." if one_group else ""
    return Table(id=f"{slug(view.name)}-cases{'-compact' if compact else ''}", headers=headers, rows=rows,
                 text_columns=text_cols, caption=caption)


def _evidence_text(metadata: dict[str, Any]) -> str:
    """A grade's evidence in full: ``name=value`` pairs, a nested object spelled out once per
    key (an unwatermarked text's ``detections={<full spec>: p_value=… …; <full spec>: …}``), so
    that no detector's numbers are cut off and no spec repeats for each of its numbers."""
    return " ".join(f"{k}={_evidence_value(v)}" for k, v in sorted(metadata.items()))


def _evidence_value(value: Any) -> str:
    if isinstance(value, dict) and value:
        return "{" + "; ".join(f"{k}: {_evidence_text(v) if isinstance(v, dict) else _evidence(v)}"
                               for k, v in sorted(value.items())) + "}"
    return _evidence(value)


def _evidence(value: Any) -> str:
    """A metadata value in a table cell: numbers to 4 significant digits, the rest as JSON."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


#: what ``latency_ms`` measures, by the ``latency_kind`` a provider records with it
LATENCY_KINDS = {
    "request": "request: round trip of the API call that succeeded (retries and waits are in "
               "latency_total_ms)",
    "batch share": "batch share: the batch's wall time divided over its items by generated "
                   "tokens (batch_ms and batch_size are in the provider facts)",
    "solver": "solver: time the pack's reference solver took",
}


def latency(data: ReportData) -> Table:
    """p50/p90/p99/mean of latency_ms per model, saying which kind of latency each is, and
    time to first token where a provider streams (``ttft_ms``)."""
    rows = []
    kinds_seen: set[str] = set()
    any_ttft = False
    for model in data.models:
        rs = [r for r in data.results if r.model == model and r.latency_ms is not None]
        vals = np.array([float(r.latency_ms) for r in rs])
        kinds = sorted({str(r.extra.get("latency_kind", "unstated")) for r in rs})
        kinds_seen.update(kinds)
        ttft = [float(r.extra["ttft_ms"]) for r in rs if r.extra.get("ttft_ms") is not None]
        any_ttft = any_ttft or bool(ttft)
        if vals.size:
            p50, p90, p99 = np.percentile(vals, [50, 90, 99])
            cells = [num(p50, 1), num(p90, 1), num(p99, 1), num(float(vals.mean()), 1)]
        else:
            cells = [NA] * 4
        rows.append([model, ", ".join(kinds) or NA, str(vals.size), *cells,
                     num(float(np.median(ttft)), 1) if ttft else NA])
    explained = [LATENCY_KINDS[k] for k in sorted(kinds_seen) if k in LATENCY_KINDS]
    caption = ("latency_ms per model over all packs; models that record no latency (replay) show "
               "n/a. " + "; ".join(explained) + "."
               + ("" if any_ttft else " No provider in this selection streamed, so there is no "
                                      "time to first token."))
    return Table(id="latency", headers=["model", "latency kind", "timed results", "p50 ms", "p90 ms",
                                        "p99 ms", "mean ms", "median TTFT ms"], rows=rows, caption=caption)


def tokens(data: ReportData) -> Table:
    """Mean tokens in / out and the total per model and pack, per generation: the results of
    one generation under several attacks share its model call, counted once."""
    rows = []
    cells: dict[tuple[str, str], dict[str, Result]] = defaultdict(dict)
    for r in data.results:
        cells[(r.model, r.pack)].setdefault(r.row.get("gen_key") or str(r.row.get("result_id")), r)
    for (model, pack) in sorted(cells):
        rs = list(cells[(model, pack)].values())
        tin = [int(r.tokens_in) for r in rs if r.tokens_in is not None]
        tout = [int(r.tokens_out) for r in rs if r.tokens_out is not None]
        total = str(sum(tin) + sum(tout)) if (tin or tout) else NA
        rows.append([model, pack, str(len(rs)), num(float(np.mean(tin)), 1) if tin else NA,
                     num(float(np.mean(tout)), 1) if tout else NA, total])
    return Table(id="tokens", headers=["model", "pack", "generations", "mean tokens_in",
                                       "mean tokens_out", "total tokens"], rows=rows,
                 caption="Per model call: results that share a generation (its attacks) count it once.")


# -- failure analysis ----------------------------------------------------------------------

def is_failure(view: PackView, r: Result) -> bool:
    """A graded result that went wrong: for a detection pack, a label wrong for its ground truth
    (a watermarked text NOT_DETECTED, an unwatermarked one DETECTED: a false positive; an
    unwatermarked text NOT_DETECTED is right); for the others, a score below 1."""
    if is_detection_view(view):
        return (r.label == DETECTED) == is_none(r.watermark)
    return float(r.score) < 1.0


def ground_truth(view: PackView, r: Result) -> str | None:
    """What the right grade of ``r`` is, for the packs where it depends on the setup: in a
    detection pack, "watermarked" or "unwatermarked" text; None where every setup aims alike.
    Only setups of the same ground truth can have solved what ``r`` failed: an unwatermarked
    text not flagged says nothing about a watermarked one that went undetected."""
    if is_detection_view(view):
        return "unwatermarked" if is_none(r.watermark) else "watermarked"
    return None


#: setups a failure example names under "Solved by" before it counts the rest
SOLVED_BY_SHOWN = 5


def failures(view: PackView, items: Sequence[Result], limit: int = 3) -> list[Example]:
    """A few informative failures (:func:`is_failure`): cases that other setups of the same
    ground truth (:func:`ground_truth`) solved come first (setup-specific failures), then lower
    scores; labels take turns so each kind of failure is shown before any repeats; at most one
    example per case."""
    scored = [r for r in items if r.graded and r.score is not None]
    failed = [r for r in scored if is_failure(view, r)]
    if not failed:
        return []
    solved: dict[tuple[str, str | None], set[str]] = defaultdict(set)
    for r in scored:
        if not is_failure(view, r):
            solved[(r.case_id, ground_truth(view, r))].add(r.system)

    def solved_by(r: Result) -> list[str]:
        return sorted(solved[(r.case_id, ground_truth(view, r))] - {r.system})

    ranked = sorted(failed, key=lambda r: (-len(solved_by(r)), float(r.score), r.case_id, r.system, r.repetition))
    by_label: dict[str, list[Result]] = defaultdict(list)
    for r in ranked:
        by_label[r.label].append(r)
    order = sorted(by_label, key=lambda lab: (view.labels.index(lab) if lab in view.labels
                                              else len(view.labels), lab))
    picked: list[Result] = []
    seen_cases: set[str] = set()
    seen_groups: set[str] = set()
    progress = True
    while len(picked) < limit and progress:
        progress = False
        for label in order:
            queue = [r for r in by_label[label] if r.case_id not in seen_cases]
            by_label[label] = queue
            if not queue or len(picked) >= limit:
                continue
            # a family / scheme not shown yet beats a better-ranked one from a shown group
            r = next((r for r in queue if r.group not in seen_groups), queue[0])
            queue.remove(r)
            picked.append(r)
            seen_cases.add(r.case_id)
            seen_groups.add(r.group)
            progress = True
    return [_example(view, r, solved_by(r)) for r in picked]


def grader_errors(view: PackView, items: Sequence[Result]) -> Table | None:
    """Every result whose grader failed, with its message: a broken grader must be seen,
    not averaged away."""
    crashed = sorted((r for r in items if r.grader_error), key=lambda r: (r.case_id, r.system, r.repetition))
    if not crashed:
        return None
    rows = [[r.case_id, r.system, str(r.repetition), r.label, r.error or NA] for r in crashed]
    return Table(id=f"{slug(view.name)}-grader-errors", headers=["case_id", "model", "rep", "label", "error"],
                 rows=rows, text_columns=(4,),
                 caption=f"{len(crashed)} result(s) whose grader raised or returned an invalid grade; "
                         "fix grader.py and run `evalrun regrade` (no model call).")


def _example(view: PackView, r: Result, solved_by: list[str]) -> Example:
    task_parts = [f"{view.group_field or 'group'}={r.group}"] if r.group_value is not None else []
    task_parts += [str(r.case[f]) for f in view.task_fields if f in r.case]
    truth = ground_truth(view, r)
    if view.expected_field:
        expected = str(r.case.get(view.expected_field, NA))
    elif truth is not None:  # a detection pack: the right label follows from the setup
        expected = f"{NOT_DETECTED if truth == 'unwatermarked' else DETECTED} ({truth} text)"
    else:
        expected = NA
    fields = [
        ("Model", r.system),
        ("Task", " — ".join(task_parts)),
        *[(f"Input ({f})", shorten(str(r.case[f]), EXAMPLE_CHARS))
          for f in view.input_fields if f in r.case],
        ("Expected", expected),
        ("Model output", shorten(r.output, EXAMPLE_CHARS)),
        ("Grade", f"{r.label} (score {num(float(r.score), 2)}), repetition {r.repetition}"),
        ("Why it failed", r.reason or NA),
        ("Solved by", _solved_by_text(solved_by, truth)),
    ]
    return Example(title=f"{r.case_id} — {r.label}", fields=fields,
                   text_fields=("Model output", "Task",
                                              *[f"Input ({f})" for f in view.input_fields]))


def _solved_by_text(solved_by: list[str], truth: str | None) -> str:
    """The setups that got the case right, the first :data:`SOLVED_BY_SHOWN` by name and the
    rest counted, so that a case every setup but one solved stays one readable line."""
    if not solved_by:
        return f"no other {truth} setup" if truth else "no other model"
    if len(solved_by) <= SOLVED_BY_SHOWN + 1:  # "and 1 more" would be no shorter than its name
        return ", ".join(solved_by)
    rest = len(solved_by) - SOLVED_BY_SHOWN
    return ", ".join(solved_by[:SOLVED_BY_SHOWN]) + f" and {rest} more of the case's {truth + ' ' if truth else ''}setups"


# -- provenance ----------------------------------------------------------------------------

def runs_table(data: ReportData) -> Table:
    rows = []
    for run in data.runs:
        dirty = run.get("git_dirty")
        sha = run.get("git_sha") or NA
        if dirty:
            sha += " (dirty)"
        argv = run.get("argv")
        try:
            argv = " ".join(json.loads(argv)) if argv else NA
        except (ValueError, TypeError):
            argv = str(argv)
        status = run_status(run)
        if run.get("reason"):
            status += f": {run['reason']}"
        rows.append([run["run_id"], status, run.get("started_at") or NA,
                     run.get("finished_at") or NA, sha, run.get("evalrun_version") or NA, run.get("python") or NA,
                     run.get("platform") or NA,
                     NA if run.get("seed") is None else str(run["seed"]), argv])
    return Table(id="provenance", headers=["run_id", "status", "started_at", "finished_at", "git_sha",
                                           "evalrun", "python", "platform", "seed", "argv"],
                 rows=rows, text_columns=(9,),
                 caption="status: finished when every selected item reached the end of grading; "
                         "interrupted when the run was stopped or killed before its end, failed (with its "
                         "reason) after an internal error, a full disk or items that never reached grading "
                         "(stored results count as usual either way; re-running the same command resumes "
                         "it); running while its process is alive.")


def models_table(data: ReportData) -> Table:
    cells: dict[tuple[Any, ...], list[Result]] = defaultdict(list)
    for r in data.results:
        cells[(r.model, r.served_model or "", r.params_json, r.watermark, r.attack)].append(r)
    rows = []
    for key in sorted(cells):
        rs = cells[key]
        model, served, params, wm, attack = key
        rows.append([model, served or NA, params, wm, attack,
                     ", ".join(sorted({r.pack for r in rs})), str(len(rs)),
                     str(max(r.repetition for r in rs) + 1)])
    return Table(id="models", headers=["model", "served model", "params", "watermark", "attack",
                                       "packs", "results", "repetitions"], rows=rows,
                 text_columns=(2, 3), spec_columns=())  # provenance: the full specs
