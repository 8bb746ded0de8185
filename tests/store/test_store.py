"""The SQLite store: public schema, cache lookups, overwrite of errored rows, versioning."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from evalrun._util.errors import EvalrunError
from evalrun.store.database import GENERATION_COLUMNS, SCHEMA_VERSION, GradeRecord, Store

PUBLIC_RESULTS = ("result_id run_id pack case_id model params_json watermark attack repetition prompt_json "
                  "raw_output output_tokens_json score label reason grader_hash latency_ms tokens_in "
                  "tokens_out error created_at").split()
PUBLIC_RUNS = ("run_id started_at finished_at git_sha git_dirty evalrun_version python platform argv "
               "packages_json seed").split()


def _row(key: str, *, output: str | None = "out", error: str | None = None) -> dict:
    row = {c: None for c in GENERATION_COLUMNS}
    row.update(run_id="r1", pack="p", case_id=key, model="m", params_json="{}", watermark="none",
               attack="none", repetition=0, prompt_json="{}", raw_output=output, error=error,
               created_at="2026-01-01", item_key=key, gen_key="g" + key, case_json="{}")
    return row


def test_public_schema_wal_and_version(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    cols = {r[1] for r in store.conn.execute("PRAGMA table_info(results)")}
    assert set(PUBLIC_RESULTS) <= cols
    assert set(PUBLIC_RUNS) <= {r[1] for r in store.conn.execute("PRAGMA table_info(runs)")}
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    store.close()


def test_cache_lookup_only_returns_finished_rows_and_errored_rows_are_overwritten(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    store.start_run("r1", {"argv": ["evalrun"]}, {"seed": 3})
    store.start_run("r1", {"argv": ["again"]}, {"seed": 4})  # a second worker: no-op
    assert [r["seed"] for r in store.runs()] == [3]
    [ok] = store.store_generation([_row("a")], "r1")
    [bad] = store.store_generation([_row("b", output=None, error="HTTP 500")], "r1")
    assert store.finished_keys(["a", "b", "c"]) == {"a": ok}
    store.record_grade(GradeRecord(ok, 1.0, "PASS", "fine", "h1", None))
    [again] = store.store_generation([_row("b", output="now fine")], "r1")
    assert again == bad  # same row, not a duplicate
    assert store.finished_keys(["a", "b"]) == {"a": ok, "b": bad}
    assert store.result_by_key("a")["label"] == "PASS"
    assert store.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 2
    store.start_run("r2", {}, {})
    store.link("r2", [ok])
    assert [r["case_id"] for r in store.results(run_id="r2")] == ["a"]
    assert len(store.results()) == 2
    store.close()


def test_readonly_and_foreign_databases_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(EvalrunError, match="no such database"):
        Store(tmp_path / "missing.sqlite", readonly=True)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("PRAGMA user_version = 99").connection.close()
    with pytest.raises(EvalrunError, match="schema version 99"):
        Store(other)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(EvalrunError, match="not an SQLite file"):
        Store(junk)


def test_watermarks_of_follows_writes_of_this_and_other_connections(tmp_path: Path) -> None:
    """The answer is cached (one query per pack and model, not per graded item), yet a
    watermark written since, here or by another process's connection, is seen."""
    store = Store(tmp_path / "db.sqlite")
    store.start_run("r1", {}, {})
    store.store_generation([{**_row("a"), "watermark": "kgw"}, {**_row("b"), "watermark": "none"}], "r1")
    assert store.watermarks_of("p", "m") == ("kgw",)
    assert store.watermarks_of("p", "other") == ()
    store.store_generation([{**_row("c"), "watermark": "exp"}], "r1")
    assert store.watermarks_of("p", "m") == ("exp", "kgw")
    other = Store(tmp_path / "db.sqlite")
    other.store_generation([{**_row("d"), "watermark": "unigram"}], "r1")
    other.close()
    assert store.watermarks_of("p", "m") == ("exp", "kgw", "unigram")
    store.close()


def _judgement(key: str) -> dict:
    return {"judgement_key": key, "judge": "j", "method": "rating", "subjects_json": "[]", "prompt_json": "{}",
            "raw_answer": "80", "created_at": "2026-01-01"}


def test_judgements_for_follows_writes_of_this_and_other_connections(tmp_path: Path) -> None:
    """A store without judge answers answers from a cache (no query per graded item), yet an
    answer stored since, here or by another process's connection, is seen."""
    store = Store(tmp_path / "db.sqlite")
    store.start_run("r1", {}, {})
    store.store_generation([_row("a"), _row("b")], "r1")
    assert store.judgements_for("a") == []
    other = Store(tmp_path / "db.sqlite")
    other.store_judgement(_judgement("j1"), ["a"])
    other.close()
    assert [(j["judgement_key"], j["position"]) for j in store.judgements_for("a")] == [("j1", 0)]
    assert store.judgements_for("b") == []
    store.store_judgement(_judgement("j2"), ["x", "b"])
    assert [(j["judgement_key"], j["position"]) for j in store.judgements_for("b")] == [("j2", 1)]
    store.close()


def _in_database_file(path: Path) -> int:
    """Results in the database file itself, the write-ahead log ignored (what a checkpoint
    has copied)."""
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'results'").fetchone() is None:
            return 0
        return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("background", [True, False])
def test_background_checkpoints_copy_commits_into_the_database_file(tmp_path: Path, background: bool) -> None:
    path = tmp_path / f"checkpoints-{background}.sqlite"  # names its thread: unique in the session
    store = Store(path, background_checkpoints=background)
    store.start_run("r1", {}, {})
    for i in range(40):  # a few dozen log pages: far below the writer's own checkpoint
        store.store_generation([_row(f"k{i}", output="x" * 500)], "r1")
    deadline = time.monotonic() + 10.0
    while background and _in_database_file(path) < 40 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _in_database_file(path) == (40 if background else 0)
    assert store.results_by_keys([f"k{i}" for i in range(45)]).keys() == {f"k{i}" for i in range(40)}
    threads = {t for t in threading.enumerate() if t.name == f"evalrun-checkpoint:{path.name}"}
    assert len(threads) == (1 if background else 0)
    store.close()
    assert not any(t.is_alive() for t in threads)
    assert _in_database_file(path) == 40  # the last connection's close checkpoints the rest


def test_a_checkpoint_held_back_by_a_reader_is_retried_without_another_commit(tmp_path: Path) -> None:
    """A reader's snapshot stops a passive checkpoint short of the log's end; once it is gone
    the rest reaches the database file although no commit follows."""
    path = tmp_path / "held-back.sqlite"
    store = Store(path, background_checkpoints=True)
    store.start_run("r1", {}, {})
    store.store_generation([_row("k0")], "r1")
    reader = sqlite3.connect(str(path), isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 1  # holds a snapshot
    for i in range(1, 30):
        store.store_generation([_row(f"k{i}", output="z" * 500)], "r1")
    time.sleep(0.3)  # the checkpoints after those commits ran with the reader still there
    assert _in_database_file(path) < 30
    reader.execute("COMMIT")
    reader.close()
    deadline = time.monotonic() + 10.0
    while _in_database_file(path) < 30 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _in_database_file(path) == 30
    store.close()


def test_two_writers_with_background_checkpoints_share_one_store(tmp_path: Path) -> None:
    """xdist workers each hold a run's store: their checkpointers run side by side, and every
    commit of both still reaches the database file."""
    path = tmp_path / "shared-checkpoints.sqlite"
    a, b = Store(path, background_checkpoints=True), Store(path, background_checkpoints=True)
    a.start_run("r1", {}, {})
    for i in range(60):
        (a if i % 2 else b).store_generation([_row(f"k{i}", output="y" * 800)], "r1")
    deadline = time.monotonic() + 10.0
    while _in_database_file(path) < 60 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _in_database_file(path) == 60
    threads = [s._checkpointer._thread for s in (a, b)]
    assert all(t.is_alive() for t in threads)  # a busy checkpoint does not end a thread
    a.close()
    b.close()
    assert not any(t.is_alive() for t in threads)
