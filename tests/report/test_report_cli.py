"""End to end through the CLI: `evalrun run` both seed-003 packs with the reference solver and
two imperfect replay models, then `evalrun report` and `evalrun export`; the report's numbers
must match a direct SQL count over the store the run wrote."""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

PACKS = ("watermark_robustness", "hidden_message_extraction")
SCRIPT = "<script>document.title='PWNED'</script>"


def evalrun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from evalrun.cli.main import main; sys.exit(main())", *args],
        cwd=cwd, capture_output=True, text=True, timeout=240)


def load_cases(pack: str) -> list[dict]:
    folder = resources.files("evalrun.packs").joinpath(pack, "cases")
    cases = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            cases.append(json.loads(entry.read_text(encoding="utf-8")))
        elif entry.name.endswith(".jsonl"):
            cases += [json.loads(line) for line in entry.read_text(encoding="utf-8").splitlines()
                      if line.strip()]
    return cases


def write_replays(work: Path) -> None:
    """b drops every third marker and answers some extractions with a script tag; c doubles
    some markers, answers NONE to every extraction, and has no output for one case."""
    b, c = [], []
    for pack in PACKS:
        for i, case in enumerate(load_cases(pack)):
            if pack == "watermark_robustness":
                out_b = case["passage"] if i % 3 else "I rewrote it and lost the marker."
                out_c = case["passage"] + " " + case["watermark"] if i % 5 == 0 else case["passage"]
            else:
                out_b = case["expected"] if i % 4 else SCRIPT
                out_c = "NONE"
            b.append({"pack": pack, "case_id": case["id"], "output": out_b})
            if not (pack == "hidden_message_extraction" and i == 0):
                c.append({"pack": pack, "case_id": case["id"], "output": out_c})
    for name, lines in (("b.jsonl", b), ("c.jsonl", c)):
        (work / name).write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("cli")
    write_replays(work)
    proc = evalrun("run", "--pack", PACKS[0], "--pack", PACKS[1], "--model", "reference",
                   "--model", "replay:b.jsonl", "--model", "replay:c.jsonl", "--out", "db.sqlite",
                   "--no-progress", cwd=work)
    assert (work / "db.sqlite").is_file(), proc.stdout[-2000:] + proc.stderr[-2000:]
    proc = evalrun("report", "--db", "db.sqlite", "--out", "report", cwd=work)
    assert proc.returncode == 0, proc.stderr
    return work


def test_cli_report_matches_the_store(cli_run: Path, md_tables) -> None:
    md = md_tables((cli_run / "report" / "report.md").read_text(encoding="utf-8"))
    con = sqlite3.connect(cli_run / "db.sqlite")
    for pack, heading, labels in (
            ("watermark_robustness", "Watermark robustness", ("PASS", "MUTATED", "DROPPED")),
            ("hidden_message_extraction", "Hidden-message extraction",
             ("CORRECT", "PARTIAL", "INCORRECT", "FALSE_POSITIVE"))):
        summary = {r["model"]: r for r in md[heading][0]}
        assert set(summary) == {"reference", "replay:b.jsonl", "replay:c.jsonl"}
        for model, row in summary.items():
            for lab in labels:
                (n,) = con.execute("SELECT COUNT(*) FROM results WHERE pack = ? AND model = ?"
                                   " AND label = ? AND error IS NULL", (pack, model, lab)).fetchone()
                assert row[lab] == str(n), (pack, model, lab)
            (errors,) = con.execute("SELECT COUNT(*) FROM results WHERE pack = ? AND model = ?"
                                    " AND error IS NOT NULL", (pack, model)).fetchone()
            assert row["errors"] == str(errors)
        ref = summary["reference"]
        assert ref[labels[0]] == ref["results"] and ref["errors"] == "0"
    hme = {r["model"]: r for r in md["Hidden-message extraction"][0]}
    assert hme["replay:c.jsonl"]["errors"] == "1"              # the missing replay line
    assert hme["replay:c.jsonl"]["FP rate on controls"] == "0.0%"
    assert int(hme["replay:b.jsonl"]["INCORRECT"]) + int(hme["replay:b.jsonl"]["FALSE_POSITIVE"]) > 0
    wr = {r["model"]: r for r in md["Watermark robustness"][0]}
    assert int(wr["replay:b.jsonl"]["DROPPED"]) > 0 and int(wr["replay:c.jsonl"]["MUTATED"]) > 0
    for name in ("watermark_stacked_bar.png", "watermark_by_task.png", "extraction_by_scheme.png",
                 "extraction_false_positives.png", "report.html"):
        assert (cli_run / "report" / name).is_file()
    page = (cli_run / "report" / "report.html").read_text(encoding="utf-8")
    assert SCRIPT not in page and "&lt;script&gt;document.title=" in page
    con.close()


def test_cli_export_and_errors(cli_run: Path) -> None:
    proc = evalrun("export", "--db", "db.sqlite", "--format", "csv", "--out", "results.csv",
                   cwd=cli_run)
    assert proc.returncode == 0, proc.stderr
    with (cli_run / "results.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    con = sqlite3.connect(cli_run / "db.sqlite")
    (total,) = con.execute("SELECT COUNT(*) FROM results").fetchone()
    (run_id,) = con.execute("SELECT run_id FROM runs").fetchone()
    con.close()
    assert len(rows) == total and f"exported {total} results" in proc.stdout
    assert {r["group_field"] for r in rows} == {"family", "scheme"}
    bad = evalrun("export", "--db", "db.sqlite", "--format", "parquet", "--out", "x", cwd=cli_run)
    assert bad.returncode == 2 and "--format" in bad.stderr
    unknown = evalrun("report", "--db", "db.sqlite", "--out", "r2", "--run", "nope", cwd=cli_run)
    assert unknown.returncode == 2 and run_id in unknown.stderr


def test_export_leaves_the_runs_metrics_file_as_it_was(cli_run: Path) -> None:
    """The run wrote db.metrics.json beside db.sqlite; an export beside it writes its own
    records beside its own file (db.csv.metrics.json), and one whose records would land on the
    run's file is refused in one line."""
    runs = cli_run / "db.metrics.json"
    before = (runs.read_bytes(), runs.stat().st_ino, runs.stat().st_mtime_ns)
    proc = evalrun("export", "--db", "db.sqlite", "--format", "csv", "--out", "db.csv", cwd=cli_run)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("(aggregates: db.csv.metrics.json)")
    assert json.loads((cli_run / "db.csv.metrics.json").read_text(encoding="utf-8"))
    assert (runs.read_bytes(), runs.stat().st_ino, runs.stat().st_mtime_ns) == before
    clash = evalrun("export", "--db", "db.sqlite", "--format", "jsonl", "--out", "db", cwd=cli_run)
    assert clash.returncode == 2 and len(clash.stderr.strip().splitlines()) == 1, clash.stderr
    assert "db.metrics.json" in clash.stderr and "db.jsonl" in clash.stderr and not (cli_run / "db").exists()
    assert (runs.read_bytes(), runs.stat().st_ino, runs.stat().st_mtime_ns) == before
