"""evalrun.report.export: the long-format per-result table as CSV and JSONL."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from evalrun._util.errors import EvalrunError
from evalrun.report.export import RUN_COLUMNS, export_results
from evalrun.store.database import Store


def result_columns(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [row[1] for row in con.execute("PRAGMA table_info(results)")]
    finally:
        con.close()


def test_csv_has_every_result_and_provenance(three_model_store, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "results.csv"
    n = export_results(three_model_store.db, "csv", out)
    con = sqlite3.connect(three_model_store.db)
    (total,) = con.execute("SELECT COUNT(*) FROM results").fetchone()
    assert n == total
    with out.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == total
    header = list(rows[0])
    stored = [c for c in result_columns(three_model_store.db) if c != "metadata_json"]  # as metadata.<key>
    assert header[:len(stored)] == stored
    assert set(RUN_COLUMNS) | {"group_field"} <= set(header)
    by_id = {int(r["result_id"]): r for r in rows}
    for rid, run_id, label, sha, dirty, started in con.execute(
            "SELECT r.result_id, r.run_id, r.label, u.git_sha, u.git_dirty, u.started_at"
            " FROM results r JOIN runs u ON u.run_id = r.run_id"):
        row = by_id[rid]
        assert (row["run_id"], row["git_sha"], row["git_dirty"], row["started_at"]) == \
            (run_id, sha, str(dirty), started)
        assert row["label"] == (label or "")
    wr = next(r for r in rows if r["pack"] == "watermark_robustness")
    assert wr["group_field"] == "family" and wr["group_value"] in {
        "rewrite", "summarize", "format_convert", "style_transfer"}
    toy = next(r for r in rows if r["pack"] == "toy_pack")
    assert toy["group_field"] == ""
    con.close()


def test_jsonl_round_trips_nulls_and_text(three_model_store, tmp_path: Path, payload: str) -> None:
    out = tmp_path / "results.jsonl"
    n = export_results(three_model_store.db, "jsonl", out, run_id="run-hme")
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(records) == n
    con = sqlite3.connect(three_model_store.db)
    (want,) = con.execute("SELECT COUNT(*) FROM run_items WHERE run_id = 'run-hme'").fetchone()
    con.close()
    assert n == want
    assert {r["run_id"] for r in records} == {"run-hme"}
    assert {r["pack"] for r in records} == {"hidden_message_extraction", "toy_pack"}
    replay = [r for r in records if r["model"].startswith("replay:")]
    assert all(r["latency_ms"] is None and r["tokens_in"] is None for r in replay)
    assert any(r["raw_output"] == payload for r in records)  # exported verbatim, not escaped
    assert all(r["git_dirty"] == 1 and r["evalrun_version"] == "0.1.0" for r in records)
    assert json.loads(records[0]["case_json"])["id"] == records[0]["case_id"]


def test_export_errors(three_model_store, tmp_path: Path) -> None:
    with pytest.raises(EvalrunError, match="--format"):
        export_results(three_model_store.db, "xml", tmp_path / "x.xml")
    assert not (tmp_path / "x.xml").exists()
    with pytest.raises(EvalrunError, match="no such database"):
        export_results(tmp_path / "nope.sqlite", "csv", tmp_path / "x.csv")
    with pytest.raises(EvalrunError, match="known runs"):
        export_results(three_model_store.db, "csv", tmp_path / "x.csv", run_id="missing")
    empty = tmp_path / "empty.sqlite"
    Store(empty).close()
    with pytest.raises(EvalrunError, match="holds no results"):
        export_results(empty, "jsonl", tmp_path / "x.jsonl")
