"""The bounded get-or-build memo of evalrun._util.lru."""

from __future__ import annotations

import pytest

from evalrun._util.lru import LRU


def test_builds_once_and_evicts_the_least_recently_used() -> None:
    built: list[str] = []
    memo: LRU[str, str] = LRU(2)

    def get(key: str) -> str:
        return memo.get_or_build(key, lambda: built.append(key) or key.upper())

    assert [get("a"), get("b"), get("a")] == ["A", "B", "A"]
    assert built == ["a", "b"]  # "a" came from the memo the second time
    get("c")  # evicts "b", the least recently used, not "a"
    assert len(memo) == 2
    get("a")
    get("b")
    assert built == ["a", "b", "c", "b"]
    memo.clear()
    assert len(memo) == 0


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        LRU(0)
