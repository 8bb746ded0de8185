"""The watermark benchmark's report sections (MarkMyWords, Piet et al., section IV; Figs. 1,
3, 6 and 8; Table V), for every detection pack of the selection (labels DETECTED/NOT_DETECTED).

Every number shown is a record of metrics.json, looked up by (pack, metric, model, watermark,
attack, params) in the records :func:`evalrun.metrics.aggregates.compute` made for this report: the
tables format them and nothing else (:func:`fmt`, :func:`fmt_ci`). The tamper-resistance plot
draws the attacks' points from :func:`evalrun.metrics.benchmark.tamper_inputs`, the texts the
``tamper_resistance`` record itself was computed from, and the hull with
:func:`evalrun.metrics.lower_hull`.

Quality is MarkMyWords' judge rating where a pack has one; otherwise a quality proxy (a judge
method whose answer parses to ``quality``, e.g. ``perplexity``), which the section names with
its scorer; with neither, the section says that quality, retention and tamper resistance are
not available, and why, instead of showing numbers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from evalrun._util.display import interval_text
from evalrun._util.specs import is_none
from evalrun.judges.mauve import SOURCE as MAUVE_SOURCE
from evalrun.metrics import best_attack, lower_hull, stats
from evalrun.metrics.aggregates import MetricRecord, params_key
from evalrun.metrics.benchmark import (
    ALL_ATTACKS,
    FPR_TARGETS,
    RATING,
    excluded_from_tamper,
    is_proxy,
    quality_judges,
    quality_sources,
    record_index,
    tamper_inputs,
)
from evalrun.metrics.repetition import DEGENERATE_DROP, degenerate
from evalrun.metrics.tamper import DEFAULT_MIN_QUALITY
from evalrun.report import benchmark_charts as charts
from evalrun.report.data import Result
from evalrun.report.document import INTERVAL_SUFFIX, Block, Figure, Paragraph, Section, Table
from evalrun.watermark.naming import short_names
from evalrun.watermark.verdict import DEFAULT_SIZE_RULE

NA = "n/a"
CHART_NAMES = ("watermark_size.png", "tamper_resistance.png", "attacks.png", "size_quality.png")

Key = tuple[str, str, str]
#: a record's params (``{"quality": "rating"}``); None or {} for a record without
Params = Mapping[str, "str | float"]
#: the params of the sizes the report shows (the default, sequentially valid size rule)
SIZE: Params = {"size_rule": DEFAULT_SIZE_RULE}


# -- formatting: the one way a record's number becomes a cell ------------------------------

def _kind(metric: str) -> str:
    return {"watermark_size": "size", "quality": "num", "roc_auc": "num", "tamper_resistance": "num",
            "mean_tokens_scored": "tokens", "distinct_1": "num", "distinct_2": "num",
            "repeated_4gram_rate": "num"}.get(metric, "pct")


def fmt(metric: str, value: float | None) -> str:
    """A record's value as the report shows it (rates in %, sizes in tokens, ∞ for +inf)."""
    if value is None or math.isnan(value):
        return NA
    kind = _kind(metric)
    if kind == "size":
        return "∞" if math.isinf(value) else f"{value:g}"
    if kind == "pct":
        return f"{100 * value:.1f}%"
    return f"{value:.1f}" if kind == "tokens" else f"{value:.3f}"


def fmt_ci(metric: str, low: float | None, high: float | None) -> str:
    """A record's 95% interval as the report shows it."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return NA
    if _kind(metric) == "pct":
        return interval_text(low, high, percent=True)
    return f"({fmt(metric, low)}, {fmt(metric, high)})"


def ci_header(column: str) -> str:
    """The header of the 95% interval of ``column`` (unique, so tables read back by name; HTML
    shows it under its value)."""
    return f"{column}{INTERVAL_SUFFIX}"


def _estimate(rec: MetricRecord | None) -> stats.Estimate | None:
    if rec is None:
        return None
    nan = math.nan
    return stats.Estimate(nan if rec.value is None else rec.value, nan if rec.ci_low is None else rec.ci_low,
                          nan if rec.ci_high is None else rec.ci_high)


class Records:
    """The report's records, by (pack, metric, model, watermark, attack, params)."""

    def __init__(self, records: Iterable[MetricRecord]) -> None:
        self.all = list(records)
        self.index = record_index(self.all)

    def get(self, pack: str, metric: str, model: str, watermark: str, attack: str,
            params: Params | None = None) -> MetricRecord | None:
        """The record with exactly these params (none: a record without params)."""
        return self.index.get((pack, metric, model, watermark, attack, params_key(params)))

    def cells(self, pack: str, metric: str, model: str, watermark: str, attack: str,
              params: Params | None = None) -> list[str]:
        """[value, 95% CI] of a record, n/a where there is none."""
        rec = self.get(pack, metric, model, watermark, attack, params)
        if rec is None:
            return [NA, NA]
        return [fmt(metric, rec.value), fmt_ci(metric, rec.ci_low, rec.ci_high)]


# -- what each pack holds ------------------------------------------------------------------

@dataclass
class PackData:
    name: str
    groups: dict[Key, list[dict[str, Any]]]
    #: the quality source the sections use: MarkMyWords' rating first, else a proxy; None: none
    source: str | None
    #: who produced it: judge models (rating), embedders (MAUVE) or the proxy's scorers
    judges: list[str]
    #: every quality source with answers, the shown one first (the others: a secondary table)
    sources: tuple[str, ...] = ()
    #: who produced each source's answers
    source_judges: dict[str, list[str]] = field(default_factory=dict)

    @property
    def systems(self) -> list[tuple[str, str]]:
        """(model, watermark) pairs, the unwatermarked baseline first per model."""
        return sorted({(m, w) for m, w, _ in self.groups}, key=lambda mw: (mw[0], not is_none(mw[1]), mw[1]))

    def attacks(self, model: str, watermark: str) -> list[str]:
        """Attacks of one scheme, ``none`` first."""
        return sorted({a for m, w, a in self.groups if (m, w) == (model, watermark)},
                      key=lambda a: (not is_none(a), a))

    @cached_property
    def names(self) -> dict[str, str]:
        """Each watermark spec's short name (distinct within the pack), for what a person reads."""
        return short_names(w for _, w, _ in self.groups)

    def label(self, model: str, watermark: str) -> str:
        """A series' name in a chart: the watermark's short name, with the model when the pack
        has several."""
        name = self.names.get(watermark, watermark)
        return name if len({m for m, _ in self.systems}) == 1 else f"{model} · {name}"

    @property
    def quality(self) -> dict[str, str | float] | None:
        """The params of the pack's quality records (``{"quality": source}``); None: no source."""
        return {"quality": self.source} if self.source else None

    @property
    def quality_label(self) -> str:
        """How a quality axis is named: MarkMyWords' rating or MAUVE, or the proxy, with who made it."""
        if self.source is None:
            return "quality (not available)"
        return f"quality retention ({source_name(self.source, self.judges)})"


def proxy_name(source: str) -> str:
    return source.removesuffix("-proxy")


#: how the report names MarkMyWords' own quality sources
PAPER_SOURCE_NAMES = {"rating": "judge rating", "mauve": "MAUVE"}


def source_name(source: str, judges: Sequence[str]) -> str:
    """``judge rating (gpt-4o)``, ``MAUVE (embedded)``, ``perplexity proxy (embedded)``."""
    name = f"{proxy_name(source)} proxy" if is_proxy(source) else PAPER_SOURCE_NAMES.get(source, source)
    return f"{name} ({', '.join(judges)})" if judges else name


def pack_data(name: str, items: Sequence[Result]) -> PackData:
    groups: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    for r in items:
        groups[(r.model, r.watermark, r.attack)].append(r.row)
    rows = [r.row for r in items]
    sources = quality_sources(rows)
    source = sources[0] if sources else None
    return PackData(name=name, groups=dict(groups), source=source,
                    judges=quality_judges(rows, source) if source else [], sources=tuple(sources),
                    source_judges={s: quality_judges(rows, s) for s in sources})


def quality_note(p: PackData) -> str:
    """What the pack's quality numbers are, or why there are none."""
    if p.source is None:
        return (f"{p.name}: quality, quality retention and tamper resistance are not available: no judge "
                "answers (MarkMyWords' rating, or a quality proxy such as perplexity) are stored for this pack's "
                "results, so there is nothing to measure quality with. Run `evalrun judge --db DB --method "
                "rating --judge MODEL` (or `--method perplexity --judge embedded` for the offline proxy) and "
                "report again.")
    if p.source == RATING:
        return (f"{p.name}: quality is MarkMyWords' judge rating (grade out of 100, as a share) by "
                f"{', '.join(p.judges)}.")
    if not is_proxy(p.source):
        return (f"{p.name}: quality is MAUVE (MarkMyWords' second quality measure; Pillutla et al.): one score per "
                "model, watermark and attack, the group's outputs against the unwatermarked outputs of the same "
                f"prompts, embedded by {', '.join(p.judges)}; the unwatermarked outputs are the reference (1). "
                "Its interval is a bootstrap over the texts; MAUVE varies a lot on small samples (MarkMyWords: it "
                "works best with 5,000 texts or more), so read differences inside the intervals as noise. "
                "Its 95% interval is normal, centred on the score, with the spread of bootstrap replicates over "
                "the prompts (each with its own k-means seed), as each record's interval note says.")
    return (f"{p.name}: quality: {proxy_name(p.source)} proxy under {', '.join(p.judges)}, not MarkMyWords' "
            "rating judge. Quality, its degradation, quality retention and tamper resistance below are computed "
            f"from this proxy (records with quality {p.source} in their params in metrics.json); a proxy "
            "measures fluency under the scorer, not MarkMyWords' judged quality.")


# -- tables --------------------------------------------------------------------------------

def summary_table(packs: Sequence[PackData], recs: Records) -> Table:
    """MarkMyWords Table V's columns per (model, watermark), unattacked texts."""
    headers = ["pack", "model", "watermark", "quality source"]
    for name in ("quality", "quality degradation", "watermark size E (tokens)", "size FPR", "tamper resistance R",
                 "detection rate", "FPR", "ROC AUC"):
        headers += [name, ci_header(name)]
    rows = []
    for p in packs:
        for model, wm in p.systems:
            q = p.quality
            quality = recs.cells(p.name, "quality", model, wm, "none", q) if q else [NA, NA]
            row = [p.name, model, "none (unwatermarked)" if is_none(wm) else wm, _source_cell(p), *quality]
            if is_none(wm):
                rows.append(row + [NA] * 14)
                continue
            row += recs.cells(p.name, "quality_degradation", model, wm, "none", q) if q else [NA, NA]
            row += recs.cells(p.name, "watermark_size", model, wm, "none", SIZE)
            row += recs.cells(p.name, "size_false_positive_rate", model, wm, "none", SIZE)
            row += recs.cells(p.name, "tamper_resistance", model, wm, ALL_ATTACKS, q) if q else [NA, NA]
            row += recs.cells(p.name, "detection_rate", model, wm, "none")
            row += recs.cells(p.name, "false_positive_rate", model, wm, "none")
            row += recs.cells(p.name, "roc_auc", model, wm, "none")
            rows.append(row)
    return Table(id="benchmark-summary", headers=headers, rows=rows, caption=(
        "Per model and watermark, without attack (MarkMyWords Table V's metrics): mean quality (its relative "
        "loss against the unwatermarked texts), watermark size E (median of tokens to the first "
        f"detected prefix under the {DEFAULT_SIZE_RULE} rule, which gives an unwatermarked text a finite size with "
        "probability at most the detection threshold; ∞ when most texts are never detected, null in "
        "metrics.json), size FPR (the unwatermarked texts of the same prompts that get a finite size under "
        "this detector and rule), tamper resistance R "
        "over the attacks (paraphrases left out), detection rate, false-positive rate of unwatermarked texts "
        "under this watermark's detector, ROC AUC of -log10 p. Rates: Wilson 95%; the rest: bootstrap 95%."))


#: the params of MAUVE's quality records
MAUVE: Params = {"quality": MAUVE_SOURCE}
#: MarkMyWords' bar for near-optimal quality: MAUVE within 2.5% of the baseline (section V-A)
NEAR_OPTIMAL = 0.025


def noise_floor_blocks(packs: Sequence[PackData], recs: Records) -> list[Block]:
    """Per pack and model with a MAUVE noise floor: the floor beside the reference's 1, and per
    watermark whether its MAUVE degradation's interval places it within MarkMyWords' 2.5%, beyond
    it, or cannot tell at this sample size."""
    out: list[Block] = []
    for p in packs:
        for model in sorted({m for m, _ in p.systems}):
            floor = recs.get(p.name, "quality_noise_floor", model, "none", "none", MAUVE)
            if floor is None or floor.value is None:
                continue
            verdicts = []
            for m, wm in p.systems:
                d = recs.get(p.name, "quality_degradation", m, wm, "none", MAUVE)
                if m != model or is_none(wm) or d is None or d.ci_low is None or d.ci_high is None:
                    continue
                verdict = ("within 2.5% (near-optimal)" if d.ci_high <= NEAR_OPTIMAL else
                           "more than 2.5% lost" if d.ci_low > NEAR_OPTIMAL else
                           "cannot be told from the 2.5% bar at this sample size")
                verdicts.append(f"{p.names[wm]}: degradation {fmt_ci('quality_degradation', d.ci_low, d.ci_high)}, {verdict}")
            out.append(Paragraph(
                f"MAUVE noise floor ({p.name}, {model}): two disjoint halves of the unwatermarked outputs "
                f"({floor.n // 2} texts each) score {fmt('quality', floor.value)} "
                f"{fmt_ci('quality', floor.ci_low, floor.ci_high)} against each other, beside the reference's 1: "
                "a watermark's MAUVE that reaches this floor cannot be told from unwatermarked text at this sample "
                "size. MarkMyWords calls quality near-optimal when MAUVE is within 2.5% of the baseline; judged by "
                "each degradation's 95% interval: " + ("; ".join(verdicts) or "no watermark has a MAUVE degradation")
                + "."))
    return out


def quality_sources_table(packs: Sequence[PackData], recs: Records) -> Table | None:
    """Every quality source side by side (MAUVE, a proxy such as perplexity, ...), so a
    secondary measure is shown labelled, never mixed into the summary; None with one source."""
    rows = []
    for p in packs:
        if len(p.sources) < 2:
            continue
        for model, wm in p.systems:
            for source in p.sources:
                q = {"quality": source}
                cells = recs.cells(p.name, "quality", model, wm, "none", q)
                cells += [NA, NA] if is_none(wm) else recs.cells(p.name, "quality_degradation", model, wm, "none", q)
                rows.append([p.name, model, "none (unwatermarked)" if is_none(wm) else wm,
                             source_name(source, p.source_judges.get(source, [])), *cells])
    if not rows:
        return None
    headers = ["pack", "model", "watermark", "quality source", "quality", ci_header("quality"),
               "quality degradation", ci_header("quality degradation")]
    return Table(id="benchmark-quality-sources", headers=headers, rows=rows, caption=(
        "Quality of the unattacked outputs by every source the run judged with: the summary above uses the "
        "first; the others are secondary. A proxy's unit: perplexity's quality is 1 / perplexity under its "
        "scorer (higher is better); MAUVE is in [0, 1], 1 for the unwatermarked reference. Degradation is "
        "1 - quality / unwatermarked quality."))


def repetition_blocks(packs: Sequence[PackData], recs: Records) -> list[Block]:
    """Whether each scheme's outputs loop (:mod:`evalrun.metrics.repetition`), and a warning for
    each scheme whose distinct-2 falls more than 15% below its model's unwatermarked outputs'."""
    rows, warnings = [], []
    for p in packs:
        for model, wm in p.systems:
            cells = []
            for metric in ("distinct_1", "distinct_2", "repeated_4gram_rate", "mean_tokens_scored"):
                cells += recs.cells(p.name, metric, model, wm, "none")
            rows.append([p.name, model, "none (unwatermarked)" if is_none(wm) else wm, *cells])
            mine, base = recs.get(p.name, "distinct_2", model, wm, "none"), recs.get(p.name, "distinct_2", model,
                                                                                 "none", "none")
            if (not is_none(wm) and mine is not None and base is not None and mine.value is not None
                    and base.value is not None and degenerate(mine.value, base.value)):
                warnings.append(Paragraph(
                    f"Warning: {p.names[wm]} on {model} ({p.name}) repeats itself: {fmt('distinct_2', mine.value)} of its "
                    f"word bigrams are distinct against {fmt('distinct_2', base.value)} without a watermark "
                    f"(more than {100 * DEGENERATE_DROP:.0f}% fewer). Its quality and size describe looping text; "
                    "MarkMyWords recommends a context window of 1 to 3 with skip 0.05 for distortion-free schemes."))
    if not rows:
        return []
    headers = ["pack", "model", "watermark"]
    for name in ("distinct-1", "distinct-2", "repeated 4-grams", "tokens scored"):
        headers += [name, ci_header(name)]
    table = Table(id="benchmark-repetition", headers=headers, rows=rows, caption=(
        "Repetition of the unattacked outputs: distinct word unigrams and bigrams per text, the share of a "
        "text's word 4-grams repeating an earlier one, and the mean number of tokens the detector scored; means "
        "over texts with bootstrap 95% intervals."))
    return [table, *warnings]


def _source_cell(p: PackData) -> str:
    return "none (no judge answers)" if p.source is None else source_name(p.source, p.judges)


def size_table(packs: Sequence[PackData], recs: Records) -> Table:
    """MarkMyWords Fig. 1 as numbers: size E per scheme and temperature, unattacked."""
    rows = []
    for p in packs:
        for model, wm in p.systems:
            for t, rec in _size_records(recs, p.name, model, wm):
                rows.append([p.name, model, wm, t, str(rec.n),
                             fmt(rec.metric, rec.value), fmt_ci(rec.metric, rec.ci_low, rec.ci_high)])
    return Table(id="benchmark-size", headers=["pack", "model", "watermark", "temperature", "texts",
                                               "watermark size E (tokens)", ci_header("watermark size E (tokens)")],
                 rows=rows, caption=(f"Unattacked watermarked texts, size rule {DEFAULT_SIZE_RULE}; ∞: more than "
                                     "half never detected."))


def _size_records(recs: Records, pack: str, model: str, wm: str) -> list[tuple[str, MetricRecord]]:
    """(temperature as shown, record) of the per-temperature sizes, coolest first."""
    found = [r for r in recs.all if (r.pack, r.metric, r.model, r.watermark, r.attack)
             == (pack, "watermark_size", model, wm, "none") and "temperature" in r.params
             and r.params.get("size_rule") == DEFAULT_SIZE_RULE]
    found.sort(key=lambda r: float(r.params["temperature"]))
    return [(f"{float(r.params['temperature']):g}", r) for r in found]


@dataclass(frozen=True)
class Tamper:
    """One scheme's tamper-resistance record with the points it was computed from."""

    pack: str
    model: str
    watermark: str
    record: MetricRecord
    panel: charts.TamperPanel
    #: the watermark's short name
    name: str


def tampers(packs: Sequence[PackData], recs: Records) -> list[Tamper]:
    out = []
    for p in packs:
        if p.source is None:
            continue
        for model, wm in p.systems:
            rec = recs.get(p.name, "tamper_resistance", model, wm, ALL_ATTACKS, p.quality)
            inputs = tamper_inputs(p.groups, model, wm, p.source) if rec is not None else None
            if rec is None or inputs is None:
                continue
            points = inputs.points()
            panel = charts.TamperPanel(
                title=f"{p.names[wm]}\n{model} · {p.name}", points=points,
                excluded=inputs.excluded_points(), hull=lower_hull(points), best=best_attack(points),
                resistance=rec.value, quality_label=p.quality_label)
            out.append(Tamper(p.name, model, wm, rec, panel, p.names[wm]))
    return out


def tamper_table(items: Sequence[Tamper], packs: Sequence[PackData], recs: Records) -> Table:
    by_name = {p.name: p for p in packs}
    rows = []
    for t in items:
        p = by_name[t.pack]
        on_hull = [name for name, pt in t.panel.points.items() if pt in set(t.panel.hull)]
        best = recs.get(t.pack, "best_attack", t.model, t.watermark, t.panel.best.name, p.quality) \
            if t.panel.best is not None else None
        rows.append([t.pack, t.model, t.watermark, _source_cell(p), fmt(t.record.metric, t.record.value),
                     fmt_ci(t.record.metric, t.record.ci_low, t.record.ci_high), str(t.record.n),
                     ", ".join(t.panel.points), ", ".join(on_hull) or "none (the diagonal)",
                     ", ".join(t.panel.excluded) or "none",
                     best.attack if best is not None else "none keeps 80%",
                     *(recs.cells(t.pack, best.metric, t.model, t.watermark, best.attack, best.params)
                       if best else [NA, NA])])
    return Table(id="benchmark-tamper", headers=[
        "pack", "model", "watermark", "quality source", "tamper resistance R", ci_header("tamper resistance R"),
        "texts",
        "attacks in R", "attacks on the lower hull", "left out (paraphrase)",
        f"best attack (≥ {DEFAULT_MIN_QUALITY:.0%} quality kept)", "its detection rate",
        ci_header("its detection rate")],
        rows=rows, text_columns=(7, 8, 9), caption=(
            "R = twice the area under the lower convex hull of the attacks' (quality retention, detection "
            "rate) points with (0, 0) and (1, 1) (MarkMyWords IV-C); paraphrase attacks are left out, "
            "translations kept. The best attack is the one with the lowest detection rate among those "
            "keeping at least 80% of the unattacked quality (Fig. 3's dashed lines)."))


def surface_notes(packs: Sequence[PackData], recs: Records) -> list[Block]:
    """One sentence per pack whose quality retentions carry the surface caveat: which attacks,
    and what their numbers rest on."""
    out: list[Block] = []
    for p in packs:
        flagged = sorted({r.attack for r in recs.all if r.pack == p.name and r.metric == "quality_retention"
                          and r.params.get("quality") == p.source and "caveat" in r.params})
        if flagged and p.source is not None:
            out.append(Paragraph(
                f"{p.name}: {', '.join(flagged)} edit characters inside words, and {source_name(p.source, p.judges)} "
                "reads surface form: it scores such text far below what a reader would (on the main job, 5% typos "
                "keep 1-2% of the embedded model's MAUVE and 16-18% of its 1 / perplexity), so their quality "
                "retention, and R and the best attack where they rest on them, measure the edit rather than lost "
                "content (a caveat in their metrics.json params). "
                "MarkMyWords judges attacked text with its rating judge (--judge rating:<model>)."))
    return out


def saturation_notes(items: Sequence[Tamper]) -> list[Block]:
    """One sentence per saturated R (the record's ``saturated`` param): 1 because the suite
    removed too little, not because the scheme resists tampering."""
    out: list[Block] = []
    for t in items:
        if t.record.params.get("saturated") is True:
            out.append(Paragraph(
                f"{t.name} on {t.model} ({t.pack}): R is 1 because no attack of this suite lowered detection "
                "below the quality it kept (every point lies on or above the diagonal), not because the scheme "
                "resists tampering; stronger attacks are needed to measure it."))
    return out


def attacks_table(packs: Sequence[PackData], recs: Records) -> Table:
    """MarkMyWords Fig. 8 as numbers: per watermark and attack, detection and quality."""
    rows = []
    for p in packs:
        q = p.quality
        for model, wm in p.systems:
            if is_none(wm):
                continue
            for attack in p.attacks(model, wm):
                role = ("baseline" if is_none(attack) else
                        "no (paraphrase)" if excluded_from_tamper(attack) else "yes")
                row = [p.name, model, wm, attack, role, *recs.cells(p.name, "detection_rate", model, wm, attack)]
                row += recs.cells(p.name, "quality", model, wm, attack, q) if q else [NA, NA]
                row += (recs.cells(p.name, "quality_retention", model, wm, attack, q) if q and not is_none(attack)
                        else [NA, NA])
                rows.append(row)
    return Table(id="benchmark-attacks", headers=[
        "pack", "model", "watermark", "attack", "in R", "detection rate", ci_header("detection rate"), "quality",
        ci_header("quality"), "quality retention", ci_header("quality retention")], rows=rows, caption=(
        "Quality retention = clip(mean quality after the attack / mean quality of the same watermark "
        "without attack, 0, 1) (MarkMyWords IV-C)."))


def detection_table(packs: Sequence[PackData], recs: Records) -> Table:
    """TPR at fixed FPR, FPR at the p-value threshold and ROC AUC per scheme and attack."""
    rows = []
    for p in packs:
        for model, wm in p.systems:
            if is_none(wm):
                continue
            for attack in p.attacks(model, wm):
                auc = recs.get(p.name, "roc_auc", model, wm, attack)
                fpr = recs.get(p.name, "false_positive_rate", model, wm, attack)
                if auc is None and fpr is None:
                    continue
                row = [p.name, model, wm, attack, NA if auc is None else str(auc.n)]
                for target in FPR_TARGETS:
                    row += recs.cells(p.name, "tpr_at_fpr", model, wm, attack, {"fpr": target})
                row += recs.cells(p.name, "false_positive_rate", model, wm, attack)
                row += recs.cells(p.name, "roc_auc", model, wm, attack)
                rows.append(row)
    headers = ["pack", "model", "watermark", "attack", "texts (watermarked + not)"]
    for target in FPR_TARGETS:
        headers += [f"TPR at {target:.0%} FPR", ci_header(f"TPR at {target:.0%} FPR")]
    headers += ["FPR at the p threshold", ci_header("FPR at the p threshold"), "ROC AUC", ci_header("ROC AUC")]
    return Table(id="benchmark-detection", headers=headers, rows=rows, caption=(
        "Scores are -log10 p: watermarked texts against unwatermarked texts of the same model and attack "
        "detected under this watermark. TPR at a target FPR never splits ties, so the empirical FPR stays "
        "at or under the target; AUROC counts ties half; bootstrap 95% resampling each side."))


# -- charts --------------------------------------------------------------------------------

def _size_panels(packs: Sequence[PackData],
                 recs: Records) -> dict[str, dict[str, dict[str, stats.Estimate | None]]]:
    panels = {}
    for p in packs:
        series = {}
        for model, wm in p.systems:
            found = _size_records(recs, p.name, model, wm)
            if found:
                series[p.label(model, wm)] = {t: _estimate(r) for t, r in found}
        if series:
            panels[p.name] = series
    return panels


def _attack_panels(packs: Sequence[PackData], recs: Records) -> list[charts.AttackPanel]:
    out = []
    for p in packs:
        marked = [(m, w) for m, w in p.systems if not is_none(w)]
        attacks = sorted({a for m, w in marked for a in p.attacks(m, w)}, key=lambda a: (not is_none(a), a))
        if not marked:
            continue
        q = p.quality
        detection = {p.label(m, w): {a: _estimate(recs.get(p.name, "detection_rate", m, w, a))
                                                   for a in attacks} for m, w in marked}
        retention = None if q is None else {
            p.label(m, w): {a: _estimate(recs.get(p.name, "quality_retention", m, w, a, q))
                                          for a in attacks}
            for m, w in marked}
        out.append(charts.AttackPanel(pack=p.name, attacks=attacks, detection=detection, retention=retention,
                                      quality_label=p.quality_label))
    return out


def _size_quality_panels(packs: Sequence[PackData], recs: Records) -> list[charts.SizeQualityPanel]:
    out = []
    for p in packs:
        if p.source is None:
            continue
        points = []
        for model, wm in p.systems:
            quality = recs.get(p.name, "quality", model, wm, "none", p.quality)
            size = recs.get(p.name, "watermark_size", model, wm, "none", SIZE)
            if is_none(wm) or quality is None or quality.value is None or size is None or size.value is None:
                continue
            r = recs.get(p.name, "tamper_resistance", model, wm, ALL_ATTACKS, p.quality)
            points.append(charts.SizeQualityPoint(label=p.label(model, wm), quality=quality.value,
                                                  size=size.value, resistance=None if r is None else r.value))
        if points:
            label = f"quality ({source_name(p.source, p.judges)})"
            out.append(charts.SizeQualityPanel(pack=p.name, quality_label=label, points=points))
    return out


def _figure(name: str, alt: str) -> Figure:
    return Figure(filename=name, alt=alt, caption=f"{name}: {alt}.")


# -- the sections --------------------------------------------------------------------------

def sections(packs: dict[str, list[Result]], records: Iterable[MetricRecord], out: Path) -> list[Section]:
    """The benchmark's sections for the detection packs ``packs`` (name -> results), drawing
    its charts into ``out``; [] when there are none."""
    if not packs:
        return []
    recs = Records(records)
    data = [pack_data(name, items) for name, items in packs.items()]
    judged = [p for p in data if p.source is not None]
    thresholds = sorted({float(t) for items in packs.values() for r in items if r.graded
                         for t in [r.metadata.get("threshold")] if isinstance(t, (int, float))})
    intro: list[Block] = [Paragraph(
        "MarkMyWords' metrics (Piet et al., section IV) for the packs graded by watermark detection ("
        + ", ".join(p.name for p in data) + "): quality, watermark size, tamper resistance, and detection "
        "against unwatermarked texts. A text is detected at p <= "
        + (" / ".join(f"{t:g}" for t in thresholds) or "the pack's threshold")
        + ". Every number here is a record of metrics.json (same pack, metric, model, watermark, "
        "attack and params; tamper resistance has attack \"*\", all of a watermark's attacks, and the best "
        "attack record the best attack's name).")]
    intro += [Paragraph(quality_note(p)) for p in data]
    intro.append(summary_table(data, recs))
    intro += noise_floor_blocks(data, recs)
    by_source = quality_sources_table(data, recs)
    if by_source is not None:
        intro.append(by_source)
    result = [Section("Watermark benchmark (MarkMyWords)", "benchmark", 2, intro)]
    repetition = repetition_blocks(data, recs)
    if repetition:
        result.append(Section("Repetition of the outputs", "benchmark-repetition-section", 3, repetition))

    size_blocks: list[Block] = [size_table(data, recs)]
    panels = _size_panels(data, recs)
    if panels:
        charts.watermark_size(panels, out / "watermark_size.png")
        size_blocks.append(_figure("watermark_size.png", "watermark size per scheme and temperature"))
    result.append(Section("Watermark size by temperature (MarkMyWords Fig. 1)", "benchmark-size-section", 3,
                          size_blocks))

    tamper_blocks: list[Block] = [Paragraph(quality_note(p)) for p in data if p.source is None]
    found = tampers(judged, recs)
    if found:
        tamper_blocks.append(tamper_table(found, data, recs))
        tamper_blocks += saturation_notes(found)
        tamper_blocks += surface_notes(data, recs)
        charts.tamper_resistance([t.panel for t in found], out / "tamper_resistance.png")
        tamper_blocks.append(_figure("tamper_resistance.png",
                                     "quality retention against detection rate per attack, the lower convex "
                                     "hull whose area gives R, and the best attack keeping 80% quality"))
    elif judged:
        tamper_blocks.append(Paragraph("No tamper resistance: no watermarked results under an attack other than "
                                       "a paraphrase have quality answers and an unattacked baseline."))
    result.append(Section("Tamper resistance (MarkMyWords Fig. 3)", "benchmark-tamper-section", 3, tamper_blocks))

    attack_blocks: list[Block] = [attacks_table(data, recs)]
    attack_panels = _attack_panels(data, recs)
    if attack_panels:
        charts.attacks(attack_panels, out / "attacks.png")
        attack_blocks.append(_figure("attacks.png", "detection rate and quality retention per attack"))
    result.append(Section("Detection and quality per attack (MarkMyWords Fig. 8)", "benchmark-attacks-section", 3,
                          attack_blocks))

    sq_panels = _size_quality_panels(data, recs)
    if sq_panels:
        charts.size_quality(sq_panels, out / "size_quality.png")
        sq_blocks: list[Block] = [_figure("size_quality.png", "watermark size against quality per scheme, "
                                          "coloured by tamper resistance (darker: more resistant)")]
    else:
        sq_blocks = [Paragraph("Not drawn: no pack has quality answers, so quality and tamper resistance are "
                               "not available (see above)." if not judged else
                               "Not drawn: no unattacked watermarked texts have both quality and a watermark size.")]
    result.append(Section("Size versus quality (MarkMyWords Fig. 6)", "benchmark-size-quality-section", 3,
                          sq_blocks))

    result.append(Section("Detection: TPR, FPR and ROC AUC", "benchmark-detection-section", 3,
                          [detection_table(data, recs)]))
    return result
