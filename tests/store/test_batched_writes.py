"""By default every stored result is its own transaction; with ``--commit-ms`` fast
generations and grades are committed in groups (evalrun.store.commit_batch), and still everything
finished survives an interrupt, and a slow generation is committed the moment it arrives, as
another process sees it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Sequence

import pytest

from evalrun.model.generation import Generation, GenerationRequest
from evalrun.model.providers import parse_model
from evalrun.pack.loading import load_pack
from evalrun.run.executors import Executor
from evalrun.run.options import RunOptions
from evalrun.run.plan import make_items
from evalrun.run.stages.generate import run_generation
from evalrun.store.database import Store


def _outputs(db: Path) -> dict[str, str]:
    """What another connection (another process) sees committed."""
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT case_id, raw_output FROM results WHERE raw_output IS NOT NULL"))
    finally:
        conn.close()


class Scripted(Executor):
    """Answers each request with ``latency_ms`` of model time; raises KeyboardInterrupt
    (Ctrl-C) after ``stop_after`` answers; records what was committed after each answer."""

    def __init__(self, db: Path, latency_ms: float, stop_after: int | None = None) -> None:
        self.db, self.latency_ms, self.stop_after = db, latency_ms, stop_after
        self.seen: list[int] = []

    def map(self, model, task, requests: Sequence[GenerationRequest], sink, make_provider) -> None:
        for n, request in enumerate(requests):
            if n == self.stop_after:
                raise KeyboardInterrupt
            sink(request, Generation(text=request.case["word"], latency_ms=self.latency_ms))
            self.seen.append(len(_outputs(self.db)))


def _items(make_pack, n: int) -> list:
    pack = load_pack(make_pack(cases=[{"id": f"c{i:02d}", "word": f"w{i}", "kind": "a"} for i in range(n)]))
    return list(make_items(pack, RunOptions(models=(parse_model("reference"),))))


def test_fast_generations_are_grouped_yet_all_stored_at_the_end(tmp_path: Path, make_pack) -> None:
    items = _items(make_pack, 30)
    db = tmp_path / "s.sqlite"
    store = Store(db)
    store.start_run("r", {}, {})
    executor = Scripted(db, latency_ms=0.01)
    summary = run_generation(items, store, "r", lambda spec: None, executor=executor, commit_ms=50.0)
    assert summary.generated == 30
    assert executor.seen[-1] == 0  # 0.3 ms of model time in all: nothing committed one by one
    assert len(_outputs(db)) == 30
    store.close()


@pytest.mark.parametrize("latency_ms,commit_ms", [(0.01, 0.0), (800.0, 0.0), (800.0, 50.0)])
def test_a_generation_is_committed_as_it_arrives(tmp_path: Path, make_pack, latency_ms: float,
                                                  commit_ms: float) -> None:
    """By default (each stored result its own transaction), and with grouping for a slow one."""
    items = _items(make_pack, 5)
    db = tmp_path / "s.sqlite"
    store = Store(db)
    store.start_run("r", {}, {})
    executor = Scripted(db, latency_ms=latency_ms)
    run_generation(items, store, "r", lambda spec: None, executor=executor, commit_ms=commit_ms)
    assert executor.seen == [1, 2, 3, 4, 5]
    store.close()


def test_an_interrupted_generation_phase_keeps_every_finished_generation(tmp_path: Path, make_pack) -> None:
    items = _items(make_pack, 20)
    db = tmp_path / "s.sqlite"
    store = Store(db)
    store.start_run("r", {}, {})
    with pytest.raises(KeyboardInterrupt):
        run_generation(items, store, "r", lambda spec: None, executor=Scripted(db, latency_ms=0.01, stop_after=12),
                       commit_ms=50.0)
    assert len(_outputs(db)) == 12
    # the next run asks only for the rest
    rest = Scripted(db, latency_ms=0.01)
    summary = run_generation(items, store, "r2", lambda spec: None, executor=rest)
    assert (summary.cached, summary.generated) == (12, 8)
    assert len(_outputs(db)) == 20
    store.close()


INTERRUPTING_GRADER = '''
import os
import signal

from evalrun.pack.grade import Grade

def grade(case, output):
    if case["id"] == "c3":
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while grading the third item
    return Grade(1.0, "OK", "fine")
'''
# (a grader that raises KeyboardInterrupt itself, with no signal, is an error of its item:
# tests/cli/test_reliability.py)


def test_grades_before_an_interrupt_are_stored(pytester: pytest.Pytester, make_pack) -> None:
    make_pack(root=pytester.path / "packs", grader=INTERRUPTING_GRADER)
    db = pytester.path / "r.sqlite"
    result = pytester.runpytest("packs", "-p", "no:randomly", "--evalrun-db", str(db), "--evalrun-commit-ms", "50",
                                no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    conn = sqlite3.connect(db)
    try:
        graded = conn.execute("SELECT case_id, label FROM results WHERE label IS NOT NULL ORDER BY case_id").fetchall()
        status = conn.execute("SELECT status FROM runs").fetchall()
    finally:
        conn.close()
    assert graded == [("c1", "OK"), ("c2", "OK")]
    assert status == [("interrupted",)]


def test_every_grade_is_stored_when_the_run_ends(pytester: pytest.Pytester, make_pack) -> None:
    make_pack(root=pytester.path / "packs")
    db = pytester.path / "r.sqlite"
    pytester.runpytest("packs", "--evalrun-db", str(db), "--evalrun-n", "3",
                       "--evalrun-commit-ms", "50").assert_outcomes(passed=12)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT COUNT(*), COUNT(label), COUNT(graded_at) FROM results").fetchone() == (12, 12, 12)
    finally:
        conn.close()


def test_an_interrupted_regrade_keeps_the_grades_it_finished(pytester: pytest.Pytester, make_pack) -> None:
    from evalrun.run.regrade import regrade

    pack = make_pack(root=pytester.path / "packs")
    db = pytester.path / "r.sqlite"
    pytester.runpytest("packs", "--evalrun-db", str(db)).assert_outcomes(passed=4)
    (pack / "grader.py").write_text(INTERRUPTING_GRADER)
    with pytest.raises(KeyboardInterrupt):
        regrade(db, packs_dirs=[str(pack.parent)])
    conn = sqlite3.connect(db)
    try:
        labels = dict(conn.execute("SELECT case_id, reason FROM results"))
    finally:
        conn.close()
    assert labels == {"c1": "fine", "c2": "fine", "c3": "exact", "c4": "exact"}  # c1, c2 regraded, then Ctrl-C
