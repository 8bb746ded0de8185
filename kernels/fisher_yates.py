"""Membership in the prefix of torch's CPU ``randperm`` without building the permutation.

Reference-compatible KGW (``kgw:seeding=selfhash``) seeds a new generator at almost every
scored token and asks whether that one token is among the first ``size`` entries of
``torch.randperm(n)``. Building the permutation costs ``n`` draws and swaps; following the
token through the shuffle costs at most ``size`` draws and no memory.

torch's CPU ``randperm`` (``randperm_cpu`` in ATen's TensorFactories.cpp, for
``n < 2**32 / 20``) fills ``r = [0, n)`` and, for ``i = 0 .. n-2``, swaps ``r[i]`` with
``r[j_i]``, ``j_i = i + random() % (n - i)``, where ``random()`` is the generator's next 32-bit
mt19937 output; numpy's ``MT19937`` seeded the legacy way gives the same outputs. Step ``i``
fixes position ``i`` for good, so the prefix ``r[:size]`` is settled after ``size`` steps, and
a token is in it iff some step ``i < size`` pulls it from its current position ``j_i``. Until
then token ``t`` sits at position ``t``, except that step ``i = t`` (when ``t < size``) pushes
it to ``j_t``, where it waits for a pull or the next push.

Two implementations of that trace, required by tests to agree flag for flag (and with
``torch.randperm``): the compiled kernel ``evalrun.kernels._fisher_yates``
(``kernels/fisher_yates.c``: eight generators per vector register, built at install when a C
compiler is present) and the numpy one below, used where the kernel was not built.

The same kernel also draws whole prefixes of the permutation (:func:`randperm_prefixes`, and
as packed membership masks :func:`packed_prefix_masks`), bit for bit as ``torch.randperm``,
so reference-compatible detection needs no torch where it was built; callers fall back to
torch itself otherwise.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

try:  # built by setup.py when a C compiler is available (the extension is optional)
    from evalrun.kernels import _fisher_yates as _compiled
except ImportError:  # pragma: no cover - exercised where the build was skipped
    _compiled = None

#: torch's ``randperm_cpu`` shuffles as traced here only for ``n < 2**32 / 20`` (uint32 max)
RANDPERM_SMALL_N = (2**32 - 1) // 20
#: (seed, target) pairs traced together by the numpy trace (bounds its ``[pairs, size]``
#: temporaries)
TRACE_PAIRS = 64


def compiled_available() -> bool:
    """Whether the compiled kernel was built with this install."""
    return _compiled is not None


def traced_members(seeds: np.ndarray, targets: np.ndarray, n: int, size: int, *,
                   compiled: bool | None = None) -> np.ndarray:
    """``targets[k]`` among the first ``size`` entries of the CPU ``torch.randperm(n)`` of a
    generator seeded with the 32-bit ``seeds[k]``, for every pair ``k``.

    ``compiled``: ``None`` takes the compiled kernel when it was built, ``True`` requires it,
    ``False`` takes the numpy trace. Targets outside ``[0, n)`` are never members."""
    seeds = np.asarray(seeds)
    targets = np.asarray(targets, dtype=np.int64)
    if seeds.shape != targets.shape or seeds.ndim != 1:
        raise ValueError(f"seeds {seeds.shape} and targets {targets.shape}: one pair per item")
    if len(seeds) and (seeds.min() < 0 or seeds.max() > 0xFFFFFFFF):
        raise ValueError("seeds must be 32-bit (torch seeds mt19937 with the low 32 bits)")
    if size > n:
        raise ValueError(f"size={size} exceeds n={n}")
    if size <= 0 or len(seeds) == 0:
        return np.zeros(len(seeds), dtype=bool)
    if not 0 < n < RANDPERM_SMALL_N:
        raise ValueError(f"n={n}: torch draws randperm({n}) differently; build it instead")
    if compiled and _compiled is None:
        raise RuntimeError("the compiled Fisher-Yates kernel was not built with this install "
                           "(evalrun.kernels._fisher_yates; it needs a C compiler at install)")
    inside = (targets >= 0) & (targets < n)
    if _compiled is not None and compiled is not False:
        # outside targets become n, which no step pulls (every j_i < n)
        flags = np.zeros(len(seeds), dtype=np.uint8)
        _compiled.trace(seeds.astype(np.uint32), np.where(inside, targets, n).astype(np.uint32),
                        flags, n, size)
        return flags.view(bool)
    uniq, pair_seed = np.unique(seeds.astype(np.uint32), return_inverse=True)
    order = np.argsort(pair_seed.reshape(-1), kind="stable")
    flags = np.zeros(len(seeds), dtype=bool)
    flags[order] = _traced_numpy(uniq.tolist(), pair_seed.reshape(-1)[order],
                                 np.where(inside, targets, n)[order], n, size)
    return flags


def randperm_prefixes(seeds: np.ndarray, n: int, size: int) -> np.ndarray:
    """``[len(seeds), size]`` int64: row ``k`` is ``torch.randperm(n)[:size]`` of a CPU
    generator seeded with the 32-bit ``seeds[k]``. Needs the compiled kernel
    (:func:`compiled_available`)."""
    if _compiled is None:
        raise RuntimeError("the compiled Fisher-Yates kernel was not built with this install")
    seeds = np.ascontiguousarray(seeds, dtype=np.uint32).reshape(-1)
    out = np.empty((len(seeds), size), dtype=np.uint32)
    _compiled.randperm(seeds, out, n, size)
    return out.astype(np.int64)


def packed_prefix_masks(seeds: np.ndarray, n: int, size: int) -> np.ndarray:
    """``[len(seeds), ceil(n / 8)]`` uint8: row ``k`` is ``np.packbits`` of the membership mask
    of ``torch.randperm(n)[:size]`` seeded with the 32-bit ``seeds[k]``. Needs the compiled
    kernel (:func:`compiled_available`)."""
    if _compiled is None:
        raise RuntimeError("the compiled Fisher-Yates kernel was not built with this install")
    seeds = np.ascontiguousarray(seeds, dtype=np.uint32).reshape(-1)
    out = np.empty((len(seeds), (n + 7) // 8), dtype=np.uint8)
    _compiled.green_bits(seeds, out, n, size)
    return out


def _traced_numpy(seeds: Sequence[int], pair_seed: np.ndarray, pair_target: np.ndarray,
                  n: int, size: int) -> np.ndarray:
    """The trace with numpy's ``MT19937``: ``size`` draws per seed into a block, then
    vectorised scans of ``j`` for each pair's pull and push events (pairs sorted by
    ``pair_seed``, an index into ``seeds``)."""
    flags = np.zeros(len(pair_seed), dtype=bool)
    steps, spans = _step_constants(n, size)
    bit_gen = np.random.MT19937(0)
    start = 0
    while start < len(pair_seed):
        # a block of whole seeds holding about TRACE_PAIRS pairs
        first_seed = int(pair_seed[start])
        stop = min(len(pair_seed), start + TRACE_PAIRS)
        stop = int(np.searchsorted(pair_seed, pair_seed[stop - 1], side="right"))
        block_seeds = range(first_seed, int(pair_seed[stop - 1]) + 1)
        j = np.empty((len(block_seeds), size), dtype=np.uint32)
        for row, k in enumerate(block_seeds):
            bit_gen._legacy_seeding(int(seeds[k]))
            j[row] = bit_gen.random_raw(size)  # mt19937 outputs are < 2**32
        np.remainder(j, spans, out=j)
        j += steps
        flags[start:stop] = _scan(j, pair_seed[start:stop] - first_seed,
                                  pair_target[start:stop], size)
        start = stop
    return flags


def _scan(j: np.ndarray, rows: np.ndarray, targets: np.ndarray, size: int) -> np.ndarray:
    """Green flag of each (row of ``j``, target) pair; ``j [seeds, size]`` holds the positions
    ``j_i`` each step pulls from."""
    step = np.arange(size, dtype=np.int64)
    green = np.zeros(len(rows), dtype=bool)
    # every target starts at its own id; ``since``: the step after which it waits there
    pos = targets.copy()
    since = np.full(len(rows), -1, dtype=np.int64)
    live = np.flatnonzero((targets >= 0) & (targets < np.iinfo(np.uint32).max))
    while len(live):
        r, p, s = rows[live], pos[live], since[live]
        # the first step after ``since`` that pulls from ``p``; a step i == p that finds
        # j_i == p leaves the token in place, which fixes it as well
        hits = (j[r] == p[:, None].astype(np.uint32)) & (step[None, :] > s[:, None])
        first = hits.argmax(axis=1)
        hit = hits[np.arange(len(live)), first]
        pulled = hit & (first <= p)
        green[live[pulled]] = True
        # not pulled before step p (p < size): step p pushes it on to j_p
        pushed = ~pulled & (p < size)
        live = live[pushed]
        pos_live = p[pushed]
        since[live] = pos_live
        pos[live] = j[rows[live], pos_live].astype(np.int64)
    return green


@functools.lru_cache(maxsize=8)
def _step_constants(n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Step numbers ``i`` and spans ``n - i`` as uint32 ``[size]``."""
    steps = np.arange(size, dtype=np.uint32)
    spans = (np.uint32(n) - steps).astype(np.uint32)
    steps.setflags(write=False)
    spans.setflags(write=False)
    return steps, spans
