"""A grader that raises or returns an invalid Grade gives a stored GRADER_ERROR result that
the summary, the report, regrade, validate and pytest all show -- never silence."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

# c1 crashes, c2 returns a score outside [0, 1], c3 an empty label, c4 grades normally
FAULTY = '''
import os

from evalrun.pack.grade import Grade

def grade(case, output, context):
    if case["id"] == "c1":  # a careless grader that puts the watermark key in its message
        raise KeyError("missing field 'answer' near " + os.environ.get("EVALRUN_WATERMARK_KEY", "?"))
    if case["id"] == "c2":
        return Grade(1.5, "OK", "too good")
    if case["id"] == "c3":
        return Grade(1.0, "", "no label")
    return Grade(1.0, "OK", "fine")
'''
SECRET = "graderkey-5150"


def evalrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONHASHSEED": "0"})


def rows(db: Path) -> dict[str, tuple]:
    conn = sqlite3.connect(db)
    try:
        return {r[0]: r[1:] for r in conn.execute("SELECT case_id, score, label, error FROM results")}
    finally:
        conn.close()


@pytest.fixture
def faulty_run(tmp_path: Path, make_pack) -> tuple[Path, Path, subprocess.CompletedProcess]:
    pack = make_pack(root=tmp_path / "packs", grader=FAULTY)
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", str(pack), "--model", "reference", "--out", str(db), "--key", SECRET,
                   cwd=tmp_path)
    return pack, db, proc


def test_grader_failures_are_stored_counted_and_reported(faulty_run, tmp_path: Path) -> None:
    pack, db, proc = faulty_run
    assert proc.returncode == 0, proc.stderr
    stored = rows(db)
    assert stored["c4"] == (1.0, "OK", None)  # the other items still ran
    for cid, exc in (("c1", "KeyError"), ("c2", "ValueError"), ("c3", "ValueError")):
        score, label, error = stored[cid]
        assert score is None and label == "GRADER_ERROR"
        assert error.startswith(f"grader raised {exc}: ") and error.endswith(f"(case {cid})")
    assert "score must be a number in [0, 1]" in stored["c2"][2]
    assert "label must be a non-empty string" in stored["c3"][2]
    # the key reaches neither the stored error nor the terminal
    assert SECRET not in stored["c1"][2] and "***" in stored["c1"][2]
    assert SECRET not in proc.stdout + proc.stderr
    # summary: counted as errors, and said so in the closing line, which comes last
    table = [line for line in proc.stdout.splitlines() if line.startswith("echo ")]
    assert table and table[0].split()[-1] == "3"
    assert proc.stdout.rstrip().splitlines()[-1].startswith("evalrun: 1 results graded (1 cases): OK=1;")
    assert "errors: 0 generation, 3 grader/attack" in proc.stdout.rstrip().splitlines()[-1]
    # report: listed in the failure section with the message
    out = tmp_path / "rep"
    assert evalrun("report", "--db", str(db), "--out", str(out), cwd=tmp_path).returncode == 0
    md = (out / "report.md").read_text()
    failures = md[md.index("## Failure analysis"):md.index("## Provenance")]
    assert "GRADER_ERROR" in failures and "grader raised KeyError" in failures
    assert "3 grader errors" in md


def test_pytest_items_fail_with_the_graders_message(tmp_path: Path, make_pack) -> None:
    pack = make_pack(root=tmp_path / "packs", grader=FAULTY)
    proc = subprocess.run([sys.executable, "-m", "pytest", str(pack), "-q", "-p", "no:randomly",
                           "--evalrun-db", str(tmp_path / "p.sqlite"), "-rf"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "EVALRUN_WATERMARK_KEY": SECRET})
    assert "3 failed, 1 passed" in proc.stdout
    assert "grader raised KeyError: \"missing field 'answer' near ***\" (case c1)" in proc.stdout
    assert SECRET not in proc.stdout + proc.stderr


def test_regrade_clears_a_grader_error_once_the_grader_is_fixed(faulty_run, tmp_path: Path) -> None:
    pack, db, _ = faulty_run
    (pack / "grader.py").write_text("from evalrun.pack.grade import Grade\n\ndef grade(case, output):\n"
                                    "    return Grade(1.0, 'OK', 'fixed')\n")
    proc = evalrun("regrade", "--db", str(db), "--packs-dir", str(pack.parent), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "regraded 4 results, 3 changed, 0 grader errors" in proc.stdout
    assert set(rows(db).values()) == {(1.0, "OK", None)}


def test_a_rerun_reuses_outputs_whose_grader_failed(faulty_run, tmp_path: Path) -> None:
    pack, db, _ = faulty_run
    before = sqlite3.connect(db).execute("SELECT result_id, created_at FROM results ORDER BY 1").fetchall()
    proc = evalrun("run", "--pack", str(pack), "--model", "reference", "--out", str(db), "--key", SECRET,
                   cwd=tmp_path)
    assert proc.returncode == 0
    after = sqlite3.connect(db).execute("SELECT result_id, created_at FROM results ORDER BY 1").fetchall()
    assert after == before  # no regeneration: a grader error is not a failed model call


def test_validate_says_fail_and_not_reference_ok(tmp_path: Path, make_pack) -> None:
    pack = make_pack(root=tmp_path / "packs", grader=FAULTY)
    proc = evalrun("validate", str(pack), cwd=tmp_path)
    assert proc.returncode == 1
    first = proc.stdout.splitlines()[0]
    assert first.startswith("echo: FAIL") and "reference ok" not in first
    assert "reference FAILED on 3 case(s)" in first
    assert json.dumps("c1")[1:-1] in proc.stdout
