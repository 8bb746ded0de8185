"""SQLite provenance store: the public schema users query with sqlite3 or pandas.

One row in ``results`` per item (pack, case, model, params, watermark, attack, repetition,
prompt). ``item_key`` makes a row findable again, which is what caching and resume rely on:
a re-run looks up finished rows by key and only generates what is missing or errored. The
``run_items`` table records which rows each run covered, cached ones included, so a report can
be restricted to one run. Every stored result is its own short transaction (WAL mode), so a
process killed at any point loses nothing already stored; only when the user asks
(``evalrun run --commit-ms MS``) are fast writes grouped (:mod:`evalrun.store.commit_batch`), and
then losing them costs at most MS milliseconds of work.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from evalrun._util.cache_secret import rekey
from evalrun._util.errors import EvalrunError
from evalrun._util.hashing import sha256_hex, stable_int
from evalrun._util.provenance import utc_now
from evalrun.store.checkpointer import WRITER_PAGES, Checkpointer

#: the schema this evalrun writes; stores from earlier releases are upgraded by MIGRATIONS
SCHEMA_VERSION = 5
#: keys bound per ``IN (...)`` query (SQLite's limit on a statement's variables is 32,766
#: since 3.32, 999 before)
IN_CHUNK = 500
#: first 16 bytes of every SQLite database file
SQLITE_MAGIC = b"SQLite format 3\x00"
#: SQLite's application id of an evalrun store ("evrn"; header bytes 68-71), set when a store is
#: created or upgraded: with its tables, how evalrun knows its own files before writing a byte
APPLICATION_ID = 0x6576726E
#: the tables every evalrun store has had since its first schema version
CORE_TABLES = ("results", "runs")
#: the results' columns that hold JSON, and those that hold numbers (:meth:`Store.damaged_row`)
RESULT_JSON_COLUMNS = ("params_json", "prompt_json", "output_tokens_json", "case_json", "extra_json",
                       "metadata_json")
RESULT_NUMBER_COLUMNS = ("score", "latency_ms")
READ_ONLY = "read-only: report and export open it read-only, run and regrade need write access"

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
    config_json TEXT,
    status TEXT,
    host TEXT,
    pid INTEGER,
    reason TEXT
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
    extra_json TEXT,
    metadata_json TEXT,
    transform_key TEXT
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

#: tables of the transform and judge stages (schema version 3)
_STAGE_TABLES = """
CREATE TABLE IF NOT EXISTS transforms (
    transform_key TEXT PRIMARY KEY,
    gen_key TEXT NOT NULL,
    attack TEXT NOT NULL,
    seed INTEGER,
    text TEXT,
    token_ids_json TEXT,
    tokenizer_hash TEXT,
    token_note TEXT,
    error TEXT,
    latency_ms REAL,
    served_model TEXT,
    extra_json TEXT,
    run_id TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judgements (
    judgement_key TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    method TEXT NOT NULL,
    subjects_json TEXT NOT NULL,
    prompt_json TEXT NOT NULL,
    raw_answer TEXT,
    error TEXT,
    latency_ms REAL,
    served_model TEXT,
    extra_json TEXT,
    run_id TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judged (
    judgement_key TEXT NOT NULL REFERENCES judgements(judgement_key),
    item_key TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (judgement_key, item_key)
);
CREATE INDEX IF NOT EXISTS transforms_gen ON transforms(gen_key);
CREATE INDEX IF NOT EXISTS judged_item ON judged(item_key);
"""


#: tables of the quality analyses (schema version 4): the embeddings cache of
#: ``evalrun distinguish`` and the stored outcomes of analyses that read many results at once
#: (the distinguishability classifier, ``evalrun tune``, ``evalrun sweep``)
_ANALYSIS_TABLES = """
CREATE TABLE IF NOT EXISTS embeddings (
    text_sha256 TEXT NOT NULL,
    embedder TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (text_sha256, embedder)
);
CREATE TABLE IF NOT EXISTS analyses (
    analysis_key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    config_json TEXT NOT NULL,
    result_json TEXT,
    error TEXT,
    seconds REAL,
    run_ids_json TEXT,
    git_sha TEXT,
    evalrun_version TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS analyses_kind ON analyses(kind);
"""


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Release 1 -> 2: a run's status (running / finished / interrupted) and who ran it.

    Release 1 marked only the end of a run: a finished_at means it finished, none that it
    never will (it was killed), since the run that wrote it is long gone.
    """
    for column, kind in (("status", "TEXT"), ("host", "TEXT"), ("pid", "INTEGER")):
        conn.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
    conn.execute("UPDATE runs SET status = CASE WHEN finished_at IS NULL THEN 'interrupted'"
                 " ELSE 'finished' END")


#: release 1's attacks that this release redefines, and the names their meaning lives on under
RENAMED_ATTACKS = {"swap": "neighbour_swap", "typo": "random_letters"}


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    """-> 3: the transform and judge stages, grade metadata.

    Earlier releases applied attacks while grading: their attacked texts (``attacked_output``)
    become transform rows, so regrading reads the same text. ``swap`` and ``typo`` meant the
    neighbour swap and random letters; those attacks live on as ``neighbour_swap`` and
    ``random_letters`` and old rows are renamed (their item keys follow), so a new run's
    ``swap`` (MarkMyWords' attack) never reuses an old result.
    """
    for stmt in filter(str.strip, _STAGE_TABLES.split(";")):
        conn.execute(stmt)
    conn.execute("ALTER TABLE results ADD COLUMN metadata_json TEXT")
    conn.execute("ALTER TABLE results ADD COLUMN transform_key TEXT")
    rows = conn.execute("SELECT result_id, gen_key, attack, attacked_output, run_id, graded_at FROM results"
                        " WHERE attack != 'none'").fetchall()
    for result_id, gen_key, attack, attacked, run_id, graded_at in rows:
        name, sep, rest = attack.partition(":")
        new = f"{RENAMED_ATTACKS[name]}{sep}{rest}" if name in RENAMED_ATTACKS else attack
        key = transform_key(gen_key, new)
        if attacked is not None:
            conn.execute(
                "INSERT OR IGNORE INTO transforms (transform_key, gen_key, attack, seed, text, token_note,"
                " run_id, created_at) VALUES (?,?,?,?,?,?,?,?)",
                (key, gen_key, new, stable_int("attack", gen_key, attack), attacked,
                 "applied by an earlier release, which stored no token ids", run_id, graded_at or utc_now()))
        conn.execute("UPDATE results SET attack = ?, item_key = ?, transform_key = ? WHERE result_id = ?",
                     (new, sha256_hex("item", gen_key, new), key if attacked is not None else None, result_id))


def _v3_to_v4(conn: sqlite3.Connection) -> None:
    """-> 4: the embeddings cache and the analyses table (nothing earlier changes)."""
    for stmt in filter(str.strip, _ANALYSIS_TABLES.split(";")):
        conn.execute(stmt)


def _v4_to_v5(conn: sqlite3.Connection) -> None:
    """-> 5: why a run did not finish (``runs.reason``), next to its status (now also
    ``failed``); and the cache keys of watermarked results re-keyed.

    Earlier releases derived those keys from the watermark key with a fixed salt, so the store
    let anyone test a guessed key offline. Every key-derived value of a watermarked result
    (its generation, item and transform keys, the keys of judge answers about it, and their
    subject lists) is replaced by :func:`~evalrun._util.cache_secret.rekey` of itself: the
    same value wherever it occurs, so every link holds, and nothing a guess can be tested on.
    The next run regenerates those outputs once instead of reusing them."""
    if not any(r[1] == "reason" for r in conn.execute("PRAGMA table_info(runs)")):
        conn.execute("ALTER TABLE runs ADD COLUMN reason TEXT")
    items = {r[0] for r in conn.execute("SELECT item_key FROM results WHERE watermark != 'none'")}
    if not items:
        return
    conn.create_function("evalrun_rekey", 1, lambda v: None if v is None else rekey(v), deterministic=True)
    conn.create_function("evalrun_rekey_subjects", 1, lambda text: json.dumps(
        [rekey(k) if k in items else k for k in json.loads(text)]), deterministic=True)
    conn.execute("CREATE TEMP TABLE evalrun_marked_gens AS SELECT DISTINCT gen_key FROM results"
                 " WHERE watermark != 'none'")
    conn.execute("CREATE TEMP TABLE evalrun_marked_judgements AS SELECT DISTINCT judgement_key FROM judged WHERE"
                 " item_key IN (SELECT item_key FROM results WHERE watermark != 'none')")
    conn.execute("UPDATE results SET gen_key = evalrun_rekey(gen_key), item_key = evalrun_rekey(item_key),"
                 " transform_key = evalrun_rekey(transform_key) WHERE watermark != 'none'")
    conn.execute("UPDATE transforms SET transform_key = evalrun_rekey(transform_key), gen_key = evalrun_rekey(gen_key)"
                 " WHERE gen_key IN (SELECT gen_key FROM evalrun_marked_gens)")
    conn.execute("UPDATE judgements SET judgement_key = evalrun_rekey(judgement_key),"
                 " subjects_json = evalrun_rekey_subjects(subjects_json)"
                 " WHERE judgement_key IN (SELECT judgement_key FROM evalrun_marked_judgements)")
    conn.execute("UPDATE judged SET judgement_key = evalrun_rekey(judgement_key)"
                 " WHERE judgement_key IN (SELECT judgement_key FROM evalrun_marked_judgements)")
    conn.executemany("UPDATE judged SET item_key = ? WHERE item_key = ?", [(rekey(k), k) for k in items])
    conn.execute("DROP TABLE evalrun_marked_gens")
    conn.execute("DROP TABLE evalrun_marked_judgements")


def transform_key(gen_key: str, attack: str, revision: str = "") -> str:
    """Key of one attack applied to one generation: everything that decides its output
    (``revision``: the attack model's, for model attacks)."""
    return sha256_hex("transform", gen_key, attack, revision)


#: from-version -> the step that upgrades a store to the next version, in place
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4,
                                                               4: _v4_to_v5}

#: the columns a generation writes (grades are written later by the grading phase)
GENERATION_COLUMNS = (
    "run_id", "pack", "case_id", "model", "params_json", "watermark", "attack", "repetition",
    "prompt_json", "raw_output", "output_tokens_json", "latency_ms", "tokens_in", "tokens_out",
    "error", "created_at", "item_key", "gen_key", "case_json", "group_value", "served_model",
    "retries", "tokenizer_hash", "extra_json",
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def run_status(run: Mapping[str, Any]) -> str:
    """``finished``, ``interrupted``, ``failed`` or ``running`` for a row of ``runs``.

    A run killed outright (SIGKILL, power loss) never records its end: it stays ``running``
    in the store, and is reported as interrupted unless its process is still alive on this
    host. Release-1 stores have no status: a missing ``finished_at`` means interrupted.
    """
    status = run.get("status")
    if status is None:
        return "finished" if run.get("finished_at") else "interrupted"
    if status == "running":
        same_host = run.get("host") == socket.gethostname()
        if not (same_host and run.get("pid") and _alive(int(run["pid"]))):
            return "interrupted"
    return str(status)


#: how a run ended (``running`` while it runs)
RUN_STATUSES = ("finished", "interrupted", "failed")

#: label stored when the grader raised or returned something that is not a valid Grade
GRADER_ERROR = "GRADER_ERROR"
#: label stored when the result's attack (its transform) failed, e.g. an attack model's call
ATTACK_ERROR = "ATTACK_ERROR"
#: rows whose generation finished: an output and no generation error (grader and attack
#: errors come after the model call, so the output is still reused)
HAS_OUTPUT = (f"raw_output IS NOT NULL AND (error IS NULL OR label IN ('{GRADER_ERROR}',"
              f" '{ATTACK_ERROR}'))")


@dataclass(frozen=True)
class GradeRecord:
    """A grade to store. ``error`` set means the grader failed: score None, label
    :data:`GRADER_ERROR`."""

    result_id: int
    score: float | None
    label: str
    reason: str
    grader_hash: str
    attacked_output: str | None
    error: str | None = None
    metadata_json: str | None = None
    #: when it was graded (not when written: grades may be committed in batches)
    graded_at: str = field(default_factory=utc_now)


def _file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be an evalrun store, judged from its 100-byte SQLite header
    without opening it (opening can create files next to it). Changes still in a WAL file
    are not seen; :class:`Store` checks again once it has opened the database."""
    if path.is_dir():
        return "is a directory"
    if path.is_symlink() and not path.exists():
        return "a symbolic link that leads nowhere (a loop of links, or a missing target)"
    if not path.exists():
        return None
    if not path.is_file():
        return "is not a regular file"
    try:
        with path.open("rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not head:
        return None  # an empty file is an empty database
    if not head.startswith(SQLITE_MAGIC) or len(head) < 100:
        return "not an SQLite file"
    schema_cookie = int.from_bytes(head[40:44], "big")
    user_version = int.from_bytes(head[60:64], "big")
    application = int.from_bytes(head[68:72], "big")
    if application not in (0, APPLICATION_ID):
        return f"not an evalrun results database (another application's SQLite file, id {application:#010x})"
    if user_version > SCHEMA_VERSION:
        return _newer(user_version)
    if user_version == 0 and schema_cookie:
        return "not an evalrun results database (it has tables but no evalrun schema version)"
    return None


def _newer(version: int) -> str:
    return (f"written by a newer evalrun (schema version {version}); this evalrun reads versions 1 to"
            f" {SCHEMA_VERSION}: upgrade evalrun")


def _writable(path: Path) -> bool:
    """Whether a store may be written at ``path``. A file with no write bit at all counts as
    read-only even for root, who could write it anyway: the owner said so."""
    if path.exists():
        mode = path.stat().st_mode
        if not mode & 0o222 or not os.access(path, os.W_OK):
            return False
    # WAL mode creates <db>-wal and <db>-shm next to the database
    return os.access(path.parent, os.W_OK | os.X_OK)


def check_store_path(path: str | Path, *, what: str, write: bool) -> None:
    """Raise a one-line :class:`EvalrunError` naming ``what`` (``--out``, ``--db``) and the
    path when no store can be opened there; creates and changes nothing."""
    path = Path(path)
    problem = _file_problem(path)
    if problem is None and not write and not path.exists():
        problem = "no such database"
    if problem is None and write:
        if path.exists():
            problem = None if _writable(path) else READ_ONLY
        else:
            ancestor = path.parent
            while not ancestor.exists() and ancestor != ancestor.parent:
                ancestor = ancestor.parent
            if not ancestor.is_dir():
                problem = f"cannot create directory {path.parent}: {ancestor} is not a directory"
            elif not os.access(ancestor, os.W_OK | os.X_OK):
                problem = (f"cannot create it: {ancestor} is not writable" if ancestor == path.parent
                           else f"cannot create directory {path.parent}: {ancestor} is not writable")
    if problem is not None:
        raise EvalrunError(f"{what} {path}: {problem}")


class Store:
    """A connection to one results database. Safe to open from several processes at once.

    Writers (``run``, ``regrade``) upgrade an older store in place, in one transaction;
    readers (``report``, ``export``) open it with SQLite's ``mode=ro`` and read any version up
    to this one as it is, so they work on read-only media and beside a running writer.
    ``what`` names the option the path came from in error messages.
    """

    def __init__(self, path: str | Path, *, readonly: bool = False, what: str = "--db",
                 background_checkpoints: bool = False, check: bool = True) -> None:
        self.path = Path(path)
        self.what = what
        self.readonly = readonly
        #: answers to questions asked once per graded item (see :meth:`_answer`)
        self._answers: dict[tuple[str, ...], Any] = {}
        self._answers_version: int | None = None
        #: a run's store checkpoints its log from a thread (evalrun.store.checkpointer)
        self._checkpointer: Checkpointer | None = None
        check_store_path(self.path, what=what, write=not readonly)
        if not readonly and not self.path.parent.exists():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise EvalrunError(f"{what} {self.path}: cannot create directory {self.path.parent}:"
                                   f" {exc.strerror or exc}") from None
        try:
            self.conn = self._connect()
        except sqlite3.Error as exc:
            raise EvalrunError(self._describe(exc)) from None
        self.conn.row_factory = sqlite3.Row
        try:
            self.conn.execute("PRAGMA busy_timeout = 60000")
            self.version = self.conn.execute("PRAGMA user_version").fetchone()[0]
            if self.version > SCHEMA_VERSION:
                raise EvalrunError(f"{what} {self.path}: {_newer(self.version)}")
            if self.version == 0 and self._tables():
                raise EvalrunError(f"{what} {self.path}: not an evalrun results database (it holds tables"
                                   f" {', '.join(self._tables())} and no evalrun schema version)")
            missing = [t for t in CORE_TABLES if t not in self._tables()] if self.version else []
            if missing:  # checked before anything writes (the journal mode is a write)
                raise EvalrunError(f"{what} {self.path}: not an evalrun results database (schema version "
                                   f"{self.version} but no {' or '.join(missing)} table); it was left untouched")
            if readonly:
                if self.version == 0:
                    raise EvalrunError(f"{what} {self.path}: empty database (no evalrun results)")
            if self.version and check:  # ``check=False``: another connection of this process checked it
                self._check_integrity()
            if not readonly:
                self._init_schema()
        except sqlite3.Error as exc:
            self.conn.close()
            raise EvalrunError(self._describe(exc)) from None
        except EvalrunError:
            self.conn.close()
            raise
        if background_checkpoints and not readonly:
            self.conn.execute(f"PRAGMA wal_autocheckpoint = {WRITER_PAGES}")
            self._checkpointer = Checkpointer(self.path)

    def _connect(self) -> sqlite3.Connection:
        if not self.readonly:
            return sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
        uri = f"file:{self.path.resolve()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=60.0)
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # A WAL database on read-only media: SQLite cannot create the shared-memory file a
            # reader needs. Nothing can be writing there, so reading it as immutable is exact.
            conn.close()
            conn = sqlite3.connect(f"{uri}&immutable=1", uri=True, timeout=60.0)
        return conn

    def _describe(self, exc: sqlite3.Error) -> str:
        text = str(exc)
        if "readonly" in text or "read-only" in text:
            return f"{self.what} {self.path}: {READ_ONLY}"
        if "not a database" in text or "malformed" in text:
            return f"{self.what} {self.path}: not an evalrun results database ({text})"
        return f"{self.what} {self.path}: cannot open ({text})"

    def _check_integrity(self) -> None:
        """SQLite's ``quick_check``: damaged pages are one line now, not a DatabaseError in the
        middle of a run, nor a report silently built from what could still be read."""
        found = self.conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if found != "ok":
            found = " ".join(found.replace("*** in database main ***", "").split())
            raise EvalrunError(f"{self.what} {self.path}: damaged ({found}); restore it from a copy, or recover what "
                               f"SQLite still reads with `sqlite3 {self.path} .recover`")

    def _tables(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]

    def damaged_row(self) -> str | None:
        """The first result whose page is sound but whose row is not (a JSON column that is not
        JSON, a score that is not a number), as ``result N: column C ...``; None when none is.
        SQLite's ``json_valid`` finds candidates in one pass; Python's reader, which also takes
        the NaN and Infinity evalrun's JSON may hold, has the last word."""
        for column in RESULT_JSON_COLUMNS:
            if not self.has_column("results", column):
                continue
            for result_id, text in self.conn.execute(
                    f"SELECT result_id, {column} FROM results WHERE {column} IS NOT NULL AND json_valid({column}) = 0"):
                try:
                    json.loads(text)
                except (TypeError, ValueError):
                    return f"result {result_id}: column {column} is not JSON"
        for column in RESULT_NUMBER_COLUMNS:
            found = self.conn.execute(f"SELECT result_id, typeof({column}) FROM results WHERE typeof({column}) "
                                      "NOT IN ('integer', 'real', 'null') LIMIT 1").fetchone()
            if found is not None:
                return f"result {found[0]}: column {column} holds {found[1]}, not a number"
        return None

    def has_column(self, table: str, column: str) -> bool:
        """Readers of an older store ask before they read a column a later release added."""
        return any(r[1] == column for r in self.conn.execute(f"PRAGMA table_info({table})"))

    # -- schema ---------------------------------------------------------------------------
    def _init_schema(self) -> None:
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        if self.version == 0:
            # executescript commits first, so the transaction is spelled out in the script;
            # IF NOT EXISTS makes a concurrent creator harmless.
            self.conn.executescript(
                f"BEGIN IMMEDIATE;{_SCHEMA}{_STAGE_TABLES}{_ANALYSIS_TABLES}PRAGMA user_version = {SCHEMA_VERSION};"
                f"PRAGMA application_id = {APPLICATION_ID};COMMIT;"
            )
        elif self.version < SCHEMA_VERSION:
            self._migrate()
        self.version = SCHEMA_VERSION

    def _migrate(self) -> None:
        """Upgrade to SCHEMA_VERSION in one transaction: all steps or none."""
        with self.transaction():
            version = self.conn.execute("PRAGMA user_version").fetchone()[0]  # another writer won?
            while version < SCHEMA_VERSION:
                MIGRATIONS[version](self.conn)
                version += 1
            self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def transaction(self) -> "_Transaction":
        return _Transaction(self.conn, None if self._checkpointer is None else self._checkpointer.poke)

    def _answer(self, key: tuple[str, ...], ask: Callable[[], Any]) -> Any:
        """``ask()``, cached until the store changes: another connection commits (SQLite's
        data_version moves) or this one writes results or judge answers (which clear the
        cache; grades do not, or every batch of them would). For questions asked once per
        graded item whose answer rarely changes, about 3 us instead of a query."""
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._answers_version:
            self._answers.clear()
            self._answers_version = version
        if key not in self._answers:
            self._answers[key] = ask()
        return self._answers[key]

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
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
                " python, platform, argv, packages_json, seed, config_json, status, host, pid)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,'running',?,?)",
                (
                    run_id, provenance.get("started_at") or utc_now(), provenance.get("git_sha"),
                    provenance.get("git_dirty"), provenance.get("evalrun_version"),
                    provenance.get("python"), provenance.get("platform"),
                    json.dumps(provenance.get("argv", [])),
                    json.dumps(provenance.get("packages", {}), sort_keys=True),
                    config.get("seed"), json.dumps(config, sort_keys=True),
                    socket.gethostname(), provenance.get("pid") or os.getpid(),
                ),
            )

    def finish_run(self, run_id: str, *, interrupted: bool = False, status: str | None = None,
                   reason: str | None = None) -> None:
        """Mark the end of a run: ``finished`` only when every selected item reached the end of
        grading; ``interrupted`` (stopped before its items ran) or ``failed`` with ``reason``."""
        status = status or ("interrupted" if interrupted else "finished")
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r}: expected one of {', '.join(RUN_STATUSES)}")
        with self.transaction():
            self.conn.execute("UPDATE runs SET finished_at = ?, status = ?, reason = ? WHERE run_id = ?",
                              (utc_now(), status, reason, run_id))

    def discard_run(self, run_id: str) -> bool:
        """Forget a run that stored nothing (it was refused before its first result); returns
        whether the store is empty now (no run, no result), so its creator may remove it."""
        with self.transaction():
            self.conn.execute("DELETE FROM runs WHERE run_id = ? AND NOT EXISTS"
                              " (SELECT 1 FROM run_items WHERE run_id = ?)", (run_id, run_id))
        return (self.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
                and self.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 0)

    def unfinished(self, item_keys: Sequence[str]) -> int:
        """How many of ``item_keys`` did not reach the end of grading: no stored row, or a row
        neither graded nor failed at generation."""
        done = sum(1 for row in self.select_in("SELECT graded_at, error FROM results", "item_key", set(item_keys))
                   if row["graded_at"] is not None or row["error"] is not None)
        return len(set(item_keys)) - done

    def runs(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM runs ORDER BY started_at").fetchall()

    # -- generation phase -----------------------------------------------------------------
    def finished_keys(self, item_keys: Iterable[str]) -> dict[str, int]:
        """item_key -> result_id for rows that hold an output and no error (the cache)."""
        return self._result_ids(item_keys, HAS_OUTPUT)

    def select_in(self, select: str, column: str, keys: Iterable[Any], *, also: str = "",
                  params: Sequence[Any] = ()) -> Iterator[sqlite3.Row]:
        """Rows of ``{select} WHERE [{also} AND] {column} IN (keys)``, ``params`` bound to
        ``also``: one query per :data:`IN_CHUNK` keys (SQLite bounds a statement's variables)."""
        keys = list(keys)
        where = f"({also}) AND " if also else ""
        for start in range(0, len(keys), IN_CHUNK):
            chunk = keys[start:start + IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            yield from self.conn.execute(f"{select} WHERE {where}{column} IN ({marks})", [*params, *chunk])

    def _result_ids(self, item_keys: Iterable[str], condition: str = "1") -> dict[str, int]:
        """item_key -> result_id of the rows with these keys that meet ``condition``."""
        return {row[0]: row[1] for row in self.select_in("SELECT item_key, result_id FROM results", "item_key",
                                                        item_keys, also=condition)}

    def store_generation(self, rows: Sequence[Mapping[str, Any]], run_id: str) -> list[int]:
        """Write generated rows (one per attack of each generation) and link them to the run,
        in one transaction; returns their result ids. A row whose key exists (an earlier
        errored attempt) is overwritten."""
        cols = GENERATION_COLUMNS
        update = ", ".join(f"{c} = excluded.{c}" for c in cols if c != "item_key")
        sql = (
            f"INSERT INTO results ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
            f" ON CONFLICT(item_key) DO UPDATE SET {update}, score = NULL, label = NULL,"
            " reason = NULL, grader_hash = NULL, graded_at = NULL, attacked_output = NULL,"
            " metadata_json = NULL, transform_key = NULL"
        )
        keys = [row["item_key"] for row in rows]
        self._answers.clear()  # a new watermark may arrive with these rows
        with self.transaction():
            # executemany, not one execute ... RETURNING per row: a third of the cost
            self.conn.executemany(sql, ([row.get(c) for c in cols] for row in rows))
            self.conn.executemany(
                "INSERT OR IGNORE INTO run_items (run_id, result_id)"
                " SELECT ?, result_id FROM results WHERE item_key = ?",
                [(run_id, key) for key in keys],
            )
            ids = self._result_ids(keys)
        return [ids[key] for key in keys]

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

    def results_by_keys(self, item_keys: Iterable[str]) -> dict[str, sqlite3.Row]:
        """item_key -> row, for those of ``item_keys`` that are stored."""
        return {row["item_key"]: row for row in self.select_in("SELECT * FROM results", "item_key", item_keys)}

    def record_grade(self, grade: GradeRecord) -> None:
        self.record_grades([grade])

    def record_grades(self, grades: Sequence[GradeRecord]) -> None:
        """Store grades, in one transaction."""
        with self.transaction():
            self.conn.executemany(
                "UPDATE results SET score = ?, label = ?, reason = ?, grader_hash = ?,"
                " attacked_output = ?, error = ?, metadata_json = ?, graded_at = ? WHERE result_id = ?",
                [(g.score, g.label, g.reason, g.grader_hash, g.attacked_output, g.error, g.metadata_json,
                  g.graded_at, g.result_id) for g in grades],
            )

    # -- transform stage ------------------------------------------------------------------
    def transforms(self, keys: Iterable[str]) -> dict[str, sqlite3.Row]:
        """transform_key -> stored transform (errored ones included)."""
        return {row["transform_key"]: row
                for row in self.select_in("SELECT * FROM transforms", "transform_key", dict.fromkeys(keys))}

    def store_transform(self, row: Mapping[str, Any], result_ids: Sequence[int]) -> None:
        """Write one transform (replacing an errored attempt) and point its results at it; a
        failed transform marks them ATTACK_ERROR, a successful one clears that."""
        cols = list(row)
        with self.transaction():
            self.conn.execute(
                f"INSERT INTO transforms ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
                f" ON CONFLICT(transform_key) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in cols if c != "transform_key"),
                [row[c] for c in cols])
            marks = ",".join("?" * len(result_ids))
            if row.get("error"):
                self.conn.execute(f"UPDATE results SET transform_key = ?, label = '{ATTACK_ERROR}', error = ?,"
                                  f" score = NULL, reason = NULL WHERE result_id IN ({marks})",
                                  [row["transform_key"], f"attack failed: {row['error']}", *result_ids])
            else:
                self.conn.execute(f"UPDATE results SET transform_key = ?, error = CASE WHEN label ="
                                  f" '{ATTACK_ERROR}' THEN NULL ELSE error END, label = CASE WHEN label ="
                                  f" '{ATTACK_ERROR}' THEN NULL ELSE label END WHERE result_id IN ({marks})",
                                  [row["transform_key"], *result_ids])

    def link_transform(self, key: str, result_ids: Sequence[int]) -> None:
        with self.transaction():
            marks = ",".join("?" * len(result_ids))
            self.conn.execute(f"UPDATE results SET transform_key = ? WHERE result_id IN ({marks})",
                              [key, *result_ids])

    # -- judge stage ----------------------------------------------------------------------
    def judgement(self, key: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM judgements WHERE judgement_key = ?", (key,)).fetchone()

    def store_judgement(self, row: Mapping[str, Any], item_keys: Sequence[str]) -> None:
        """One judge answer (replacing an errored attempt) and the results it judged, in order."""
        cols = list(row)
        self._answers.clear()
        with self.transaction():
            self.conn.execute(
                f"INSERT INTO judgements ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
                f" ON CONFLICT(judgement_key) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in cols if c != "judgement_key"),
                [row[c] for c in cols])
            self.conn.executemany(
                "INSERT OR IGNORE INTO judged (judgement_key, item_key, position) VALUES (?, ?, ?)",
                [(row["judgement_key"], k, i) for i, k in enumerate(item_keys)])

    def has_judgements(self) -> bool:
        """Whether the store holds any judge answer about a result (most do not): cached."""
        return self._answer(("any judged",), lambda: self.has_table("judged") and self.conn.execute(
            "SELECT 1 FROM judged LIMIT 1").fetchone() is not None)

    def judgements_for(self, item_key: str) -> list[sqlite3.Row]:
        """Every stored judge answer about a result, with its position among the subjects."""
        if not self.has_judgements():
            return []
        return self.conn.execute(
            "SELECT j.*, d.position FROM judged d JOIN judgements j USING (judgement_key)"
            " WHERE d.item_key = ? ORDER BY j.judge, j.method, j.judgement_key", (item_key,)).fetchall()

    # -- embeddings cache and analyses (schema version 4) ---------------------------------
    def embeddings(self, embedder: str, digests: Iterable[str]) -> dict[str, bytes]:
        """text_sha256 -> stored vector (float32 bytes) for ``embedder``; an older store has
        no cache and returns nothing."""
        if not self.has_table("embeddings"):
            return {}
        return {digest: vector for digest, vector in self.select_in(
            "SELECT text_sha256, vector FROM embeddings", "text_sha256", dict.fromkeys(digests),
            also="embedder = ?", params=(embedder,))}

    def store_embeddings(self, embedder: str, rows: Sequence[tuple[str, int, bytes]]) -> None:
        """``(text_sha256, dim, float32 bytes)`` rows for ``embedder``, in one transaction."""
        now = utc_now()
        with self.transaction():
            self.conn.executemany(
                "INSERT OR REPLACE INTO embeddings (text_sha256, embedder, dim, vector, created_at)"
                " VALUES (?,?,?,?,?)", [(d, embedder, dim, blob, now) for d, dim, blob in rows])

    def store_analysis(self, row: Mapping[str, Any]) -> None:
        """One analysis outcome (``analyses`` columns), replacing an earlier one with its key."""
        cols = list(row)
        with self.transaction():
            self.conn.execute(
                f"INSERT OR REPLACE INTO analyses ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [row[c] for c in cols])

    def analyses(self, kind: str | None = None) -> list[sqlite3.Row]:
        """Stored analyses (of one kind), oldest first; none in a store older than version 4."""
        if not self.has_table("analyses"):
            return []
        if kind is None:
            return self.conn.execute("SELECT * FROM analyses ORDER BY created_at, analysis_key").fetchall()
        return self.conn.execute("SELECT * FROM analyses WHERE kind = ? ORDER BY created_at, analysis_key",
                                 (kind,)).fetchall()

    def watermarks_of(self, pack: str, model: str) -> tuple[str, ...]:
        """The watermark specs the store holds for a pack and model: unwatermarked outputs are
        detected under each of them (the false-positive side), from the store alone. Asked
        once per graded item, so the answer is cached: the query reads every row of the pack
        and model, which made grading quadratic in the number of cases."""
        return self._answer(("watermarks", pack, model), lambda: tuple(r[0] for r in self.conn.execute(
            "SELECT DISTINCT watermark FROM results WHERE pack = ? AND model = ? AND watermark != 'none'"
            " ORDER BY watermark", (pack, model))))

    def has_table(self, name: str) -> bool:
        return self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                 (name,)).fetchone() is not None

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

    def __init__(self, conn: sqlite3.Connection, committed: Callable[[], None] | None = None) -> None:
        self.conn = conn
        self.committed = committed

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
            if self.committed is not None:
                self.committed()
        else:
            self.conn.execute("ROLLBACK")

