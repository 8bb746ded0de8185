"""``evalrun export``: the long-format per-result table (one row per result) as CSV or JSONL.

Each row carries every ``results`` column, the provenance of the run that produced it
(``git_sha``, ``git_dirty``, ``evalrun_version``, ``started_at``, ...) and the name of the case
field the pack groups by (``group_field``: ``family``, ``scheme``) next to its value
(``group_value``), so the file can be analysed on its own or joined back to the store.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path
from typing import Any

from evalrun._util.errors import EvalrunError
from evalrun._util.files import atomic_open
from evalrun.metrics.aggregates import MetricRecord, compute, metrics_path_beside, write_metrics_json
from evalrun.metrics.judgements import with_judgements
from evalrun.metrics.quality_records import quality_records
from evalrun.pack.loading import declared_group_field, discover_packs
from evalrun.store.database import Store

#: run columns joined onto each result (``run_id`` is already a results column)
RUN_COLUMNS = (
    "started_at", "finished_at", "git_sha", "git_dirty", "evalrun_version", "python",
    "platform", "argv", "packages_json", "seed", "config_json",
)

FORMATS = ("csv", "jsonl")


def open_store(db: str | Path, *, check: bool = True) -> Store:
    """Open a results database read-only (SQLite ``mode=ro``): works on read-only media and
    beside a running writer; the usual mistakes are one-line errors naming ``--db``. ``check``:
    its ``quick_check`` and :meth:`~evalrun.store.database.Store.damaged_row` (leave them to the first of
    several connections: they read the whole file)."""
    store = Store(db, readonly=True, what="--db", check=check)
    damaged = store.damaged_row() if check else None
    if damaged is not None:
        store.close()
        raise EvalrunError(f"--db {db}: {damaged}; its pages are sound but that row is not: restore the store from a "
                           "copy, or fix or delete the row with sqlite3, and report again")
    return store


def select_rows(store: Store, run_id: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(results, runs)``: every result (or those ``run_id`` covered) and the run rows that
    produced or selected them. Raises for an empty store or an unknown run id."""
    try:
        runs = [dict(r) for r in store.runs()]
        if run_id is not None and run_id not in {r["run_id"] for r in runs}:
            known = ", ".join(r["run_id"] for r in runs) or "none"
            raise EvalrunError(f"--run {run_id}: no such run in {store.path} (known runs: {known})")
        rows = [dict(r) for r in store.results(run_id=run_id)]
    except sqlite3.Error as exc:
        raise EvalrunError(f"--db {store.path}: not an evalrun results database ({exc})") from None
    if not rows:
        where = f"run {run_id}" if run_id is not None else str(store.path)
        raise EvalrunError(f"{where} holds no results: run `evalrun run ... --out {store.path}` first")
    used = {r["run_id"] for r in rows} | ({run_id} if run_id else set())
    return rows, [r for r in runs if r["run_id"] in used]


def flatten_metadata(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For CSV: a ``metadata.<key>`` column per metadata key any row has (nested values as
    JSON text), in place of the ``metadata`` object."""
    keys = sorted({k for rec in records for k in (rec.get("metadata") or {})})
    out = []
    for rec in records:
        metadata = rec.pop("metadata") or {}
        for k in keys:
            v = metadata.get(k)
            rec[f"metadata.{k}"] = json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
        out.append(rec)
    return out


#: what a spreadsheet takes for the start of a formula in a CSV cell (OWASP's list)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def guard_formula(value: object) -> object:
    """A CSV cell a spreadsheet will not run: text starting like a formula gets a leading
    apostrophe (shown, not evaluated); numbers stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def result_records(rows: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The export's rows: each result's columns with its run's provenance (:data:`RUN_COLUMNS`),
    its pack's ``group_field`` and its grade's ``metadata`` parsed (what ``evalrun export``
    writes and ``evalrun.open(db).results()`` returns)."""
    run_by_id = {r["run_id"]: dict(r) for r in runs}
    packs = discover_packs()
    group_fields = {name: declared_group_field(packs[name]) if name in packs else None
                    for name in {row["pack"] for row in rows}}
    records = []
    for row in rows:
        run = run_by_id.get(row["run_id"], {})
        rec = dict(row)
        metadata = rec.pop("metadata_json", None)
        for col in RUN_COLUMNS:
            rec[col] = run.get(col) if run else None
        rec["group_field"] = group_fields[row["pack"]]
        rec["metadata"] = json.loads(metadata) if metadata else None
        records.append(rec)
    return records


def metric_records(store: Store, rows: list[dict[str, Any]]) -> list[MetricRecord]:
    """The metrics.json records of ``rows`` (judge answers and quality records included)."""
    return [*compute(with_judgements(store, rows)), *quality_records(store, rows)]


def export_metrics_path(out: str | Path) -> Path:
    """Where an export writes its metrics records: beside ``out``, named after the whole file
    (``results.csv`` -> ``results.csv.metrics.json``). The run's own records are
    ``results.metrics.json`` beside the store (:func:`~evalrun.metrics.aggregates.metrics_path_beside`);
    naming by the stem made ``--out results.csv`` beside ``results.sqlite`` overwrite them."""
    out = Path(out)
    return out.with_name(f"{out.name}.metrics.json")


def export_results(db: str | Path, fmt: str, out: str | Path, run_id: str | None = None, *,
                   formulas_guarded: bool = True) -> int:
    """Write one row per result to ``out`` as ``csv`` or ``jsonl``, whole or not at all;
    returns the rows written. CSV cells that start like a spreadsheet formula are
    :func:`guard_formula`-ed unless ``formulas_guarded`` is off (for programs, not people)."""
    if fmt not in FORMATS:
        raise EvalrunError(f"--format {fmt!r}: must be one of {', '.join(FORMATS)}")
    metrics_path = export_metrics_path(out)
    if metrics_path.resolve() == metrics_path_beside(db).resolve():
        raise EvalrunError(f"--out {out}: its metrics would overwrite {metrics_path}, the run's own beside --db {db};"
                           f" name the export by its format, e.g. {Path(out).with_suffix('.' + fmt)}")
    store = open_store(db)
    try:
        rows, runs = select_rows(store, run_id)
        metrics = metric_records(store, rows)
    finally:
        store.close()
    records = result_records(rows, runs)
    if fmt == "csv":
        records = flatten_metadata(records)
    out_path = Path(out)
    columns = list(dict.fromkeys(k for rec in records for k in rec))
    with atomic_open(out_path, what="--out", newline="") as fh:
        if fmt == "csv":
            writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="raise")
            writer.writeheader()
            for rec in records:
                writer.writerow({k: "" if v is None else (guard_formula(v) if formulas_guarded else v)
                                 for k, v in rec.items()})
        else:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False, sort_keys=False) + "\n")
    write_metrics_json(metrics, metrics_path, what="--out")
    return len(records)
