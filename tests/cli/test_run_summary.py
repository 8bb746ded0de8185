"""How a run ends: evalrun's own closing summary (last), invalid case files and golden examples
counted apart, bad --fail-under refused, interrupted runs marked, one default store."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalrun.testing.chat_server import ChatServer

HALF = '''
from evalrun.pack.grade import Grade

def grade(case, output):
    if case["kind"] == "a":
        return Grade(1.0, "OK", "kind a passes")
    return Grade(0.0, "BAD", "kind b is below the pass score")
'''


def evalrun(*args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, **kw)


@pytest.fixture
def mixed_pack(tmp_path: Path, make_pack) -> Path:
    """Four valid cases (two below the pass score), one invalid case file, two golden examples."""
    pack = make_pack(root=tmp_path / "packs", grader=HALF, golden=[
        {"case_id": "c1", "output": "anything", "label": "OK", "score": 1.0},
        {"case_id": "c2", "output": "anything", "label": "BAD", "score": 0.0}])
    (pack / "cases" / "broken.json").write_text(json.dumps({"id": "c9", "word": 3, "kind": "a"}))
    return pack


def test_the_last_lines_are_evalruns_summary_not_pytests(tmp_path: Path, mixed_pack: Path) -> None:
    proc = evalrun("run", "--pack", str(mixed_pack), "--model", "reference", "--out", str(tmp_path / "r.sqlite"),
                   "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.rstrip().splitlines()
    assert lines[-1] == ("evalrun: 4 results graded (4 cases): BAD=2 OK=2; items below the pass score: 2"
                         " (see the report); errors: none")
    assert lines[-2] == "evalrun: golden examples: 1 of 1 pack(s) agree with their grader"
    assert lines[-4] == "evalrun: 1 case file(s) failed their schema and were not run:"
    assert "broken.json" in lines[-3] and "$.word: 3 is not of type 'string'" in lines[-3]
    assert not any(" failed" in line and " passed" in line for line in lines)  # no "3 failed, 3 passed"
    # who asks gets pytest's own lines
    proc = evalrun("run", "--pack", str(mixed_pack), "--model", "reference", "--out", str(tmp_path / "r.sqlite"),
                   "--no-progress", "--", "-rf", cwd=tmp_path)
    assert "FAILED" in proc.stdout and "c2[reference-none-none-r0]" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("evalrun: 4 results graded")


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_fail_under_outside_zero_one_is_refused(tmp_path: Path, mixed_pack: Path, value: str) -> None:
    proc = evalrun("run", "--pack", str(mixed_pack), "--model", "reference", "--out", str(tmp_path / "r.sqlite"),
                   "--fail-under", value, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"evalrun: error: --fail-under {float(value)}: must be a score in [0, 1]"
    assert not (tmp_path / "r.sqlite").exists()


@pytest.mark.parametrize("sent,code,reason", [(signal.SIGINT, 130, "stopped (Ctrl-C or a signal): "),
                                              (signal.SIGTERM, 143, "stopped (by SIGTERM): ")])
def test_a_run_stopped_with_ctrl_c_or_sigterm_is_marked_interrupted(tmp_path: Path, make_pack, sent: int, code: int,
                                                                    reason: str) -> None:
    cases = [{"id": f"c{i:02d}", "word": f"w{i}", "kind": "a"} for i in range(30)]
    pack = make_pack(cases=cases, reference=None)
    db = tmp_path / "r.sqlite"
    env = {**os.environ, "OPENAI_API_KEY": "local-test-key"}
    with ChatServer(latency_s=0.3) as server:
        proc = subprocess.Popen([sys.executable, "-m", "evalrun.cli", "run", "--pack", str(pack), "--model",
                                 "openai:m", "--base-url", server.base_url, "--concurrency", "1", "--out", str(db),
                                 "--no-progress"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if db.exists() and sqlite3.connect(db).execute(
                    "SELECT COUNT(*) FROM sqlite_master WHERE name = 'results'").fetchone()[0]:
                if sqlite3.connect(db).execute("SELECT COUNT(*) FROM results").fetchone()[0] >= 3:
                    break
            time.sleep(0.05)
        proc.send_signal(sent)
        _, err = proc.communicate(timeout=120)
    status, finished, stored = sqlite3.connect(db).execute("SELECT status, finished_at, reason FROM runs").fetchone()
    # SIGTERM was: the run left `running` with no reason
    assert status == "interrupted" and finished is not None and stored.startswith(reason), stored
    # the exit status says so too (128 + the signal), with the reason on stderr
    assert proc.returncode == code and f"interrupted: {stored}" in err, (proc.returncode, err[-2000:])
    proc = evalrun("report", "--db", str(db), "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"| interrupted: {reason}" in (tmp_path / "rep" / "report.md").read_text()


def test_evalrun_run_and_plain_pytest_share_the_default_store(tmp_path: Path, make_pack) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-p no:randomly'\n")
    pack = make_pack(root=project / "packs")
    assert evalrun("run", "--pack", str(pack), "--model", "reference", cwd=project).returncode == 0
    proc = subprocess.run([sys.executable, "-m", "pytest", "packs", "-q", "--evalrun-n", "2"], cwd=project,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert sorted(p.name for p in project.glob("*.sqlite")) == ["results.sqlite"]
    conn = sqlite3.connect(project / "results.sqlite")
    assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT run_id) FROM results").fetchone() == (8, 2)
    conn.close()


def test_the_summary_hints_at_a_report_only_when_none_is_written(tmp_path: Path) -> None:
    plain = evalrun("run", "--pack", "watermark_robustness", "--model", "reference", "--out", "a.sqlite",
                    "--no-progress", cwd=tmp_path)
    assert plain.returncode == 0 and "report: evalrun report --db" in plain.stdout
    written = evalrun("run", "--pack", "watermark_robustness", "--model", "reference", "--out", "b.sqlite",
                      "--report", "rep", "--no-progress", cwd=tmp_path)
    assert written.returncode == 0 and "report: evalrun report --db" not in written.stdout
    assert written.stdout.strip().splitlines()[-1].startswith("evalrun: report: rep/report.md")
