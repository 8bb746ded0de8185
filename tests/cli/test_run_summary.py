"""How a run ends: evalrun's own closing summary (last), invalid case files and golden examples
counted apart, a detection run's zeros told apart from failures, one progress bar per stage and
no line of pytest's dots, bad --fail-under refused, interrupted runs marked, one default store."""

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

from evalrun.plugins.pytest_plugin import pass_score_text
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
    assert lines[-1] == ("evalrun: 4 results graded (4 cases): BAD=2 OK=2; items below the pass score: 2 of 4"
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


def test_no_line_of_dots_but_one_bar_per_stage(tmp_path: Path, mixed_pack: Path) -> None:
    """pytest's character per item made a 2,100-character line in the main job: `evalrun run`
    shows the generation bar counting texts and the grading bar counting results instead."""
    proc = evalrun("run", "--pack", str(mixed_pack), "--model", "reference", "--out", str(tmp_path / "r.sqlite"),
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not [line for line in proc.stdout.splitlines() if line and set(line) <= set(".FsEx")], proc.stdout
    bars = [line for line in proc.stderr.splitlines() if line.startswith("evalrun: ") and " [" in line]
    assert bars[-1].startswith("evalrun: grading [##############################] 4/4 results (")
    assert any(b.startswith("evalrun: generating [") and "] 4/4 texts (" in b for b in bars)
    assert "evalrun: 4 results generated, 0 cached, from 4 new texts (model calls), 0 failed" in proc.stdout
    quiet = evalrun("run", "--pack", str(mixed_pack), "--model", "reference", "--out", str(tmp_path / "r.sqlite"),
                    "--no-progress", cwd=tmp_path)
    assert quiet.returncode == 0 and "grading [" not in quiet.stderr
    assert not [line for line in quiet.stdout.splitlines() if line and set(line) <= set(".FsEx")], quiet.stdout


DETECTION_PACK = """name = "marks"
version = "1.0"
description = "test pack: detection"
labels = ["DETECTED", "NOT_DETECTED"]
grader = "detection"
pass_score = 0.0
detection_threshold = 0.02
system_prompt = "Continue."
prompt_template = "Write about {word}"
[defaults]
temperature = 1.0
max_tokens = 16
"""


def test_a_detection_runs_zeros_are_counted_as_correct_negatives(tmp_path: Path) -> None:
    """A detection pack has pass score 0, so no item can fall below it: the closing line says
    so instead of "items below the pass score: 0", and says which of the results that scored 0
    are right (an unwatermarked text not detected) and which are missed watermarks."""
    pack = tmp_path / "packs" / "marks"
    (pack / "cases").mkdir(parents=True)
    (pack / "pack.toml").write_text(DETECTION_PACK)
    (pack / "cases" / "c.jsonl").write_text("".join(json.dumps({"id": f"c{i}", "word": f"topic {i}"}) + "\n"
                                                    for i in range(4)))
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", str(pack), "--model", "embedded", "--watermark", "none", "--watermark",
                   "kgw:delta=4", "--key", "a-test-key-that-is-long-enough-2931", "--out", str(db), "--no-progress",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    conn = sqlite3.connect(db)
    counts = dict(conn.execute("SELECT watermark = 'none' AND label = 'NOT_DETECTED', COUNT(*) FROM results"
                               " WHERE score = 0 GROUP BY 1").fetchall())
    conn.close()
    negatives, missed = counts.get(1, 0), counts.get(0, 0)
    assert negatives  # the embedded model's unwatermarked texts are not detected under this key
    zeros = (f"scored 0: {negatives}, all correct negatives (unwatermarked, not detected)" if not missed else
             f"scored 0: {negatives + missed}, of them {negatives} correct negatives (unwatermarked, not detected)"
             f" and {missed} missed watermarks")
    last = proc.stdout.rstrip().splitlines()[-1]
    assert last.startswith("evalrun: 8 results graded (4 cases): ") and f"; {zeros}; " in last, last
    assert "; items below the pass score: none possible (marks has pass score 0); errors: none" in last, last
    # the summary names the watermark by its short name; the store keeps the full spec
    [row] = [line.split() for line in proc.stdout.splitlines() if line.startswith("marks ") and " δ=4 " in line]
    assert row[2:4] == ["kgw", "δ=4"], row
    assert "randomness=window" not in proc.stdout
    with sqlite3.connect(db) as conn:
        assert {w for (w,) in conn.execute("SELECT DISTINCT watermark FROM results")} == {
            "none", "kgw:context=1,delta=4.0,gamma=0.25,randomness=window,repeats=ignore,score=sum,skip=0.0"}


def test_items_below_the_pass_score_are_counted_among_the_results_that_have_one() -> None:
    outcomes = [("below_pass", "wmid", "n1", ""), ("case", "wmid", "n2", ""), ("case", "wmid", "n3", ""),
                ("no_pass_score", "mmw_news", "n4", ""), ("no_pass_score", "mmw_stories", "n5", ""),
                ("golden", "wmid", "n6", "")]
    assert pass_score_text(outcomes) == ("items below the pass score: 1 of the 3 results that have one (see the"
                                         " report; mmw_news, mmw_stories have pass score 0)")
    assert pass_score_text(outcomes[:3]) == "items below the pass score: 1 of 3 (see the report)"


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
