"""Dense tables of packed green masks, for green-list schemes seeded by one token.

When a position's seed depends on the previous token alone (native ``kgw`` with
``randomness=window,context=1``, reference-compatible ``kgw`` with ``seeding=lefthash,
context=1``), there are only as many green lists as tokens, so one table indexed by token id
holds them all, one bit per column (a 8192-token vocabulary: 8 MiB, against 256 MiB as float
rows). A decoding step is then three array calls for the whole batch (gather the rows, unpack
them, add the bias) instead of a cache lookup and an add per row.

Rows are built on first use. Building one row inside the decoding loop costs several times
what the same row costs inside one vectorised pass over many rows: with the embedded model
here about 150-200 µs against 22 µs, a ratio near 7 or more (the forward pass has just pushed everything
out of cache, and the fixed cost of the calls is not shared). So once a table has built an
eighth of its rows one by one, the rest are built in one go: the classic ski-rental rule
(stop renting once the rent paid about equals the price of buying), which keeps the total
within about twice the better of the two strategies in hindsight, whatever the run's length.

Tables live in the process-wide seed-table cache (:mod:`evalrun.watermark.engine.seed_tables`) and
are only made when they take at most a quarter of its byte budget; the caller falls back to
per-seed rows otherwise (vocabularies of about 46,000 tokens and more at the default budget).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from evalrun.kernels.backend import is_torch

#: rows are built in blocks of this many (bounds the temporaries of a vectorised build)
BLOCK_ROWS = 64
#: single-row builds, as a fraction of the table's rows, after which all rows are built
#: (about 1 / the in-loop to vectorised cost ratio per row, see the module docstring)
BUY_FRACTION = 0.125

#: builds boolean masks ``[m, width]`` (numpy) for row indices ``[m]``
MaskBuilder = Callable[[np.ndarray], np.ndarray]


class MaskTable:
    """Packed boolean masks ``[rows, width]``, filled on demand (see the module docstring).

    The table is allocated zeroed (``calloc``): rows never built cost no memory."""

    def __init__(self, rows: int, width: int, build: MaskBuilder, stats: Any = None) -> None:
        self.width = int(width)
        self.bits = np.zeros((int(rows), (self.width + 7) // 8), dtype=np.uint8)
        self.filled = np.zeros(int(rows), dtype=bool)
        #: rows built on a lookup's demand (the "rent" paid so far)
        self.single_builds = 0
        #: every row is built (lookups no longer check)
        self.complete = False
        #: set when the cache lets the table go: holders should ask the cache again
        self.evicted = False
        #: counts ``hits`` (rows found built) and ``misses`` (rows a lookup had to wait for)
        self.stats = stats
        self._build = build

    def packed(self, index: Any) -> np.ndarray:
        """The packed rows ``[m, ceil(width / 8)]`` of ``index`` (``m`` ints; built as
        needed)."""
        if self.complete:
            if self.stats is not None:
                self.stats.hits += len(index)
            return self.bits[index]
        index = np.asarray(index, dtype=np.int64)
        need = ~self.filled[index]
        waited = 0
        if need.any():
            missing = np.unique(index[need])
            waited = int(need.sum())
            self.single_builds += len(missing)
            if self.single_builds >= BUY_FRACTION * len(self.filled):
                missing = np.flatnonzero(~self.filled)
            self._fill(missing)
        if self.stats is not None:
            self.stats.hits += len(index) - waited
            self.stats.misses += waited
        return self.bits[index]

    def _fill(self, index: np.ndarray) -> None:
        for start in range(0, len(index), BLOCK_ROWS):
            block = index[start : start + BLOCK_ROWS]
            masks = self._build(block)
            if masks.shape != (len(block), self.width):
                raise ValueError(f"mask builder returned shape {masks.shape}, expected "
                                 f"{(len(block), self.width)}")
            self.bits[block] = np.packbits(masks, axis=1)
            self.filled[block] = True
        self.complete = bool(self.filled.all())


def previous_tokens(input_ids: Any, width: int) -> list[int] | None:
    """The last token of every row of ``input_ids [B, T]`` (``T >= 1``) as a list (in the
    decoding loop each array call costs microseconds), or None when one lies outside
    ``[0, width)`` and so has no table row."""
    index = input_ids[:, int(input_ids.shape[1]) - 1].tolist()
    if index and (min(index) < 0 or max(index) >= width):
        return None
    return index


def add_packed(scores: Any, packed: np.ndarray, bias: float) -> None:
    """``scores[b, j] += bias`` wherever bit ``j`` of ``packed[b]`` is set, in place.

    ``scores`` is a numpy array or a CPU torch tensor ``[B, W]``. Set bits add ``bias``
    rounded to the scores' dtype and unset bits add 0: the same values as adding a float row
    of ``bias`` and zeros."""
    width = int(scores.shape[1])
    bits = np.unpackbits(packed, axis=1, count=width)
    if is_torch(scores):
        import torch

        # one fused pass: the uint8 bits are widened inside the add
        scores.add_(torch.from_numpy(bits), alpha=bias)
    else:
        scores += bits * scores.dtype.type(bias)
