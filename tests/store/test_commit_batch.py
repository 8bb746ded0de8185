"""Group commits: fast rows wait for their batch, slow or unknown ones are written at once,
and nothing held is lost at a flush, an exception or the end of a ``with`` block."""

from __future__ import annotations

import pytest

from evalrun.store.commit_batch import CommitBatch


def test_rows_wait_until_their_work_reaches_the_budget() -> None:
    written: list[list[int]] = []
    batch = CommitBatch(written.append, budget_ms=10.0, max_rows=100)
    batch.add([1, 2], cost_ms=4.0)
    batch.add([3], cost_ms=4.0)
    assert written == []
    batch.add([4], cost_ms=2.0)  # 10 ms of work held: one transaction
    assert written == [[1, 2, 3, 4]]
    batch.add([5], cost_ms=0.0)
    batch.flush()
    batch.flush()  # nothing held: no empty transaction
    assert written == [[1, 2, 3, 4], [5]]


def test_slow_or_unknown_rows_are_written_at_once_with_what_waited() -> None:
    written: list[list[str]] = []
    batch = CommitBatch(written.append, budget_ms=50.0)
    batch.add(["cheap"], cost_ms=0.1)
    batch.add(["model call"], cost_ms=800.0)
    batch.add(["unknown"], cost_ms=None)
    assert written == [["cheap", "model call"], ["unknown"]]


def test_max_rows_bounds_a_batch() -> None:
    written: list[list[int]] = []
    batch = CommitBatch(written.append, budget_ms=1e9, max_rows=3)
    for i in range(7):
        batch.add([i], cost_ms=0.0)
    assert written == [[0, 1, 2], [3, 4, 5]]
    batch.flush()
    assert written[-1] == [6]


def test_a_with_block_writes_what_it_holds_even_when_interrupted() -> None:
    written: list[list[int]] = []
    with pytest.raises(KeyboardInterrupt):
        with CommitBatch(written.append, budget_ms=50.0) as batch:
            batch.add([1], cost_ms=0.0)
            raise KeyboardInterrupt
    assert written == [[1]]


def test_a_failed_write_keeps_its_rows_for_the_next_flush() -> None:
    calls: list[list[int]] = []

    def write(rows: list[int]) -> None:
        calls.append(list(rows))
        if len(calls) == 1:
            raise RuntimeError("database is locked")

    batch = CommitBatch(write, budget_ms=50.0)
    batch.add([1], cost_ms=0.0)
    with pytest.raises(RuntimeError):
        batch.flush()
    batch.flush()
    assert calls == [[1], [1]]


def test_by_default_every_add_is_its_own_transaction() -> None:
    """The store's contract (one transaction per stored result) unless a budget is given."""
    written: list[list[int]] = []
    batch = CommitBatch(written.append)
    batch.add([1], cost_ms=0.0)
    batch.add([2, 3], cost_ms=0.0)  # one generation stored for two items: one transaction
    assert written == [[1], [2, 3]]
