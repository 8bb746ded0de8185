"""SQLite provenance store: the public schema users query with sqlite3 or pandas.

One row in ``results`` per item (pack, case, model, params, watermark, attack, repetition,
prompt). ``item_key`` makes a row findable again, which is what caching and resume rely on:
a re-run looks up finished rows by key and only generates what is missing or errored. The
``run_items`` table records which rows each run covered, cached ones included, so a report can
be restricted to one run. Every write is its own short transaction (WAL mode), so a process
killed at any point loses nothing already stored.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from evalrun.errors import EvalrunError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    git_sha TEXT,
    git_dirty INTEGER,
    evalrun_version TEXT,
    python TEXT,
    platform TEXT,
    argv TEXT,
    packages_json TEXT,
    seed INTEGER,
    config_json TEXT
);
CREATE TABLE IF NOT EXISTS results (
    result_id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    pack TEXT NOT NULL,
    case_id TEXT NOT NULL,
    model TEXT NOT NULL,
    params_json TEXT NOT NULL,
    watermark TEXT NOT NULL,
    attack TEXT NOT NULL,
    repetition INTEGER NOT NULL,
    prompt_json TEXT NOT NULL,
    raw_output TEXT,
    output_tokens_json TEXT,
    score REAL,
    label TEXT,
    reason TEXT,
    grader_hash TEXT,
    latency_ms REAL,
    tokens_in INTEGER,
    tokens_out INTEGER,
    error TEXT,
    created_at TEXT NOT NULL,
    item_key TEXT NOT NULL UNIQUE,
    gen_key TEXT NOT NULL,
    case_json TEXT NOT NULL,
    group_value TEXT,
    attacked_output TEXT,
    served_model TEXT,
    retries INTEGER,
    tokenizer_hash TEXT,
    graded_at TEXT,
    extra_json TEXT
);
CREATE TABLE IF NOT EXISTS run_items (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    result_id INTEGER NOT NULL REFERENCES results(result_id),
    PRIMARY KEY (run_id, result_id)
);
CREATE INDEX IF NOT EXISTS results_pack_model ON results(pack, model);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id);
CREATE INDEX IF NOT EXISTS results_gen_key ON results(gen_key);
CREATE INDEX IF NOT EXISTS run_items_result ON run_items(result_id);
"""

#: the columns a generation writes (grades are written later by the grading phase)
GENERATION_COLUMNS = (
    "run_id", "pack", "case_id", "model", "params_json", "watermark", "attack", "repetition",
    "prompt_json", "raw_output", "output_tokens_json", "latency_ms", "tokens_in", "tokens_out",
    "error", "created_at", "item_key", "gen_key", "case_json", "group_value", "served_model",
    "retries", "tokenizer_hash", "extra_json",
)


def utc_now() -> str:
    """ISO-8601 UTC timestamp with microseconds (sortable as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class GradeRecord:
    result_id: int
    score: float
    label: str
    reason: str
    grader_hash: str
    attacked_output: str | None


class Store:
    """A connection to one results database. Safe to open from several processes at once."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        if readonly:
            if not self.path.exists():
                raise EvalrunError(f"--db {self.path}: no such database")
            uri = f"file:{self.path.resolve()}?mode=ro"
            self.conn = sqlite3.connect(uri, uri=True, timeout=60.0)
        else:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        try:
            self.conn.execute("PRAGMA busy_timeout = 60000")
            if not readonly:
                self._init_schema()
            self._check_version()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise EvalrunError(f"{self.path}: not an evalrun results database ({exc})") from None

    # -- schema ---------------------------------------------------------------------------
    def _init_schema(self) -> None:
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            # executescript commits first, so the transaction is spelled out in the script;
            # IF NOT EXISTS makes a concurrent creator harmless.
            self.conn.executescript(
                f"BEGIN IMMEDIATE;{_SCHEMA}PRAGMA user_version = {SCHEMA_VERSION};COMMIT;"
            )

    def _check_version(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            raise EvalrunError(
                f"{self.path}: schema version {version}, this evalrun reads version {SCHEMA_VERSION}"
            )

    def transaction(self) -> "_Transaction":
        return _Transaction(self.conn)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs -----------------------------------------------------------------------------
    def start_run(self, run_id: str, provenance: Mapping[str, Any], config: Mapping[str, Any]) -> None:
        """Create the run row once; later calls with the same id (other workers) are no-ops."""
        with self.transaction():
            self.conn.execute(
                "INSERT OR IGNORE INTO runs (run_id, started_at, git_sha, git_dirty, evalrun_version,"
                " python, platform, argv, packages_json, seed, config_json)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id, provenance.get("started_at") or utc_now(), provenance.get("git_sha"),
                    provenance.get("git_dirty"), provenance.get("evalrun_version"),
                    provenance.get("python"), provenance.get("platform"),
                    json.dumps(provenance.get("argv", [])),
                    json.dumps(provenance.get("packages", {}), sort_keys=True),
                    config.get("seed"), json.dumps(config, sort_keys=True),
                ),
            )

    def finish_run(self, run_id: str) -> None:
        with self.transaction():
            self.conn.execute("UPDATE runs SET finished_at = ? WHERE run_id = ?", (utc_now(), run_id))

    def runs(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM runs ORDER BY started_at").fetchall()

    # -- generation phase -----------------------------------------------------------------
    def finished_keys(self, item_keys: Iterable[str]) -> dict[str, int]:
        """item_key -> result_id for rows that hold an output and no error (the cache)."""
        keys = list(item_keys)
        out: dict[str, int] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.conn.execute(
                f"SELECT item_key, result_id FROM results WHERE item_key IN ({marks})"
                " AND error IS NULL AND raw_output IS NOT NULL",
                chunk,
            ):
                out[row[0]] = row[1]
        return out

    def store_generation(self, rows: Sequence[Mapping[str, Any]], run_id: str) -> list[int]:
        """Write the rows of one generation (one per attack) and link them to the run, in one
        transaction. A row whose key exists (an earlier errored attempt) is overwritten."""
        cols = GENERATION_COLUMNS
        update = ", ".join(f"{c} = excluded.{c}" for c in cols if c != "item_key")
        sql = (
            f"INSERT INTO results ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
            f" ON CONFLICT(item_key) DO UPDATE SET {update}, score = NULL, label = NULL,"
            " reason = NULL, grader_hash = NULL, graded_at = NULL, attacked_output = NULL"
            " RETURNING result_id"
        )
        ids: list[int] = []
        with self.transaction():
            for row in rows:
                ids.append(self.conn.execute(sql, [row.get(c) for c in cols]).fetchone()[0])
            self.conn.executemany(
                "INSERT OR IGNORE INTO run_items (run_id, result_id) VALUES (?, ?)",
                [(run_id, rid) for rid in ids],
            )
        return ids

    def link(self, run_id: str, result_ids: Iterable[int]) -> None:
        """Record that ``run_id`` covered already-finished (cached) rows."""
        with self.transaction():
            self.conn.executemany(
                "INSERT OR IGNORE INTO run_items (run_id, result_id) VALUES (?, ?)",
                [(run_id, rid) for rid in result_ids],
            )

    # -- grading phase --------------------------------------------------------------------
    def result_by_key(self, item_key: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM results WHERE item_key = ?", (item_key,)).fetchone()

    def record_grade(self, grade: GradeRecord) -> None:
        with self.transaction():
            self.conn.execute(
                "UPDATE results SET score = ?, label = ?, reason = ?, grader_hash = ?,"
                " attacked_output = ?, graded_at = ? WHERE result_id = ?",
                (grade.score, grade.label, grade.reason, grade.grader_hash,
                 grade.attacked_output, utc_now(), grade.result_id),
            )

    # -- read side ------------------------------------------------------------------------
    def results(self, run_id: str | None = None, pack: str | None = None) -> list[sqlite3.Row]:
        """All result rows, or those a run covered; ordered for stable reports."""
        sql = "SELECT r.* FROM results r"
        args: list[Any] = []
        where = []
        if run_id is not None:
            sql += " JOIN run_items ri ON ri.result_id = r.result_id"
            where.append("ri.run_id = ?")
            args.append(run_id)
        if pack is not None:
            where.append("r.pack = ?")
            args.append(pack)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY r.pack, r.model, r.watermark, r.attack, r.case_id, r.repetition"
        return self.conn.execute(sql, args).fetchall()

    def run_ids(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT run_id FROM runs ORDER BY started_at")]


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, retried while another process holds the write lock."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        for attempt in range(200):
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return self.conn
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 199:
                    raise
                time.sleep(0.05)
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")

