"""The lean run protocol of case items (evalrun.plugins.item_protocol) against pytest's own:
the same reports, junit XML, stored grades and -x behaviour, and pytest's protocol wherever
another plugin, a marker or capture could make a difference."""

from __future__ import annotations

import re
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from evalrun.cli.run import LEAN_PYTEST

GRADER = '''
from evalrun.pack.grade import Grade

def grade(case, output):
    if case["id"] == "c6":
        raise ValueError("grader down for c6")
    if output == case["word"]:
        return Grade(1.0, "OK", "exact")
    return Grade(0.0, "BAD", f"expected {case['word']!r}, got {output!r}")
'''

REFERENCE = '''
def solve(case):
    if case["id"] == "c7":
        raise RuntimeError("solver down for c7")
    return "wrong" if case["id"] == "c5" else case["word"]
'''


@pytest.fixture
def project(pytester: pytest.Pytester, make_pack) -> pytest.Pytester:
    cases = [{"id": f"c{i}", "word": f"w{i}", "kind": "a" if i % 2 else "b"} for i in range(1, 8)]
    pack = make_pack(root=pytester.path / "packs", cases=cases, grader=GRADER, reference=REFERENCE,
                     golden=[{"case_id": "c1", "output": "w1", "label": "OK", "score": 1.0}])
    (pack / "cases" / "bad.json").write_text('{"id": "c9", "word": 3, "kind": "a"}')
    return pytester


def _run(pytester: pytest.Pytester, name: str, *extra: str) -> tuple[pytest.HookRecorder, Path]:
    db = pytester.path / f"{name}.sqlite"
    rec = pytester.inline_run("packs", *LEAN_PYTEST, "-qq", "--evalrun-db", str(db),
                              f"--junitxml={pytester.path / name}.xml", *extra)
    return rec, db


def _reports(rec: pytest.HookRecorder) -> list[tuple[Any, ...]]:
    return [(r.nodeid, r.when, r.outcome, None if r.longrepr is None else str(r.longrepr),
             list(r.user_properties), sorted(r.keywords), r.location, r.sections)
            for r in rec.getreports("pytest_runtest_logreport")]


def _case_setups(rec: pytest.HookRecorder) -> int:
    return sum(re.search(r"::c\d\[", call.item.nodeid) is not None for call in rec.getcalls("pytest_runtest_setup"))


def _junit(path: Path) -> list[tuple[Any, ...]]:
    root = ET.parse(path).getroot()
    return [(case.get("classname"), case.get("name"),
             [(child.tag, child.get("message"), child.text) for child in case])
            for case in root.iter("testcase")]


def _grades(db: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT case_id, score, label, reason, error IS NOT NULL FROM results"
                            " ORDER BY case_id").fetchall()
    finally:
        conn.close()


def test_lean_protocol_reports_exactly_what_pytests_protocol_reports(project: pytest.Pytester) -> None:
    lean, lean_db = _run(project, "lean")
    full, full_db = _run(project, "full", "--capture=sys")  # capture on: pytest's protocol
    assert _case_setups(lean) == 0, "evalrun run's options must give case items the lean protocol"
    assert _case_setups(full) == 7
    assert _reports(lean) == _reports(full)
    outcomes = {(r[0].split("::")[-1], r[1]): r[2] for r in _reports(lean)}
    assert outcomes[("c1[reference-none-none-r0]", "call")] == "passed"
    assert outcomes[("c5[reference-none-none-r0]", "call")] == "failed"  # below the pass score
    assert outcomes[("c6[reference-none-none-r0]", "call")] == "failed"  # grader error
    assert outcomes[("c7[reference-none-none-r0]", "call")] == "failed"  # generation error
    assert _junit(project.path / "lean.xml") == _junit(project.path / "full.xml")
    assert _grades(lean_db) == _grades(full_db)
    lean.assertoutcome(passed=4 + 1, failed=3 + 1)  # + golden; + the invalid case file


def test_exitfirst_stops_at_the_same_item(project: pytest.Pytester) -> None:
    lean, _ = _run(project, "lean", "-x")
    full, _ = _run(project, "full", "-x", "--capture=sys")
    assert _reports(lean) == _reports(full)
    assert _case_setups(lean) == 0


def test_a_plugin_hooking_a_phase_gets_pytests_protocol(project: pytest.Pytester) -> None:
    project.makeconftest("SEEN = []\n\ndef pytest_runtest_setup(item):\n    SEEN.append(item.nodeid)\n")
    rec, _ = _run(project, "hooked")
    assert _case_setups(rec) == 7
    rec.assertoutcome(passed=4 + 1, failed=3 + 1)


def test_a_marked_case_item_is_run_by_pytest(project: pytest.Pytester) -> None:
    project.makeconftest(
        "import pytest\n\n"
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n"
        "        if 'c2[' in item.nodeid:\n"
        "            item.add_marker(pytest.mark.skip(reason='skipped by a marker'))\n")
    rec, _ = _run(project, "marked")
    skipped = [r for r in rec.getreports("pytest_runtest_logreport") if r.skipped]
    assert [r.nodeid.split("::")[-1] for r in skipped] == ["c2[reference-none-none-r0]"]
    assert "skipped by a marker" in str(skipped[0].longrepr)
    assert _case_setups(rec) == 1  # the marked item only


def test_evalrun_run_with_xdist_workers_reports_and_stores_what_one_process_does(tmp_path: Path, make_pack) -> None:
    """``evalrun run --workers 2``: each xdist worker runs its case items by the lean protocol
    and sends the reports to the controller; junit XML and stores equal a one-process run."""
    import subprocess
    import sys

    cases = [{"id": f"c{i}", "word": f"w{i}", "kind": "a" if i % 2 else "b"} for i in range(1, 8)]
    make_pack(cases=cases, grader=GRADER, reference=REFERENCE)
    junit: dict[str, Any] = {}
    for name, extra in (("one", ()), ("xdist", ("--workers", "2"))):
        proc = subprocess.run([sys.executable, "-m", "evalrun.cli", "run", "--packs-dir", str(tmp_path / "packs"),
                               "--pack", "echo", "--model", "reference", "--out", str(tmp_path / f"{name}.sqlite"),
                               "--no-progress", *extra, "--", f"--junitxml={tmp_path / name}.xml"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]  # a completed run
        assert "5 results graded (5 cases): BAD=1 OK=4" in proc.stdout
        junit[name] = sorted(_junit(tmp_path / f"{name}.xml"))
    assert junit["one"] == junit["xdist"]
    assert len(junit["one"]) == 7
    assert _grades(tmp_path / "one.sqlite") == _grades(tmp_path / "xdist.sqlite")
