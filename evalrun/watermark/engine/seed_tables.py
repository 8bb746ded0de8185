"""Memoised per-seed tables for watermarked generation.

Every vocabulary-wide quantity a processor needs at a position (a green mask, Gumbel noise, a
permutation, Huffman-node uniforms) depends on the position's seed alone, never on the
logits. Sliding-window seeds with context 1, all min-hash seeds and all fixed-key seeds come
from small sets (at most V, V and L values), so the same seed recurs constantly in generated
text: hashing the whole vocabulary once per distinct seed instead of once per step is what
keeps a watermark's generation overhead small next to a model's forward pass.

The cache is process-wide, least recently used first out, and bounded in bytes
(``EVALRUN_SEED_TABLE_MB``, default 256). Entries are keyed by a *space* tuple that holds the
scheme, the width and the device of the rows and the derived key word: the secret key itself
is never kept, and nothing here is ever written anywhere.
"""

from __future__ import annotations

import itertools
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

from evalrun._util.errors import EvalrunError
from evalrun.watermark.engine.mask_tables import MaskBuilder, MaskTable

DEFAULT_BUDGET_MB = 256
ENV_BUDGET = "EVALRUN_SEED_TABLE_MB"
#: most spaces (scheme x key x width x device) given ids before the id map starts afresh
SPACE_LIMIT = 4096
#: most dense mask tables kept (each at most 1/MAX_DENSE of the budget)
MAX_DENSE = 4


def _nbytes(row: Any) -> int:
    if hasattr(row, "nbytes"):
        return int(row.nbytes)
    return int(row.element_size() * row.nelement())


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class SeedTableCache:
    """LRU of table rows keyed by ``(space, seed)``, at most ``budget_bytes`` in total."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = int(budget_bytes)
        self.used_bytes = 0
        self.stats = CacheStats()
        self._rows: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self._space_ids: dict[Hashable, int] = {}
        self._next_id = itertools.count()
        self._dense: OrderedDict[Hashable, MaskTable] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    def clear(self) -> None:
        self._rows.clear()
        for table in self._dense.values():
            table.evicted = True
        self._dense.clear()
        self.used_bytes = 0
        self.stats = CacheStats()

    def dense(self, space: Hashable, rows: int, width: int,
              builder: Callable[[], MaskBuilder]) -> MaskTable | None:
        """The dense mask table of ``space`` (:mod:`evalrun.watermark.engine.mask_tables`), made on
        first use with the row builder that ``builder()`` returns; None when ``rows x width``
        bits would take more than a quarter of the budget (the caller then keeps per-seed
        rows). The ``MAX_DENSE`` most recently used tables are kept, outside the row budget's
        accounting: together they take at most the budget again."""
        table = self._dense.get(space)
        if table is None:
            if rows * ((width + 7) // 8) > self.budget_bytes // MAX_DENSE:
                return None
            table = self._dense[space] = MaskTable(rows, width, builder(), self.stats)
            while len(self._dense) > MAX_DENSE:
                self._dense.popitem(last=False)[1].evicted = True
        self._dense.move_to_end(space)
        table.stats = self.stats  # clear() starts new statistics
        return table

    def rows(self, space: Hashable, seeds: Sequence[int],
             build: Callable[[list[int]], Sequence[Any]]) -> list[Any]:
        """The row of every seed in ``seeds`` (duplicates allowed); ``build(missing)`` makes
        the rows of the distinct missing seeds in one call, in their order."""
        sid = self._space_ids.get(space)
        if sid is None:
            if len(self._space_ids) >= SPACE_LIMIT:
                self._space_ids.clear()  # rows of forgotten spaces age out of the LRU
            sid = self._space_ids[space] = next(self._next_id)
        # keys hold a small int for the space: hashing the space tuple per row costs more
        keys = [(sid, seed) for seed in seeds]
        table = self._rows
        out = list(map(table.get, keys))
        if all(row is not None for row in out):  # the decoding loop's usual case
            list(map(table.move_to_end, keys))
            self.stats.hits += len(keys)
            return out
        missing: dict[int, list[int]] = {}
        for i, (key, row) in enumerate(zip(keys, out)):
            if row is None:
                missing.setdefault(key[1], []).append(i)
            else:
                table.move_to_end(key)
        n_missing = sum(len(v) for v in missing.values())
        self.stats.hits += len(keys) - n_missing
        self.stats.misses += n_missing
        order = list(missing)
        built = build(order)
        for seed, row in zip(order, built):
            for i in missing[seed]:
                out[i] = row
            self._put((sid, seed), row)
        return out

    def _put(self, key: tuple[int, int], row: Any) -> None:
        size = _nbytes(row)
        if size > self.budget_bytes:
            return  # larger than the whole budget: use it once, keep nothing
        self._rows[key] = row
        self.used_bytes += size
        while self.used_bytes > self.budget_bytes:
            _, old = self._rows.popitem(last=False)
            self.used_bytes -= _nbytes(old)


def _budget_from_env() -> int:
    raw = os.environ.get(ENV_BUDGET, "").strip()
    if not raw:
        return DEFAULT_BUDGET_MB << 20
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not mb >= 0:
        raise EvalrunError(f"{ENV_BUDGET}={raw!r}: expected a non-negative number of MiB")
    return int(mb * (1 << 20))


_CACHE: SeedTableCache | None = None


def seed_tables() -> SeedTableCache:
    """The process-wide cache (created on first use, sized from ``EVALRUN_SEED_TABLE_MB``)."""
    global _CACHE
    if _CACHE is None:
        _CACHE = SeedTableCache(_budget_from_env())
    return _CACHE
