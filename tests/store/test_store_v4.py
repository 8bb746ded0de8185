"""Schema version 4 (the embeddings cache and the analyses table): created for new stores,
added in place to a release-1 store and to a version-3 store, read as absent by readers of an
older store."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from evalrun.store.database import MIGRATIONS, SCHEMA_VERSION, Store

RELEASE1 = Path(__file__).resolve().parents[1] / "data" / "release1.sqlite"


def _q(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _tables(db: Path) -> set[str]:
    return {name for (name,) in _q(db, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_version_4_adds_the_embeddings_and_analyses_tables(tmp_path: Path) -> None:
    assert SCHEMA_VERSION >= 4 and 3 in MIGRATIONS
    db = tmp_path / "new.sqlite"
    with Store(db) as store:
        store.store_embeddings("embedded|abc", [("d1", 2, b"\x00" * 8)])
        store.store_analysis({"analysis_key": "k", "kind": "distinguish", "config_json": "{}", "result_json": "{}",
                              "created_at": "2026-01-01"})
        assert store.embeddings("embedded|abc", ["d1", "d2"]) == {"d1": b"\x00" * 8}
        assert [r["kind"] for r in store.analyses()] == ["distinguish"] and store.analyses("tune") == []
    assert {"embeddings", "analyses"} <= _tables(db) and _q(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]


def test_a_release_1_store_is_upgraded_to_the_current_version_in_place(tmp_path: Path) -> None:
    db = tmp_path / "r1.sqlite"
    shutil.copy(RELEASE1, db)
    before = _q(db, "SELECT result_id, raw_output, score, label FROM results ORDER BY 1")
    with Store(db, readonly=True) as old:  # a reader sees no cache and no analyses, and changes nothing
        assert old.version == 1 and old.embeddings("x", ["y"]) == {} and old.analyses() == []
    assert _q(db, "PRAGMA user_version") == [(1,)]
    with Store(db):
        pass
    assert _q(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)] and {"transforms", "embeddings", "analyses"} <= _tables(db)
    assert _q(db, "SELECT result_id, raw_output, score, label FROM results ORDER BY 1") == before


def test_a_version_3_store_gains_the_tables_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "v3.sqlite"
    with Store(db) as store:
        store.conn.execute("INSERT INTO runs (run_id, started_at) VALUES ('r', 'now')")
    conn = sqlite3.connect(db)
    conn.executescript("DROP TABLE embeddings; DROP TABLE analyses; PRAGMA user_version = 3;")
    conn.close()
    assert not {"embeddings", "analyses"} & _tables(db)
    with Store(db) as store:
        assert store.version == SCHEMA_VERSION and store.run_ids() == ["r"]
    assert {"embeddings", "analyses"} <= _tables(db)
