"""build_report on a store with both seed-003 packs, a generic pack, three models and n=3:
every number in report.md is checked against a direct SQL query over the store."""

from __future__ import annotations

import html
import sqlite3
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from evalrun._util.errors import EvalrunError
from evalrun.report import build_report, tables
from evalrun.report.build import CHART_NAMES
from evalrun.report.data import EXTRACTION, WATERMARK, load
from evalrun.store.database import Store

WR = "watermark_robustness"
HME = "hidden_message_extraction"


def pct(k: int, n: int) -> str:
    return f"{100 * k / n:.1f}%"


@pytest.fixture(scope="module")
def md(three_model_report: Path, md_tables):
    return md_tables((three_model_report / "report.md").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def db(three_model_store) -> sqlite3.Connection:
    con = sqlite3.connect(three_model_store.db)
    yield con
    con.close()


def graded_counts(db: sqlite3.Connection, pack: str) -> dict[tuple[str, str], int]:
    return {(m, lab): n for m, lab, n in db.execute(
        "SELECT model, label, COUNT(*) FROM results WHERE pack = ? AND error IS NULL"
        " AND label IS NOT NULL GROUP BY model, label", (pack,))}


def test_files_written(three_model_report: Path) -> None:
    for name in ("report.md", "report.html", *CHART_NAMES):
        path = three_model_report / name
        assert path.is_file() and path.stat().st_size > 0, name
    for name in CHART_NAMES:
        assert (three_model_report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("pack, heading, labels", [
    (WR, "Watermark robustness", WATERMARK.labels),
    (HME, "Hidden-message extraction", EXTRACTION.labels),
])
def test_summary_matches_sql(md, db, three_model_store, pack, heading, labels) -> None:
    summary = {row["model"]: row for row in md[heading][0]}
    counts = graded_counts(db, pack)
    models = [m for (m,) in db.execute("SELECT DISTINCT model FROM results")]
    assert sorted(summary) == sorted(models)
    success = labels[0]
    for model in models:
        row = summary[model]
        total, cases, errors = db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT case_id), SUM(error IS NOT NULL) FROM results"
            " WHERE pack = ? AND model = ?", (pack, model)).fetchone()
        assert row["results"] == str(total)
        assert row["cases"] == str(cases)
        assert row["errors"] == str(errors)
        graded = sum(counts.get((model, lab), 0) for lab in labels)
        for lab in labels:
            assert row[lab] == str(counts.get((model, lab), 0)), (model, lab)
            # and the fixture's own bookkeeping agrees with the store
            assert counts.get((model, lab), 0) == three_model_store.expected[(pack, model)][lab]
        rate_col = "accuracy" if pack == HME else f"{success} rate"
        assert row[rate_col] == pct(counts.get((model, success), 0), graded)
        # per-case mean over repetitions (a result without a grade counting 0), then over cases
        (mean,) = db.execute(
            "SELECT AVG(cm) FROM (SELECT AVG(CASE WHEN label IS NOT NULL AND error IS NULL THEN score"
            " ELSE 0 END) AS cm FROM results WHERE pack = ? AND model = ? GROUP BY case_id)",
            (pack, model)).fetchone()
        assert row["mean score"] == f"{mean:.3f}"
        flips = db.execute(
            "SELECT SUM(nl > 1), COUNT(*) FROM (SELECT COUNT(DISTINCT label) AS nl, COUNT(*) AS n"
            " FROM results WHERE pack = ? AND model = ? AND label IS NOT NULL AND error IS NULL"
            " GROUP BY case_id) WHERE n >= 2", (pack, model)).fetchone()
        assert row["flip rate"] == f"{pct(flips[0], flips[1])} ({flips[0]}/{flips[1]})"


def test_known_fixture_numbers(md) -> None:
    """Hand-counted from the fixture, so a shared bug in SQL and report cannot hide."""
    wr = {row["model"]: row for row in md["Watermark robustness"][0]}
    a = wr["openai:model-a"]
    assert (a["PASS"], a["MUTATED"], a["DROPPED"], a["errors"]) == ("16", "1", "6", "1")
    assert a["PASS rate"] == "69.6%"          # 16 of 23 graded; the error is not a label
    assert a["flip rate"] == "12.5% (1/8)"
    assert wr["reference"]["PASS rate"] == "100.0%"
    hme = {row["model"]: row for row in md["Hidden-message extraction"][0]}
    b = hme["replay:outputs/model-b.jsonl"]
    assert (b["CORRECT"], b["PARTIAL"], b["INCORRECT"], b["FALSE_POSITIVE"]) == ("19", "3", "6", "2")
    assert b["FP rate on controls"] == "33.3%"   # 2 of 6 control results
    assert hme["openai:model-a"]["FP rate on controls"] == "50.0%"


def test_false_positive_rate_matches_sql(md, db) -> None:
    hme = {row["model"]: row for row in md["Hidden-message extraction"][0]}
    for model, fp, n in db.execute(
            "SELECT model, SUM(label = 'FALSE_POSITIVE'), COUNT(*) FROM results WHERE pack = ?"
            " AND group_value = 'no_message_control' AND label IS NOT NULL AND error IS NULL"
            " GROUP BY model", (HME,)):
        assert hme[model]["FP rate on controls"] == pct(fp, n)


@pytest.mark.parametrize("pack, heading, field, labels", [
    (WR, "Watermark robustness", "family", WATERMARK.labels),
    (HME, "Hidden-message extraction", "scheme", EXTRACTION.labels),
])
def test_group_breakdown_matches_sql(md, db, pack, heading, field, labels) -> None:
    table = md[heading][1]
    got = {(r["model"], r[field]): r for r in table}
    want: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for model, group, label, n in db.execute(
            "SELECT model, group_value, label, COUNT(*) FROM results WHERE pack = ?"
            " AND label IS NOT NULL AND error IS NULL GROUP BY model, group_value, label", (pack,)):
        want[(model, group)][label] = n
    assert set(got) == set(want)
    for key, counts in want.items():
        for lab in labels:
            assert got[key][lab] == str(counts.get(lab, 0)), (key, lab)


@pytest.mark.parametrize("pack, heading", [(WR, "Per-case results: Watermark robustness"),
                                           (HME, "Per-case results: Hidden-message extraction")])
def test_per_case_appendix_matches_sql(md, db, pack, heading) -> None:
    [rows] = md[heading]
    sql = {(c, m, str(r)): (lab, err) for c, m, r, lab, err in db.execute(
        "SELECT case_id, model, repetition, label, error FROM results WHERE pack = ?", (pack,))}
    assert len(rows) == len(sql)
    for row in rows:
        label, err = sql[(row["case_id"], row["model"], row["rep"])]
        assert row["label"] == (label if err is None else "n/a")
    if pack == HME:
        assert set(rows[0]) >= {"case_id", "scheme", "model", "score", "label", "expected", "got"}
    else:
        assert set(rows[0]) >= {"case_id", "task_family", "model", "score", "label", "reason"}
        errored = [r for r in rows if r["reason"].startswith("error: ")]
        assert len(errored) == 1 and errored[0]["label"] == "n/a"


def test_paired_comparison_matches_sql(md, db) -> None:
    table = md["Watermark robustness: model comparison and stability"][0]
    means: dict[str, dict[str, float]] = defaultdict(dict)
    for model, case, mean in db.execute(  # the one mean: a result without a grade counts 0
            "SELECT model, case_id, AVG(CASE WHEN label IS NOT NULL AND error IS NULL THEN score ELSE 0 END)"
            " FROM results WHERE pack = ? GROUP BY model, case_id", (WR,)):
        means[model][case] = mean
    assert len(table) == 3  # three models, three pairs
    for row in table:
        a, b = means[row["model A"]], means[row["model B"]]
        common = sorted(set(a) & set(b))
        wins = sum(a[c] > b[c] for c in common)
        losses = sum(a[c] < b[c] for c in common)
        assert row["common cases"] == str(len(common))
        assert row["A better / B better / tie"] == f"{wins}/{losses}/{len(common) - wins - losses}"
        assert row["A − B"] == f"{np.mean([a[c] - b[c] for c in common]):.3f}"


def test_stability_lists_exactly_the_flipped_cases(md, db) -> None:
    table = md["Watermark robustness: model comparison and stability"][1]
    flipped = {(c, m) for m, c in db.execute(
        "SELECT model, case_id FROM results WHERE pack = ? AND label IS NOT NULL AND error IS NULL"
        " GROUP BY model, case_id HAVING COUNT(DISTINCT score) > 1", (WR,))}
    assert {(r["case_id"], r["model"]) for r in table} == flipped
    assert flipped == {("wr_summarize_2", "openai:model-a"),
                       ("wr_rewrite_2", "replay:outputs/model-b.jsonl")}


def test_latency_and_tokens_match_sql(md, db) -> None:
    latency = {r["model"]: r for r in md["Latency"][0]}
    for model, n, mean in db.execute(
            "SELECT model, COUNT(latency_ms), AVG(latency_ms) FROM results GROUP BY model"):
        assert latency[model]["timed results"] == str(n)
        if n:
            assert latency[model]["mean ms"] == f"{mean:.1f}"
            vals = [v for (v,) in db.execute(
                "SELECT latency_ms FROM results WHERE model = ? AND latency_ms IS NOT NULL", (model,))]
            assert latency[model]["p90 ms"] == f"{np.percentile(vals, 90):.1f}"
        else:
            assert latency[model]["p50 ms"] == latency[model]["p99 ms"] == "n/a"
    tokens = {(r["model"], r["pack"]): r for r in md["Token usage"][0]}
    # per generation: the results of one model call (its attacks) count it once
    for model, pack, n, tin, tout, total in db.execute(
            "SELECT model, pack, COUNT(*), AVG(tokens_in), AVG(tokens_out), SUM(tokens_in) + SUM(tokens_out)"
            " FROM (SELECT * FROM results GROUP BY gen_key) GROUP BY model, pack"):
        row = tokens[(model, pack)]
        assert row["generations"] == str(n)
        if total is None:
            assert (row["mean tokens_in"], row["total tokens"]) == ("n/a", "n/a")
        else:
            assert row["mean tokens_in"] == f"{tin:.1f}"
            assert row["mean tokens_out"] == f"{tout:.1f}"
            assert row["total tokens"] == str(total)


def test_generic_pack_summary(md, db) -> None:
    [table] = md["toy_pack"]
    by_model = {r["model"]: r for r in table}
    for model, label, n in db.execute(
            "SELECT model, label, COUNT(*) FROM results WHERE pack = 'toy_pack'"
            " GROUP BY model, label"):
        assert by_model[model][label] == str(n)
    assert by_model["reference"]["min"] == "0.200" and by_model["reference"]["max"] == "1.000"


def test_provenance_block(md, three_model_store) -> None:
    runs = {r["run_id"]: r for r in md["Provenance"][0]}
    assert set(runs) == {"run-wr", "run-hme"}
    assert runs["run-hme"]["git_sha"].endswith("(dirty)")
    assert not runs["run-wr"]["git_sha"].endswith("(dirty)")
    assert runs["run-wr"]["evalrun"] == "0.1.0"
    models = md["Provenance"][1]
    assert {r["model"] for r in models} == set(three_model_store.models)
    assert all(r["repetitions"] == "3" for r in models)


def test_failure_examples(three_model_report: Path) -> None:
    text = (three_model_report / "report.md").read_text(encoding="utf-8")
    section = text.split("### Failures: Watermark robustness")[1].split("### Failures:")[0]
    titles = [line for line in section.splitlines() if line.startswith("**")]
    assert 1 <= len(titles) <= 3
    assert any("MUTATED" in t for t in titles) and any("DROPPED" in t for t in titles)
    assert "Why it failed" in section and "Expected" in section and "Model output" in section


def test_html_escapes_model_output_and_case_text(three_model_report: Path, payload: str) -> None:
    page = (three_model_report / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert "onerror=\"" not in page
    assert payload not in page
    escaped = html.escape(payload, quote=True)
    assert page.count(escaped) >= 2  # the HME output (appendix) and the WR instruction (failures)
    assert 'http-equiv="Content-Security-Policy"' in page
    assert page.count('src="data:image/png;base64,') == 4
    assert "http://" not in page and "https://" not in page
    md_text = (three_model_report / "report.md").read_text(encoding="utf-8")
    assert "<script" not in md_text.lower() and "<img" not in md_text


def test_run_selection(three_model_store, tmp_path: Path, md_tables) -> None:
    md_path = build_report(three_model_store.db, tmp_path, run_id="run-wr")
    text = md_path.read_text(encoding="utf-8")
    tables_ = md_tables(text)
    assert "Watermark robustness" in tables_
    assert "Hidden-message extraction" not in tables_ and "toy_pack" not in tables_
    assert [r["run_id"] for r in tables_["Provenance"][0]] == ["run-wr"]
    assert (tmp_path / "watermark_stacked_bar.png").exists()
    assert not (tmp_path / "extraction_by_scheme.png").exists()


def test_tables_are_deterministic(three_model_store) -> None:
    data = load(three_model_store.db, None)
    items = data.packs[HME]
    first = tables.label_summary(EXTRACTION, items).rows
    assert tables.label_summary(EXTRACTION, items).rows == first
    assert tables.paired_comparisons(EXTRACTION, items).rows == \
        tables.paired_comparisons(EXTRACTION, items).rows


def test_errors(tmp_path: Path, three_model_store) -> None:
    with pytest.raises(EvalrunError, match="no such database"):
        build_report(tmp_path / "missing.sqlite", tmp_path / "out")
    with pytest.raises(EvalrunError, match=r"known runs: run-wr, run-hme"):
        build_report(three_model_store.db, tmp_path / "out", run_id="nope")
    empty = tmp_path / "empty.sqlite"
    Store(empty).close()
    with pytest.raises(EvalrunError, match="holds no results"):
        build_report(empty, tmp_path / "out")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(EvalrunError, match="junk.sqlite"):
        build_report(junk, tmp_path / "out")
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(EvalrunError, match="not a directory"):
        build_report(three_model_store.db, afile)


def test_watermark_and_attack_axes_are_separate_rows(tmp_path: Path, store_writer) -> None:
    """A store with several watermark/attack settings reports each (model, watermark, attack)
    on its own row; stored but not yet graded outputs are counted apart."""
    db_path = tmp_path / "axes.sqlite"
    store_writer(db_path, ["openai:model-a", "reference"], n=1,
                 variants=(("none", "none"), ("kgw:delta=2", "swap:p=0.1")), ungraded=2)
    data = load(db_path, None)
    items = data.packs[WR]
    summary = tables.label_summary(WATERMARK, items)
    names = [row[0] for row in summary.rows]
    assert names == ["openai:model-a [wm=kgw δ=2, attack=swap:p=0.1]",
                     "openai:model-a [wm=none, attack=none]",
                     "reference [wm=kgw δ=2, attack=swap:p=0.1]",
                     "reference [wm=none, attack=none]"]
    col = summary.headers.index("ungraded")
    assert sum(int(row[col]) for row in summary.rows) == 2
    results = summary.headers.index("results")
    assert all(row[results] == "8" for row in summary.rows)
    con = sqlite3.connect(db_path)
    (pass_kgw,) = con.execute(
        "SELECT COUNT(*) FROM results WHERE pack = ? AND model = 'openai:model-a' AND"
        " watermark = 'kgw:delta=2' AND label = 'PASS'", (WR,)).fetchone()
    con.close()
    assert summary.rows[0][summary.headers.index("PASS")] == str(pass_kgw)
