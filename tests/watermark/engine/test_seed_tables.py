"""The per-seed table cache: LRU by bytes, one build call per batch of misses, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from evalrun._util.errors import EvalrunError
from evalrun.watermark.engine import seed_tables as st


def _builder(calls: list[list[int]], width: int = 4):
    def build(missing: list[int]) -> list[np.ndarray]:
        calls.append(list(missing))
        return [np.full(width, float(s)) for s in missing]
    return build


def test_rows_are_built_once_per_distinct_missing_seed() -> None:
    cache = st.SeedTableCache(1 << 20)
    calls: list[list[int]] = []
    rows = cache.rows("space", [5, 7, 5], _builder(calls))
    assert calls == [[5, 7]]
    assert [r[0] for r in rows] == [5.0, 7.0, 5.0]
    assert (cache.stats.hits, cache.stats.misses) == (0, 3)
    rows = cache.rows("space", [7, 9], _builder(calls))
    assert calls[-1] == [9] and [r[0] for r in rows] == [7.0, 9.0]
    assert (cache.stats.hits, cache.stats.misses) == (1, 4)
    # another space never sees these rows
    cache.rows("other", [7], _builder(calls))
    assert calls[-1] == [7]


def test_least_recently_used_rows_leave_first_within_the_byte_budget() -> None:
    row_bytes = 4 * 8
    cache = st.SeedTableCache(3 * row_bytes)
    calls: list[list[int]] = []
    cache.rows("s", [1, 2, 3], _builder(calls))
    cache.rows("s", [1], _builder(calls))  # 1 is now the most recently used
    cache.rows("s", [4], _builder(calls))  # evicts 2
    assert len(cache) == 3 and cache.used_bytes == 3 * row_bytes
    cache.rows("s", [1, 3, 4], _builder(calls))
    assert calls[-1] == [4]  # nothing rebuilt
    cache.rows("s", [2], _builder(calls))
    assert calls[-1] == [2]


def test_a_row_larger_than_the_budget_is_used_but_not_kept() -> None:
    cache = st.SeedTableCache(16)
    calls: list[list[int]] = []
    (row,) = cache.rows("s", [3], _builder(calls, width=8))
    assert row.shape == (8,) and len(cache) == 0 and cache.used_bytes == 0


def test_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st, "_CACHE", None)
    monkeypatch.setenv(st.ENV_BUDGET, "1.5")
    assert st.seed_tables().budget_bytes == int(1.5 * (1 << 20))
    monkeypatch.setattr(st, "_CACHE", None)
    monkeypatch.setenv(st.ENV_BUDGET, "lots")
    with pytest.raises(EvalrunError, match="EVALRUN_SEED_TABLE_MB"):
        st.seed_tables()
    monkeypatch.setattr(st, "_CACHE", None)
    monkeypatch.setenv(st.ENV_BUDGET, "0")
    cache = st.seed_tables()  # 0 disables keeping rows, generation still works
    cache.rows("s", [1], _builder([]))
    assert len(cache) == 0
