"""The WaterDrum section of the demo's report: table, Fig. 4, calibration plot, metrics.

Drawn here (not in ``report/``) because it needs what the store does not hold: which model
is the original, the retrained, a calibration or an unlearned one. It is handed to
:func:`evalrun.report.build_report`, which puts it first and adds the records to
``metrics.json``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from evalrun._util.files import atomic_open
from evalrun.metrics.aggregates import record
from evalrun.metrics.stats import Estimate
from evalrun.report import build_report
from evalrun.report.document import Figure, Paragraph, Section, Table
from evalrun.unlearning.aggregates import Summary
from evalrun.unlearning.owner_watermarks import owner_value

TARGET_AUROC, TARGET_R2 = 0.9, 0.8
#: WaterDrum Table 4, Waterfall row
SEED_AUROC, SEED_R2 = 0.965, 0.963
FIG4 = "waterdrum_fig4_forget_vs_retain.png"
FIG3 = "waterdrum_calibration.png"


def _fmt(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def draw_fig4(summary: Summary, path: Path) -> Path:
    """WaterDrum Fig. 4: scaled forget aggregate (y) against scaled retain aggregate (x);
    perfect unlearning sits bottom right (retain 1, forget 0)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    style = {"original": ("o", "tab:blue"), "retrained": ("*", "tab:green"),
             "calibration": (".", "0.6"), "unlearned": ("s", "tab:red")}
    for m in summary.models.values():
        marker, colour = style.get(m["role"], ("x", "k"))
        ax.scatter([m["retain_scaled"]], [m["forget_scaled"]], marker=marker, color=colour,
                   s=80 if m["role"] != "calibration" else 40, zorder=3)
        ax.annotate(m["label"], (m["retain_scaled"], m["forget_scaled"]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    ax.axhline(0, color="0.85", lw=0.8)
    ax.set_xlabel("retain set aggregate WaterDrum (original = 1)")
    ax.set_ylabel("forget set aggregate WaterDrum (original = 1)")
    ax.set_title("Unlearning algorithms with WaterDrum (WaterDrum Fig. 4)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_open(path, what="--out", binary=True) as fh:
        fig.savefig(fh, format="png", dpi=110)
    return path


def draw_calibration(summary: Summary, path: Path) -> Path:
    """WaterDrum Fig. 3: scaled forget aggregate against k/|F| with the line through 0."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = [p[0] for p in summary.calibration]
    ys = [p[1] for p in summary.calibration]
    ax.plot(xs, ys, "o-", label="WaterDrum (forget set)")
    if not math.isnan(summary.d2_slope):
        ax.plot([0, 1], [0, summary.d2_slope], ":", color="k",
                label=f"best fit through origin, R² = {_fmt(summary.d2_r2)}")
    ax.set_xlabel("k / |F| (share of the forget set trained on)")
    ax.set_ylabel("forget set aggregate (original = 1)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_open(path, what="--out", binary=True) as fh:
        fig.savefig(fh, format="png", dpi=110)
    return path


def records(summary: Summary, retrained: str, d4_auroc: float | None,
            similarity: str = "exact") -> list[Any]:
    """``metrics.json`` records: D1, D2 (and D4) plus each model's scaled aggregates
    (``waterdrum_forget_scaled`` / ``waterdrum_retain_scaled``, params ``{"label": <model label>}``)."""
    def est(value: float | None, low: float | None = None, high: float | None = None) -> Estimate:
        return Estimate(*(math.nan if x is None else float(x) for x in (value, low, high)))

    r = summary.models[retrained]
    out = [record("waterdrum", "waterdrum_d1_auroc", est(summary.d1_auroc, *summary.d1_ci),
                  r["n_forget"] + r["n_retain"], retrained, "none", "none"),
           record("waterdrum", "waterdrum_d2_calibration_r2", est(summary.d2_r2, *summary.d2_ci),
                  len(summary.calibration), "calibration models", "none", "none")]
    if d4_auroc is not None:
        out.append(record("waterdrum", f"waterdrum_d4_{similarity}_duplicate_auroc", est(d4_auroc),
                          r["n_forget"] + r["n_retain"], f"retrained with {similarity} duplicates",
                          "none", "none"))
    for model, m in summary.models.items():
        for key in ("forget_scaled", "retain_scaled"):
            out.append(record("waterdrum", f"waterdrum_{key}", est(m[key]),
                              m["n_forget"] if key.startswith("forget") else m["n_retain"], model, "none", "none",
                              params={"label": m["label"]}))
    return out


def write_report(db: Path, out: Path, summary: Summary, retrained: str, *, config: Any,
                 timings: dict[str, Any], d4_auroc: float | None,
                 data: Sequence[dict[str, Any]], secret: bool,
                 similarity: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Build the report (store report + WaterDrum section) into ``out``; the headline.
    ``similarity``: the D4 setting's name (``setting``) and its copies' mean closeness to the
    forget passages (``unigram_f1``, ``rouge_l_recall``)."""
    sim_setting = dict(similarity or {"setting": "exact"})
    sim_name = str(sim_setting.pop("setting"))
    closeness = ", ".join(f"{k.replace('_', ' ')} {_fmt(v)}" for k, v in sim_setting.items())
    out.mkdir(parents=True, exist_ok=True)
    draw_fig4(summary, out / FIG4)
    draw_calibration(summary, out / FIG3)
    rows = []
    for model, m in summary.models.items():
        rows.append([m["label"], m["role"], _fmt(m["fraction"], 2) if m["fraction"] is not None else "-",
                     _fmt(m["forget"], 4), _fmt(m["retain"], 4), _fmt(m["forget_scaled"]),
                     _fmt(m["retain_scaled"]), _fmt(m["auroc"]), model])
    table = Table(id="waterdrum-models", headers=["model", "role", "k/|F|", "forget q", "retain q",
                                                  "forget (scaled)", "retain (scaled)",
                                                  "AUROC retain vs forget", "model spec"],
                  rows=rows, caption="Aggregate WaterDrum per model: mean verification score "
                  "(q-score) over the set's queries, and scaled so that the original model is 1.0.")
    sim = [p["similarity"] for p in data]
    wm_q = [p["verification_score"] for p in data]
    steps = "; ".join(f"{s['step']}: {s['seconds']:.0f} s" for s in timings["steps"])
    d1_ok = summary.d1_auroc >= TARGET_AUROC
    d2_ok = summary.d2_r2 >= TARGET_R2
    paras = [
        f"D1 separability: AUROC of retain vs forget verification scores on the retrained model "
        f"= {_fmt(summary.d1_auroc)} (95% bootstrap CI {_fmt(summary.d1_ci[0])}-{_fmt(summary.d1_ci[1])}; target >= {TARGET_AUROC}, {'met' if d1_ok else 'NOT met'}; "
        f"WaterDrum Table 4, Waterfall: {SEED_AUROC}). "
        f"D2 calibration: R² of the scaled forget aggregate against k/|F| through the origin "
        f"(points {', '.join(f'({x:.2f}, {y:.3f})' for x, y in summary.calibration)}) = "
        f"{_fmt(summary.d2_r2)} (95% bootstrap CI over the points {_fmt(summary.d2_ci[0])}-"
        f"{_fmt(summary.d2_ci[1])}; target >= {TARGET_R2}, {'met' if d2_ok else 'NOT met'}; seed: "
        f"{SEED_R2})." + (f" D4 ({sim_name} duplicates of the forget set in the retain set under "
                          f"other owners' keys{'; mean closeness to the forget passages: ' + closeness if closeness else ''}): "
                          f"AUROC {_fmt(d4_auroc)}." if d4_auroc is not None else ""),
        f"Setting: {config.owners} owners x {config.points} passages (owner(s) "
        f"{', '.join(map(str, config.forget_owners))} forgotten), {config.continuation_tokens}-token "
        f"watermarked continuations, full fine-tuning {config.train.epochs} epochs at lr "
        f"{config.train.lr:g}, unlearning {config.unlearn.epochs} epochs at lr {config.unlearn.lr:g}, "
        f"{config.repetitions} outputs per query at temperature 1 (WaterDrum App. E.2 uses 10), "
        f"seed {config.seed}. Owner keys: {'derived from the secret key' if secret else 'the owner indices'}.",
        "Deviation from WaterDrum: the data are not paraphrased. The embedded 5 M-parameter model "
        "cannot paraphrase, so each owner's data point is the passage's first 12 words followed by "
        "the embedded model's continuation generated under the owner's Waterfall perturbation "
        f"(evalrun watermark-data --mode continue). Mean verification score of the watermarked "
        f"data {_fmt(sum(wm_q) / len(wm_q))}; mean unigram-F1 similarity to the original passage "
        f"{_fmt(sum(sim) / len(sim))} (a continuation keeps little of the original).",
        f"Timings ({'--quick' if timings.get('quick') else 'full'}; {timings.get('cpu_count')} CPUs; "
        f"1/5/15-min load average at start {timings.get('load_avg_start')}, at the end of the "
        f"last step {timings['steps'][-1]['load_avg'] if timings['steps'] else 'n/a'}): {steps}.",
    ]
    section = Section("WaterDrum: unlearning metric", "waterdrum-demo", 2, [
        Paragraph(paras[0]), table,
        Figure(filename=FIG4, alt="forget vs retain aggregate WaterDrum per model",
               caption=f"{FIG4}: WaterDrum Fig. 4 -- perfect unlearning is bottom right."),
        Figure(filename=FIG3, alt="calibration of the forget aggregate against k/|F|",
               caption=f"{FIG3}: WaterDrum Fig. 3 -- calibration curve and its line through the origin."),
        *[Paragraph(p) for p in paras[1:]],
    ])
    build_report(db, out, sections=[section], metrics=records(summary, retrained, d4_auroc, sim_name))
    return {"d1_auroc": summary.d1_auroc, "d2_r2": summary.d2_r2, "d4_auroc": d4_auroc,
            "similarity": sim_name if d4_auroc is not None else "none",
            "report": str(out / "report.md"),
            "models": {m["label"]: {"forget_scaled": m["forget_scaled"],
                                    "retain_scaled": m["retain_scaled"]}
                       for m in summary.models.values()}}



def compare_records(results: Sequence[Any]) -> list[Any]:
    """``unlearning_d1`` / ``unlearning_d2`` records, params ``{method, similarity}`` plus, for
    WaterDrum's, ``watermark`` (the registered watermark method whose owner keys were verified:
    ``waterfall`` in Tables 2 and 3, each of Table 4's in the no-duplicate setting), with the
    95% bootstrap intervals of :func:`evalrun.unlearning.aggregates.summarize`."""
    out = []
    for r in results:
        s = r.summary
        retrained = [m for m in s.models.values() if m["role"] == "retrained"][0]
        params = {"method": r.method, "similarity": r.similarity}
        if r.watermark:
            params["watermark"] = r.watermark
        out.append(record("waterdrum", "unlearning_d1", Estimate(s.d1_auroc, *s.d1_ci),
                          retrained["n_forget"] + retrained["n_retain"], "retrained", "none", "none",
                          params=params))
        out.append(record("waterdrum", "unlearning_d2", Estimate(s.d2_r2, *s.d2_ci),
                          len(s.calibration), "calibration models", "none", "none", params=params))
    return out


def _seconds(x: float) -> str:
    if x is None or math.isnan(x):
        return "n/a"
    return f"{x * 1000:.2f} ms" if x < 0.1 else f"{x:.3g} s"


def _with_ci(value: float, ci: tuple[float, float]) -> str:
    """``value (low-high)``; the value alone when there is no interval."""
    if any(math.isnan(x) for x in ci):
        return _fmt(value)
    return f"{_fmt(value)} ({_fmt(ci[0])}-{_fmt(ci[1])})"


def table4_table(rows: Sequence[Any]) -> Table:
    """WaterDrum Table 4: per watermark method D1, D2 (with intervals), verification seconds
    per text and whether verification reads a model, measured here, beside the paper's."""
    body = []
    for r in rows:
        s, paper = r.summary, r.method.paper
        body.append([r.method.title, _with_ci(s.d1_auroc, s.d1_ci), _with_ci(s.d2_r2, s.d2_ci),
                     f"{_seconds(r.seconds_per_text)} (n = {r.n_timed})", "yes" if r.needs_model else "no",
                     ", ".join(f"{f:g}" for f in r.fractions),
                     _fmt(paper.d1) if paper else "-", _fmt(paper.d2) if paper else "-",
                     f"{paper.seconds:g} s" if paper else "-", ("yes" if paper.gpu else "no") if paper else "-"])
    return Table(id="unlearning-table4", headers=[
        "watermark", "D1 AUROC (95%)", "D2 R² (95%)", "verification per text (here)",
        "reads the model (GPU)?", "calibration k/|F|", "paper D1", "paper D2", "paper time", "paper GPU?"],
        rows=body, caption="WaterDrum Table 4 offline: WaterDrum with each watermark adapted to many "
        "owners (each owner's id as the key, applied by the same continuation operator), no-duplicate "
        "setting as in the paper; verification time is the mean wall time of the grader's verification "
        "over the stored answers on this machine. Paper: WaterDrum-Ax, Llama-3.1-8B (Gemma-7B for SynthID).")


def write_compare_report(db: Path, out: Path, results: Sequence[Any], *, config: Any,
                         fractions: Sequence[float], timings: dict[str, Any],
                         closeness: Mapping[str, Mapping[str, float]], seed: int,
                         table4: Sequence[Any] = (), fig4: Summary | None = None) -> dict[str, Any]:
    """The comparison's report (WaterDrum Tables 2, 3 and 4 and Fig. 4, offline) into ``out``;
    the headline. ``table4``: :class:`evalrun.unlearning.compare.Table4Row` s; ``fig4``: the
    no-duplicate models with the unlearned ones."""
    out.mkdir(parents=True, exist_ok=True)
    methods = list(dict.fromkeys(r.method for r in results))
    settings = list(dict.fromkeys(r.similarity for r in results))
    by = {(r.method, r.similarity): r.summary for r in results}

    def cell(value: float, ci: tuple[float, float]) -> str:
        return f"{_fmt(value)} ({_fmt(ci[0])}-{_fmt(ci[1])})"

    tables = []
    for key, title, attr in (("d1", "D1 separability: AUROC of retain vs forget values on the retrained model",
                              ("d1_auroc", "d1_ci")),
                             ("d2", "D2 calibration: R² through the origin of the scaled forget aggregate "
                              "against k/|F|", ("d2_r2", "d2_ci"))):
        rows = [[name, *(cell(getattr(by[(m, name)], attr[0]), getattr(by[(m, name)], attr[1]))
                         for m in methods)] for name in settings]
        tables.append(Table(id=f"unlearning-{key}", headers=["data similarity", *methods], rows=rows,
                            caption=f"{title} (95% bootstrap interval; seed {seed})."))
    steps = "; ".join(f"{s['step']}: {s['seconds']:.0f} s" for s in timings["steps"])
    close = "; ".join(f"{name}: " + ", ".join(f"{k.replace('_', ' ')} {_fmt(v)}" for k, v in c.items())
                      for name, c in closeness.items() if c)
    paras = [
        f"WaterDrum's Tables 2 and 3 on the embedded model: {config.owners} owners x {config.points} "
        f"passages, owner(s) {', '.join(map(str, config.forget_owners))} forgotten, calibration at "
        f"k/|F| in {{0, {', '.join(f'{f:g}' for f in fractions)}, 1}}, {config.repetitions} outputs per "
        f"query, seed {seed}. Per setting the retain set is R plus that setting's copies D_s of the "
        f"forget passages (mean closeness of the copies to them: {close or 'n/a'}).",
        "Methods: waterdrum (owner-keyed Waterfall q-score of the answer); rouge_l_recall and "
        "rouge_l_f (the answer against the watermarked data point after its query, which is what "
        "the models were trained on -- WaterDrum's App. F.4 / Table 9 setting, where watermarking "
        "de-duplicates the copies and ROUGE keeps more of its AUROC than in Table 2); mia_min_k and "
        "mia_min_k_pp (Min-K% / Min-K%++ at K = 40% of the data point under the model; aggregate "
        "2 AUROC - 1 against a holdout; WaterDrum reports no D1 for MIA, the retain-vs-forget AUROC "
        "is shown for completeness).",
        f"Timings ({'--quick' if timings.get('quick') else 'full'}, {timings.get('date')}; "
        f"{timings.get('cpu_count')} CPUs; load average at start {timings.get('load_avg_start')}, "
        f"at the end {timings.get('load_avg_end')}; total {timings.get('total_seconds')} s): {steps}.",
    ]
    blocks: list[Any] = [Paragraph(paras[0]), tables[0], tables[1], *[Paragraph(p) for p in paras[1:]]]
    if table4:
        blocks += [Paragraph(
            "WaterDrum's Table 4: WaterDrum implemented with other watermarks adapted to many owners "
            "(KGW, Kirchenbauer et al. 2023; SynthID-Text, Dathathri et al. 2024; EXP-edit, Kuditipudi "
            "et al. 2024) beside Waterfall (Lau et al. 2024), in the no-duplicate setting as the paper's. "
            "Each method watermarks the same passages under each owner's key by the same operator, "
            "trains its own original, retrained and calibration models, and WaterDrum averages the "
            "method's own per-text value: " + "; ".join(
                f"{r.method.name}: {owner_value(r.method.spec)}" for r in table4) +
            ". Only Waterfall's q-score and KGW's z-score are 0 on text that carries no key, which "
            "D2's line through the origin needs."), table4_table(table4)]
    if fig4 is not None:
        draw_fig4(fig4, out / FIG4)
        points = "; ".join(f"{m['label']} ({_fmt(m['forget_scaled'], 2)}, {_fmt(m['retain_scaled'], 2)})"
                           for m in fig4.models.values() if m["role"] != "calibration")
        blocks += [Figure(filename=FIG4, alt="forget vs retain aggregate WaterDrum per model",
                          caption=f"{FIG4}: WaterDrum Fig. 4 -- the unlearning algorithms applied to the "
                          "no-duplicate original, beside retraining and the original (aggregate WaterDrum "
                          "of the forget and the retain set, scaled so the original is 1); perfect "
                          "unlearning is bottom right."),
                   Paragraph(f"Fig. 4 points (forget, retain), scaled to the original: {points}.")]
    section = Section("WaterDrum against the baseline unlearning metrics", "unlearning-compare", 2, blocks)
    t4_results = [r.result for r in table4 if all(r.result is not x for x in results)]
    metrics = compare_records([*results, *t4_results])
    if fig4 is not None:
        metrics += [m for m in records(fig4, _retrained(fig4), None) if m.metric.endswith("_scaled")]
    build_report(db, out, sections=[section], metrics=metrics)
    return {"report": str(out / "report.md"),
            "d1": {f"{m}/{s}": by[(m, s)].d1_auroc for m, s in by},
            "d2": {f"{m}/{s}": by[(m, s)].d2_r2 for m, s in by},
            "table4": {r.method.name: {"d1": r.summary.d1_auroc, "d2": r.summary.d2_r2,
                                       "seconds_per_text": r.seconds_per_text} for r in table4},
            "fig4": {m["label"]: {"forget_scaled": m["forget_scaled"], "retain_scaled": m["retain_scaled"]}
                     for m in fig4.models.values()} if fig4 is not None else {}}


def _retrained(summary: Summary) -> str:
    return next(model for model, m in summary.models.items() if m["role"] == "retrained")
