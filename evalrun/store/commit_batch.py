"""Group commits for store writes whose work is cheap to redo.

A commit costs far more than a row: in WAL mode it appends every page the rows touched (the
table and each of its indexes) to the log, about 0.15 ms for one result here, which makes
commits the largest cost of a run of a fast model (the reference solver, replayed outputs).
The store's contract is one transaction per stored result, so grouping is opt-in
(``evalrun run --commit-ms MS``).
A :class:`CommitBatch` holds such rows in memory and writes them in one transaction once the
work behind them took ``budget_ms`` (or there are ``max_rows`` of them), and always at
:meth:`~CommitBatch.flush`: the end of a phase, an exception, an interrupt (``with`` blocks
and pytest's session end flush). So a ``kill -9`` loses at most ``budget_ms`` of work, which
the next run redoes, while a slow row (a model call of a second) is committed the moment it
arrives, as before. Rows wait in memory, never in an open transaction, so other processes
(xdist workers) are not locked out of the store meanwhile.
"""

from __future__ import annotations

from typing import Callable, Generic, Iterable, TypeVar

T = TypeVar("T")

#: most work (milliseconds) a batch holds uncommitted: what a kill -9 can cost a run. The
#: default 0 keeps the store's contract of one transaction per stored result; ``evalrun run
#: --commit-ms MS`` opts into grouping (50 ms makes a 10,000-case reference run about 1.4x
#: faster here, see benchmarks/bench_harness.py)
BUDGET_MS = 0.0
#: most rows a batch holds (bounds memory and the size of one transaction)
MAX_ROWS = 2000


class CommitBatch(Generic[T]):
    """Collects rows for ``write`` (one transaction per call) and calls it per batch."""

    def __init__(self, write: Callable[[list[T]], object], *, budget_ms: float = BUDGET_MS,
                 max_rows: int = MAX_ROWS) -> None:
        self.write = write
        self.budget_ms = budget_ms
        self.max_rows = max_rows
        self.pending: list[T] = []
        self.cost_ms = 0.0

    def add(self, rows: Iterable[T], cost_ms: float | None) -> None:
        """Queue ``rows``, whose work took ``cost_ms`` (None: unknown, so commit now)."""
        self.pending.extend(rows)
        self.cost_ms += float("inf") if cost_ms is None else cost_ms
        if self.cost_ms >= self.budget_ms or len(self.pending) >= self.max_rows:
            self.flush()

    def flush(self) -> None:
        """Write everything held, in one transaction (nothing when empty)."""
        if self.pending:
            self.write(self.pending)  # kept for a later flush if the write fails
            self.pending, self.cost_ms = [], 0.0

    def __enter__(self) -> "CommitBatch[T]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()
