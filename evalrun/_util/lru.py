"""A bounded get-or-build memo: the few in-process caches of detection (per-text model
statistics, MarkLLM table rows and streams) keep their most recently used entries only."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``capacity`` entries; the least recently used goes first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get_or_build(self, key: K, build: Callable[[], V]) -> V:
        """The entry of ``key``, built (and kept) when missing."""
        found = self._items.get(key)
        if found is None:
            found = self._items[key] = build()
            if len(self._items) > self.capacity:
                self._items.popitem(last=False)
        self._items.move_to_end(key)
        return found

    def clear(self) -> None:
        self._items.clear()
