"""The watermark benchmark's report sections (MarkMyWords): present for detection packs whatever
their name, every number equal to a metrics.json record, the tamper plot's hull drawn from
the attacks R is computed from (paraphrase left out), a quality proxy named as such, and no
numbers where there is no quality."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evalrun.metrics import lower_hull, tamper_resistance
from evalrun.metrics.aggregates import compute, params_key
from evalrun.report import build_report
from evalrun.report.benchmark import CHART_NAMES, SIZE, Records, ci_header, fmt, fmt_ci, pack_data, tampers
from evalrun.report.benchmark_charts import tamper_figure
from evalrun.report.data import load

# the names tests/report/conftest.py's write_benchmark_store uses (also in the ``bench`` fixture)
BENCH_MODEL = "hf:tiny"
KGW = "kgw:gamma=0.5,delta=2"
EXP = "exp:randomness=window,context=3"
PARA = "paraphrase:openai:para"
HEADINGS = ["Watermark benchmark (MarkMyWords)", "Watermark size by temperature (MarkMyWords Fig. 1)",
            "Tamper resistance (MarkMyWords Fig. 3)", "Detection and quality per attack (MarkMyWords Fig. 8)",
            "Size versus quality (MarkMyWords Fig. 6)", "Detection: TPR, FPR and ROC AUC"]


def records(out: Path) -> dict[tuple, dict]:
    """metrics.json by (pack, metric, model, watermark, attack, params key: notes such as
    ``saturated`` aside, as the report looks records up)."""
    recs = json.loads((out / "metrics.json").read_text())
    return {(r["pack"], r["metric"], r["model"], r["watermark"], r["attack"], params_key(r["params"])): r
            for r in recs}


def key(pack: str, metric: str, model: str, watermark: str, attack: str, **params) -> tuple:
    return (pack, metric, model, watermark, attack, params_key(params))


def table(out: Path, md_tables, heading: str) -> list[dict[str, str]]:
    [rows] = md_tables((out / "report.md").read_text())[heading]
    return rows


def same(metric: str, rec: dict, row: dict[str, str], column: str) -> None:
    """``row[column]`` and its CI column show the record (null in metrics.json is NaN, or +inf
    for a size: ∞)."""
    value, ci = row[column], row[ci_header(column)]
    shown = {fmt(metric, rec["value"])} | ({"∞"} if rec["value"] is None and metric == "watermark_size"
                                           else set())
    assert value in shown, (metric, rec, value)
    low = rec["ci_low"]
    high = math.inf if rec["ci_high"] is None and metric == "watermark_size" else rec["ci_high"]
    assert ci == fmt_ci(metric, low, high), (metric, rec, ci)


def test_fixture_names(bench) -> None:
    assert (bench.model, bench.kgw, bench.exp) == (BENCH_MODEL, KGW, EXP)


def test_sections_and_charts_are_present_for_detection_packs(benchmark_report: Path) -> None:
    text = (benchmark_report / "report.md").read_text()
    for heading in HEADINGS:
        assert f"\n{'#' * (2 if heading.startswith('Watermark benchmark') else 3)} {heading}\n" in text
    # chosen by labels: neither pack name is known to the report
    assert "\n## story_detect (watermark detection)\n" in text and "\n## news_detect (watermark detection)\n" in text
    for name in CHART_NAMES:
        assert (benchmark_report / name).stat().st_size > 10_000, name
    assert any("tamper" in n for n in CHART_NAMES)


def test_summary_numbers_are_metrics_json_records(benchmark_report: Path, md_tables) -> None:
    recs = records(benchmark_report)
    rows = table(benchmark_report, md_tables, "Watermark benchmark (MarkMyWords)")
    assert len(rows) == 6   # two packs x (none, exp, kgw)
    checked = 0
    for row in rows:
        pack, wm = row["pack"], row["watermark"]
        source = "rating" if pack == "story_detect" else "perplexity-proxy"
        wm = "none" if wm.startswith("none") else wm
        same("quality", recs[key(pack, "quality", BENCH_MODEL, wm, "none", quality=source)], row, "quality")
        if wm == "none":
            assert set(list(row.values())[6:]) == {"n/a"}
            continue
        q = {"quality": source}
        for metric, attack, column, params in (("quality_degradation", "none", "quality degradation", q),
                                               ("watermark_size", "none", "watermark size E (tokens)", SIZE),
                                               ("size_false_positive_rate", "none", "size FPR", SIZE),
                                               ("tamper_resistance", "*", "tamper resistance R", q),
                                               ("detection_rate", "none", "detection rate", {}),
                                               ("false_positive_rate", "none", "FPR", {}),
                                               ("roc_auc", "none", "ROC AUC", {})):
            same(metric, recs[key(pack, metric, BENCH_MODEL, wm, attack, **params)], row, column)
            checked += 1
    assert checked == 4 * 7
    # a few cells by hand: every unattacked KGW text is detected; one of 8 unwatermarked texts
    # is a false positive under KGW's detector; quality is the mean of the fixture's ratings
    kgw = next(r for r in rows if (r["pack"], r["watermark"]) == ("story_detect", KGW))
    assert (kgw["detection rate"], kgw["FPR"]) == ("100.0%", "12.5%")
    assert kgw["quality"] == "0.799"   # ratings 0.79, 0.80, 0.81, 0.79, ... over 8 cases: 0.79875


def test_other_tables_show_metrics_json_records(benchmark_report: Path, md_tables) -> None:
    recs = records(benchmark_report)
    for row in table(benchmark_report, md_tables, "Watermark size by temperature (MarkMyWords Fig. 1)"):
        rec = recs[key(row["pack"], "watermark_size", BENCH_MODEL, row["watermark"], "none",
                       temperature=float(row["temperature"]), **SIZE)]
        same("watermark_size", rec, row, "watermark size E (tokens)")
        assert row["texts"] == str(rec["n"]) == "4"
    for row in table(benchmark_report, md_tables, "Detection and quality per attack (MarkMyWords Fig. 8)"):
        group = (row["pack"], BENCH_MODEL, row["watermark"], row["attack"])
        source = "rating" if row["pack"] == "story_detect" else "perplexity-proxy"
        same("detection_rate", recs[key(group[0], "detection_rate", *group[1:])], row, "detection rate")
        same("quality", recs[key(group[0], "quality", *group[1:], quality=source)], row, "quality")
        if row["attack"] != "none":
            rec = recs[key(group[0], "quality_retention", *group[1:], quality=source)]
            same("quality_retention", rec, row, "quality retention")
    detection = table(benchmark_report, md_tables, "Detection: TPR, FPR and ROC AUC")
    assert len(detection) == 2 * 2 * 5
    for row in detection:
        group = (BENCH_MODEL, row["watermark"], row["attack"])
        for metric, column, params in (("tpr_at_fpr", "TPR at 1% FPR", {"fpr": 0.01}),
                                       ("tpr_at_fpr", "TPR at 2% FPR", {"fpr": 0.02}),
                                       ("false_positive_rate", "FPR at the p threshold", {}),
                                       ("roc_auc", "ROC AUC", {})):
            same(metric, recs[key(row["pack"], metric, *group, **params)], row, column)
        assert row["texts (watermarked + not)"] == str(recs[key(row["pack"], "roc_auc", *group)]["n"]) == "16"


def test_tamper_table_hull_and_paraphrase(benchmark_report: Path, md_tables) -> None:
    recs = records(benchmark_report)
    rows = table(benchmark_report, md_tables, "Tamper resistance (MarkMyWords Fig. 3)")
    assert len(rows) == 4
    for row in rows:
        source = "rating" if row["pack"] == "story_detect" else "perplexity-proxy"
        same("tamper_resistance", recs[key(row["pack"], "tamper_resistance", BENCH_MODEL, row["watermark"], "*",
                                           quality=source)], row, "tamper resistance R")
        assert PARA not in row["attacks in R"] and "translate:fr:openai:tr" in row["attacks in R"]
        assert row["left out (paraphrase)"] == PARA
        assert row["best attack (≥ 80% quality kept)"] == "swap:p=0.1"
        best = recs[key(row["pack"], "best_attack", BENCH_MODEL, row["watermark"], "swap:p=0.1", quality=source)]
        same(best["metric"], best, row, "its detection rate")
    attacks = table(benchmark_report, md_tables, "Detection and quality per attack (MarkMyWords Fig. 8)")
    assert {r["in R"] for r in attacks if r["attack"] == PARA} == {"no (paraphrase)"}


def test_hull_is_drawn_from_the_points_r_is_computed_from(benchmark_report: Path) -> None:
    data = load(benchmark_report.parent / "bench.sqlite", None)
    recs = Records(compute(r.row for r in data.results))
    found = tampers([pack_data(p, items) for p, items in data.packs.items()], recs)
    assert len(found) == 4
    on_disk = records(benchmark_report)
    for t in found:
        source = "rating" if t.pack == "story_detect" else "perplexity-proxy"
        points = t.panel.points
        # each point is the attack's quality_retention and detection_rate records
        assert set(points) == {"swap:p=0.1", "synonym:p=0.25", "translate:fr:openai:tr"}
        for attack, (q, d) in points.items():
            assert q == pytest.approx(on_disk[key(t.pack, "quality_retention", t.model, t.watermark, attack,
                                                  quality=source)]["value"])
            assert d == pytest.approx(on_disk[key(t.pack, "detection_rate", t.model, t.watermark, attack)]["value"])
        assert set(t.panel.excluded) == {PARA}
        assert t.panel.hull == lower_hull(points)
        assert t.panel.hull == [(0.0, 0.0), points["swap:p=0.1"], (1.0, 1.0)]
        assert t.record.value == pytest.approx(tamper_resistance(points))
        assert tamper_resistance({**points, **t.panel.excluded}) == 0.0   # the paraphrase at (1, 0)
    fig = tamper_figure([t.panel for t in found])
    hulls = [line for ax in fig.axes for line in ax.get_lines() if line.get_gid() == "hull"]
    assert [list(map(tuple, h.get_xydata())) for h in hulls] == [list(t.panel.hull) for t in found]


def test_a_proxy_is_named_with_its_scorer(benchmark_report: Path, md_tables, bench) -> None:
    text = (benchmark_report / "report.md").read_text()
    assert f"news_detect: quality: perplexity proxy under {bench.scorer}, not MarkMyWords' rating judge" in text
    assert "story_detect: quality is MarkMyWords' judge rating" in text and bench.judge in text
    rows = table(benchmark_report, md_tables, "Watermark benchmark (MarkMyWords)")
    assert {r["quality source"] for r in rows if r["pack"] == "news_detect"} == {
        f"perplexity proxy ({bench.scorer})"}
    metrics = {(r["pack"], r["metric"], r["params"]["quality"]) for r in records(benchmark_report).values()
               if r["metric"] in ("quality", "quality_retention", "tamper_resistance")}
    assert {s for p, _, s in metrics if p == "news_detect"} == {"perplexity-proxy"}
    assert {s for p, _, s in metrics if p == "story_detect"} == {"rating"}


def test_without_quality_the_report_says_so_and_shows_none(tmp_path: Path, benchmark_report: Path,
                                                           md_tables, bench) -> None:
    db = bench.write(tmp_path / "plain.sqlite", {"plain_detect": "none"})
    out = tmp_path / "report"
    out.mkdir()
    for name in CHART_NAMES:   # charts of an earlier report with quality must not survive
        (out / name).write_bytes((benchmark_report / name).read_bytes())
    build_report(db, out)
    text = (out / "report.md").read_text()
    assert "plain_detect: quality, quality retention and tamper resistance are not available: no judge answers" \
        in text
    assert not (out / "tamper_resistance.png").exists() and not (out / "size_quality.png").exists()
    assert (out / "watermark_size.png").exists() and (out / "attacks.png").exists()
    assert not [k for k in records(out) if k[1].startswith(("quality", "tamper", "best_attack"))]
    for row in table(out, md_tables, "Watermark benchmark (MarkMyWords)"):
        assert (row["quality"], row["quality degradation"], row["tamper resistance R"]) == ("n/a",) * 3
        assert row["quality source"] == "none (no judge answers)"
    assert table(out, md_tables, "Watermark benchmark (MarkMyWords)")[1]["detection rate"] == "75.0%"   # exp
    assert "tamper_resistance.png" not in text


def test_exp_size_with_undetected_texts_and_fpr_records_name_the_detector(benchmark_report: Path) -> None:
    recs = records(benchmark_report)
    fpr = [k for k in recs if k[1] == "false_positive_rate"]
    assert fpr and {k[3] for k in fpr} == {KGW, EXP}
    assert recs[key("story_detect", "watermark_size", BENCH_MODEL, EXP, "none", **SIZE)]["n"] == 8
