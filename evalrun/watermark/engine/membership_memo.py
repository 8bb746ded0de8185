"""Green-list memberships already decided, kept across calls.

Deciding whether token ``t`` is in the green list of generator seed ``s`` costs up to
``int(V * gamma)`` mt19937 draws (:func:`evalrun.kernels.fisher_yates.traced_members`).
Reference selfhash seeds hang on the candidate and on the one window token that minimises the
anchored hash, so the same (seed, token) pairs come back across the texts of a file, across
the slices a file is read in, across the texts a grader detects one at a time and across the
steps of a generation: a million tokens of Austen, read 1,000 texts at a time, ask for 288k
pair decisions, 182k of them distinct.

The memo is a direct-mapped cache, one per (vocabulary size, green-list size): a fixed array
of slots, the slot of a pair key ``(seed & 0xffffffff) * V + t`` (torch seeds mt19937 with the
low 32 bits only) chosen by Fibonacci hashing, each slot holding the last key stored there
with its flag. Looking up and storing cost one gather and one scatter per key, whatever the
memo holds (a sorted memo cost more to keep than it saved on texts whose pairs never recur); a
key pushed out by another is decided again when it comes back. Slots hold ``key << 1 | flag``
in one word, so any store, even two threads' at once, leaves each slot a key with its own
flag. Memory is bounded: :data:`MEMO_SPACES` memos, least recently used first out, share a
slice of the seed-table budget (:mod:`evalrun.watermark.engine.seed_tables`,
``EVALRUN_SEED_TABLE_MB``; 0 turns the memo off). Keys are derived seeds, never the watermark
key, and live in memory only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable

import numpy as np

from evalrun.watermark.engine.seed_tables import MAX_DENSE, seed_tables

#: memos kept (one per vocabulary size and green-list size)
MEMO_SPACES = 4
#: most slots in one memo (16 MiB)
MAX_SLOTS_LOG2 = 21
#: pair keys are below 2**60 (a 32-bit seed times V < 2**28); any key below this limit fits a
#: slot as ``key << 1 | flag`` and differs from an empty slot's
KEY_LIMIT = 1 << 62
_EMPTY = np.uint64(2**64 - 1)  # ``>> 1`` of it is above every key
_FIBONACCI = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio, odd

_memos: OrderedDict[tuple[int, int], "MembershipMemo"] = OrderedDict()
_memos_lock = threading.Lock()


class MembershipMemo:
    """``2**slots_log2`` slots of decided pair keys (none when ``slots_log2`` is negative)."""

    def __init__(self, slots_log2: int) -> None:
        self.slots_log2 = int(slots_log2)
        self._slots = (np.full(1 << self.slots_log2, _EMPTY, dtype=np.uint64)
                       if self.slots_log2 >= 0 else None)

    def __len__(self) -> int:
        """Keys held."""
        return 0 if self._slots is None else int(np.count_nonzero(self._slots != _EMPTY))

    def decide(self, keys: np.ndarray, fresh: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Flags of the uint64 ``keys`` (distinct, each below :data:`KEY_LIMIT`): held ones
        looked up, the others from ``fresh(missing keys)`` (in their order in ``keys``),
        which are then stored."""
        keys = np.asarray(keys, dtype=np.uint64)
        if len(keys) and int(keys.max()) >= KEY_LIMIT:
            raise ValueError(f"pair key {int(keys.max())} is not below 2**62")
        slots = self._slots
        if slots is None or len(keys) == 0:
            return np.asarray(fresh(keys), dtype=bool)
        # the top slots_log2 bits of the Fibonacci product (all keys in slot 0 for one slot)
        at = (keys * _FIBONACCI) >> np.uint64(64 - self.slots_log2) if self.slots_log2 else \
            np.zeros(len(keys), dtype=np.uint64)
        held = slots[at]
        known = (held >> np.uint64(1)) == keys
        out = known & (held & np.uint64(1)).astype(bool)
        missing = np.flatnonzero(~known)
        if len(missing):
            new = np.asarray(fresh(keys[missing]), dtype=bool)
            out[missing] = new
            slots[at[missing]] = (keys[missing] << np.uint64(1)) | new
        return out


def _slots_log2(budget_bytes: int) -> int:
    """Slots per memo: the largest power of two whose words fit in its share of the budget,
    at most ``2**MAX_SLOTS_LOG2``; -1 (no memo) for a budget of less than one word."""
    share = budget_bytes // MAX_DENSE // MEMO_SPACES // 8
    return min(share.bit_length() - 1, MAX_SLOTS_LOG2)


def membership_memo(vocab_size: int, size: int) -> MembershipMemo:
    """The process-wide memo of ``(vocab_size, size)`` (made on first use)."""
    space = (int(vocab_size), int(size))
    with _memos_lock:
        memo = _memos.get(space)
        if memo is None:
            memo = _memos[space] = MembershipMemo(_slots_log2(seed_tables().budget_bytes))
            while len(_memos) > MEMO_SPACES:
                _memos.popitem(last=False)
        _memos.move_to_end(space)
        return memo


def clear_memos() -> None:
    """Forget every memo (a fresh process's state: benchmarks time cold detection with it)."""
    with _memos_lock:
        _memos.clear()
