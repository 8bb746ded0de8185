"""The report's quality sections (Singh & Zou): pairwise judge preferences, per-criterion scores,
agreement between judges, and the distinguishability classifiers. The preference tables are
rendered from the same :class:`~evalrun.metrics.aggregates.MetricRecord` list that goes to
``metrics.json``, so the two cannot disagree."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from evalrun._util.display import interval_text
from evalrun.metrics.waterbench import table_rows
from evalrun.report.data import ReportData
from evalrun.report.document import Paragraph, Section, Table

NA = "n/a"


def _share(rec: Any) -> str:
    if rec is None or rec.value is None:
        return NA
    ci = f" {interval_text(rec.ci_low, rec.ci_high, percent=True)}" if rec.ci_low is not None else ""
    return f"{100 * rec.value:.1f}%{ci}"


def _mean(rec: Any) -> str:
    if rec is None or rec.value is None:
        return NA
    ci = f" ({rec.ci_low:.2f}, {rec.ci_high:.2f})" if rec.ci_low is not None else ""
    return f"{rec.value:.2f}{ci}"


#: the per-judge records of the preference table (:mod:`evalrun.metrics.pairwise`)
PREFERENCE_METRICS = ("prefer_unwatermarked", "prefer_baseline", "prefer_watermarked", "prefer_tie",
                      "first_position_rate", "position_consistency", "unparsed_rate")


def judge_name(params: Mapping[str, Any], prefix: str = "") -> str:
    """``<method>:<judge>`` from a record's params (``other_method``/``other_judge`` with
    ``prefix="other_"``), as the tables show a judge."""
    return f"{params[prefix + 'method']}:{params[prefix + 'judge']}"


@dataclass
class JudgeRecords:
    """One judge's records about one (pack, model, watermark, attack)."""

    #: metric -> record, for :data:`PREFERENCE_METRICS`
    metrics: dict[str, Any] = field(default_factory=dict)
    #: criterion -> side -> ``judge_score`` record, criteria in the records' order
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)


def _group(records: Sequence[Any]) -> dict[tuple[str, str, str, str, str], JudgeRecords]:
    """(pack, model, watermark, attack, judge) -> that judge's records."""
    out: dict[tuple[str, str, str, str, str], JudgeRecords] = defaultdict(JudgeRecords)
    for r in records:
        if r.metric in PREFERENCE_METRICS:
            out[(r.pack, r.model, r.watermark, r.attack, judge_name(r.params))].metrics[r.metric] = r
        elif r.metric == "judge_score":
            scores = out[(r.pack, r.model, r.watermark, r.attack, judge_name(r.params))].scores
            scores.setdefault(str(r.params["criterion"]), {})[str(r.params["side"])] = r
    return out


def preference_table(records: Sequence[Any]) -> Table | None:
    groups = _group(records)
    rows = []
    for (pack, model, watermark, attack, judge), found in sorted(groups.items()):
        recs = found.metrics
        base = next((k for k in recs if k in ("prefer_unwatermarked", "prefer_baseline")), None)
        if base is None:
            continue
        rows.append([pack, model, watermark, attack, judge, str(recs[base].n), _share(recs[base]),
                     _share(recs.get("prefer_watermarked")), _share(recs.get("prefer_tie")),
                     _share(recs.get("first_position_rate")), _share(recs.get("position_consistency")),
                     _share(recs.get("unparsed_rate"))])
    if not rows:
        return None
    return Table("pairwise-preference",
                 ["pack", "model", "watermark", "attack", "judge", "pairs", "prefer unwatermarked (baseline)",
                  "prefer watermarked", "tie", "first position picked", "position consistency", "unparsed"],
                 rows, caption="Share of pairs whose judge preferred each text (95% interval: Wilson with one answer "
                               "per pair, a bootstrap over pairs when pairs were asked in both orders; such a pair "
                               "counts once, each answer with weight 1/2). A judge without position bias picks the "
                               "first position 50% of the time.")


def criteria_table(records: Sequence[Any]) -> Table | None:
    rows = []
    for (pack, model, watermark, _attack, judge), found in sorted(_group(records).items()):
        for criterion, sides in found.scores.items():
            base = sides.get("unwatermarked") or sides.get("baseline")
            rows.append([pack, model, watermark, judge, criterion, _mean(base), _mean(sides.get("watermarked")),
                         str(max((r.n for r in sides.values()), default=0))])
    if not rows:
        return None
    return Table("pairwise-criteria", ["pack", "model", "watermark", "judge", "criterion",
                                       "unwatermarked (baseline) mean", "watermarked mean", "answers"], rows,
                 caption="Mean 1–5 score per criterion and side (Singh & Zou Fig. 2b), with 95% bootstrap intervals.")


def agreement_table(records: Sequence[Any]) -> Table | None:
    rows = [[r.pack, r.model, r.watermark, r.attack, f"{judge_name(r.params)} vs {judge_name(r.params, 'other_')}",
             str(r.n), _share(r)] for r in records if r.metric == "judge_agreement"]
    if not rows:
        return None
    return Table("pairwise-agreement", ["pack", "model", "watermark", "attack", "judges", "common pairs",
                                        "decided alike"], rows,
                 caption="Agreement between two judges (or two prompts) over the same pairs (Singh & Zou Fig. 3b).")


def distinguish_table(results: Sequence[dict[str, Any]]) -> Table | None:
    rows = []
    for res in results:
        for name, m in sorted(res["classifiers"].items()):
            acc, auc = m["accuracy"], m["roc_auc"]
            rows.append([res["model"], res["watermark"], res["attack"], res["embedder"],
                         f"{res['n_watermarked']}+{res['n_unwatermarked']}", name,
                         f"{acc['mean']:.3f} ± {acc['std']:.3f} ({acc['min']:.3f}–{acc['max']:.3f})",
                         f"{auc['mean']:.3f} ± {auc['std']:.3f} ({auc['min']:.3f}–{auc['max']:.3f})",
                         str(len(acc["folds"]))])
    if not rows:
        return None
    return Table("distinguishability", ["model", "watermark", "attack", "embedder", "texts (wm+unwm)", "classifier",
                                        "accuracy: mean ± sd (range)", "ROC AUC: mean ± sd (range)", "folds"], rows,
                 caption="Classifiers telling watermarked from unwatermarked outputs by their embeddings "
                         "(Singh & Zou appendix B): shuffled k-fold cross-validation with each case's texts in one fold; "
                         "mean, standard deviation and range over the folds. 0.5 means indistinguishable.")


def tune_table(results: Sequence[dict[str, Any]]) -> Table | None:
    rows = []
    for res in results:
        for t in res["tried"]:
            rows.append([res["pack"], res["model"], f"{res['target_tpr']:g}", f"{res['z_threshold']:g}",
                         t["watermark"], f"{t['tpr']:.3f} ({t['ci_low']:.2f}–{t['ci_high']:.2f})",
                         f"{t['detected']}/{t['n']}", "chosen" if t["watermark"] == res["watermark"] else "",
                         f"{t['seconds']:.1f}"])
    if not rows:
        return None
    return Table("strength-tuning", ["pack", "model", "target TPR", "z threshold", "configuration tried",
                                     "TPR (95% Wilson)", "detected", "", "seconds"], rows,
                 caption="WaterBench's hyper-parameter search (Tu et al., section 3.2): each configuration tried, in "
                         "order; the chosen one has the TPR closest to the target.")


def waterbench_table(records: Sequence[Any]) -> Table | None:
    rows = table_rows(records)
    if not rows:
        return None
    return Table("waterbench", ["pack", "model", "watermark", "attack", "level", "TP % (95%) [n]", "TN % (95%) [n]",
                                "GM", "GM unwatermarked", "GM drop"], rows,
                 caption="WaterBench's joint evaluation (Tu et al., Tables 3-5): true-positive rate of the watermarked "
                         "outputs at the pack's z threshold (detected when z >= it; WaterBench counts z > 4, which "
                         "differs only for the outputs 'at the threshold'), true-negative rate under the same "
                         "watermark of the cases' human reference answers (ref), or of the unwatermarked outputs for "
                         "cases without one (out), generation metric (token F1 or ROUGE-L F1 x 100) and its relative "
                         "drop, over all cases, per length category and per task.")


def _size(x: Any) -> str:
    return "∞" if x == "inf" else (NA if x is None else f"{x:g}")


def sweep_tables(results: Sequence[dict[str, Any]]) -> list[Table]:
    """Table V-style rows (one per stored sweep) and each sweep's configurations."""
    rows, tried = [], []
    for res in results:
        constraint = f"≤{100 * res['max_quality_degradation']:g}% quality, >{res['min_tamper_resistance']:g} tamper"
        if res.get("watermark"):
            low, high = res["aggregate_size_ci"]
            per_key = ", ".join(_size(e["size"]) for e in res["remeasure"])
            rows.append([res["pack"], res["model"], res["scheme"], constraint, res["watermark"],
                         f"{_size(res['aggregate_size'])} ({_size(res['size_mad_over_keys'])})",
                         f"{_size(low)}–{_size(high)}", per_key, res["quality_judge"]])
        else:
            rows.append([res["pack"], res["model"], res["scheme"], constraint, "none eligible", NA, NA, NA,
                         res["quality_judge"]])
        for c in res["configs"]:
            deg = c["quality_degradation"]
            tried.append([res["scheme"], constraint, c["watermark"], _size(c["size"]),
                          NA if deg is None else f"{100 * deg:.2f}%",
                          NA if c["tamper_resistance"] is None else f"{c['tamper_resistance']:.3f}",
                          "chosen" if c["watermark"] == res.get("watermark") else ""])
    if not rows:
        return []
    return [Table("aggregate-metric", ["pack", "model", "scheme", "constraint", "chosen configuration",
                                       "aggregate size (MAD over keys)", "95% CI", "size per key", "quality judge"],
                  rows, caption="MarkMyWords' aggregate metric (Piet et al., IV-D, Table V): the configuration of smallest "
                                "watermark size within the quality and tamper-resistance bounds, re-measured under "
                                "other keys and seeds; its size in tokens over all re-measured texts (bootstrap CI), "
                                "the median absolute deviation of the per-key sizes in parentheses as in Table V."),
            Table("aggregate-configs", ["scheme", "constraint", "configuration", "size", "quality degradation",
                                        "tamper resistance", ""], tried,
                  caption="Every configuration the sweep measured (with the run's key).")]


def sections(data: ReportData) -> list[Section]:
    """The quality sections, when the store holds pairwise answers or distinguish analyses."""
    out = []
    blocks = [t for t in (preference_table(data.quality), criteria_table(data.quality),
                          agreement_table(data.quality)) if t is not None]
    if blocks:
        out.append(Section("Quality: pairwise judges", "quality-pairwise", 2, [
            Paragraph("Singh & Zou's pairwise judges: every watermarked result against the unwatermarked result of "
                      "the same case, model, attack and repetition, in an order chosen by a seeded coin per pair."),
            *blocks]))
    table = distinguish_table(data.distinguish)
    if table is not None:
        out.append(Section("Quality: distinguishability", "quality-distinguish", 2, [table]))
    table = waterbench_table(data.quality)
    if table is not None:
        out.append(Section("WaterBench: TP, TN and GM per task and category", "waterbench", 2, [table]))
    tables = sweep_tables(data.sweep)
    if tables:
        out.append(Section("Aggregate metric (MarkMyWords)", "aggregate-metric", 2, list(tables)))
    table = tune_table(data.tune)
    if table is not None:
        out.append(Section("Strength tuning (WaterBench)", "strength-tuning", 2, [table]))
    return out
