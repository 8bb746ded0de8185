"""``evalrun.open(db)``: a results database read from Python, with the rows ``evalrun export``
writes and the records ``metrics.json`` holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from evalrun._util.errors import EvalrunError
from evalrun.api.table import Table
from evalrun.attacks import canonical_attack
from evalrun.report.export import metric_records, open_store, result_records, select_rows
from evalrun.watermark.registry import parse_watermark


def _canonical(kind: str, text: str) -> str:
    """A watermark or attack spec as the store writes it (``kgw:gamma=0.5`` gains its defaults),
    canonicalised as :func:`evalrun.run.options.run_options` does."""
    if kind == "watermark":
        scheme = parse_watermark(text)
        return "none" if scheme is None else scheme.spec.canonical()
    return canonical_attack(text)


class Store:
    """A results database opened read-only (SQLite ``mode=ro``): its runs, its results (the
    columns of ``evalrun export``) and its metrics (``metrics.json``'s records). Each call reads
    the file afresh, so a store that a run is still writing shows what is committed so far."""

    def __init__(self, db: str | Path) -> None:
        self.path = Path(db)
        open_store(self.path).close()  # one-line errors now: no such file, damaged, foreign

    def __repr__(self) -> str:
        return f"evalrun.Store({str(self.path)!r})"

    def _read(self, use: Callable[[Any], Any]) -> Any:
        store = open_store(self.path, check=False)
        try:
            return use(store)
        finally:
            store.close()

    def runs(self) -> Table:
        """One record per run: provenance (git SHA, versions, argv with secrets redacted,
        config), status and reason."""
        return Table(self._read(lambda store: [dict(r) for r in store.runs()]))

    def _rows(self, store: Any, run: str | None) -> list[dict[str, Any]]:
        return select_rows(store, run)[0]

    def _records(self, store: Any, run: str | None, keep: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        rows, runs = select_rows(store, run)
        return result_records([r for r in rows if keep(r)], runs)

    def results(self, *, pack: str | None = None, model: str | None = None, watermark: str | None = None,
                attack: str | None = None, label: str | None = None, run: str | None = None) -> Table:
        """The results (one record each, ``evalrun export``'s columns), optionally only those of
        one pack, model, watermark or attack spec (given as you would on the command line),
        label (``DETECTED``, ``PASS``, ...) or run id."""
        wanted = {"pack": pack, "model": model, "label": label,
                  "watermark": None if watermark is None else _canonical("watermark", watermark),
                  "attack": None if attack is None else _canonical("attack", attack)}
        wanted = {k: v for k, v in wanted.items() if v is not None}

        return Table(self._read(lambda store: self._records(
            store, run, lambda row: all(row.get(k) == v for k, v in wanted.items()))))

    def metrics(self, *, run: str | None = None) -> Table:
        """The records of ``metrics.json`` (``{pack, metric, params, value, n, ci_low, ci_high,
        model, watermark, attack}``, docs/metrics.md) for the whole store or one run."""
        return Table(self._read(lambda store: [r.as_json() for r in metric_records(store, self._rows(store, run))]))


def open_results(db: str | Path) -> Store:
    """``evalrun.open``: read the store at ``db``; an EvalrunError in one line when it is
    missing, damaged or not evalrun's."""
    if not isinstance(db, (str, Path)):
        raise EvalrunError(f"evalrun.open: db must be a path, got {type(db).__name__}")
    return Store(db)
