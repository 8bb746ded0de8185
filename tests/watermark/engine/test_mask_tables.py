"""Dense packed mask tables: rows on demand, all rows once renting costs as much as buying,
the bias added exactly as a float row of it would be, and the cache's size rule."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st_

from evalrun.watermark.engine import mask_tables as mt
from evalrun.watermark.engine.seed_tables import CacheStats, SeedTableCache


def _masks(width: int):
    """A deterministic builder (row i's mask from a generator seeded by i) and its calls."""
    calls: list[list[int]] = []

    def build(index: np.ndarray) -> np.ndarray:
        calls.append([int(i) for i in index])
        return np.stack([np.random.default_rng(int(i)).random(width) < 0.3 for i in index])

    return build, calls


def test_rows_are_built_on_demand_once_and_counted() -> None:
    build, calls = _masks(21)
    stats = CacheStats()
    table = mt.MaskTable(64, 21, build, stats)
    packed = table.packed([5, 9, 5])
    assert calls == [[5, 9]]
    assert packed.shape == (3, 3)
    expected, _ = _masks(21)
    assert np.array_equal(np.unpackbits(packed, axis=1, count=21), expected(np.array([5, 9, 5])))
    assert (stats.hits, stats.misses) == (0, 3)
    table.packed([9, 11])
    assert calls == [[5, 9], [11]] and (stats.hits, stats.misses) == (1, 4)
    assert table.single_builds == 3 and not table.complete


def test_every_row_is_built_once_an_eighth_were_built_one_by_one() -> None:
    build, calls = _masks(8)
    table = mt.MaskTable(80, 8, build)
    for i in range(9):  # 9 < 80 / 8: still renting
        table.packed([i])
    assert table.filled.sum() == 9 and not table.complete
    table.packed([40])  # the tenth single build reaches 80 / 8: the rest in one go
    assert table.complete and table.filled.all()
    assert max(len(c) for c in calls) == mt.BLOCK_ROWS  # in blocks, not one call per row
    before = len(calls)
    everything = table.packed(list(range(80)))
    assert len(calls) == before
    expected, _ = _masks(8)
    assert np.array_equal(np.unpackbits(everything, axis=1, count=8), expected(np.arange(80)))


def test_a_builder_of_the_wrong_shape_is_a_clear_error() -> None:
    table = mt.MaskTable(10, 16, lambda index: np.zeros((len(index), 15), dtype=bool))
    with pytest.raises(ValueError, match=r"shape \(1, 15\), expected \(1, 16\)"):
        table.packed([3])


@settings(max_examples=60, deadline=None)
@given(width=st_.integers(1, 70), rows=st_.integers(1, 5), bias=st_.floats(0.0, 50.0),
       seed=st_.integers(0, 2**32 - 1), dtype=st_.sampled_from(["float32", "float64"]),
       as_torch=st_.booleans())
def test_packed_bias_equals_adding_a_float_row(width: int, rows: int, bias: float, seed: int,
                                               dtype: str, as_torch: bool) -> None:
    rng = np.random.default_rng(seed)
    scores = (rng.standard_normal((rows, width)) * 4).astype(dtype)
    scores[rng.random((rows, width)) < 0.1] = -np.inf
    masks = rng.random((rows, width)) < 0.4
    want = scores + np.where(masks, bias, 0.0).astype(dtype)  # the per-seed rows' add
    got = torch.from_numpy(scores.copy()) if as_torch else scores.copy()
    mt.add_packed(got, np.packbits(masks, axis=1), bias)
    got_np = got.numpy() if as_torch else got
    assert got_np.dtype == np.dtype(dtype)
    assert np.array_equal(got_np, want)


def test_previous_tokens_are_the_last_column_or_none_outside_the_table() -> None:
    ids = torch.tensor([[4, 7], [1, 0]])
    assert mt.previous_tokens(ids, 8) == [7, 0]
    assert mt.previous_tokens(ids, 7) is None
    assert mt.previous_tokens(np.array([[3, -1]]), 8) is None


def test_the_cache_makes_tables_within_a_quarter_of_its_budget_and_keeps_four() -> None:
    build, _ = _masks(64)
    cache = SeedTableCache(4 * 100 * 8)  # a table of 100 rows x 64 bits fits exactly
    assert cache.dense("a", 101, 64, lambda: build) is None
    table = cache.dense("a", 100, 64, lambda: build)
    assert table is not None and cache.dense("a", 100, 64, lambda: build) is table
    table.packed([1, 2])
    assert (cache.stats.hits, cache.stats.misses) == (0, 2)
    for name in "bcde":
        cache.dense(name, 10, 64, lambda: build)
    assert "a" not in cache._dense and len(cache._dense) == 4
    assert table.evicted  # holders of a table the cache let go ask it again
    kept = cache.dense("e", 10, 64, lambda: build)
    assert not kept.evicted
    cache.clear()
    assert len(cache._dense) == 0 and cache.stats.misses == 0 and kept.evicted


def test_kgw_masks_are_the_nonzero_entries_of_its_table_rows() -> None:
    """The sampler contract behind the dense tables: a mask sampler's table row is its bias
    on the mask and 0 elsewhere (the base class derives masks that way)."""
    from evalrun.kernels.backend import NUMPY
    from evalrun.watermark.engine.native import Sampler
    from evalrun.watermark.registry import parse_watermark

    sampler = parse_watermark("kgw:gamma=0.3,delta=0.5").sampler
    seeds = NUMPY.u64([1, 2**63 + 5, 77])
    direct = sampler.seed_mask(NUMPY, seeds, 300)
    assert sampler.mask_bias == 0.5
    assert np.array_equal(direct, Sampler.seed_mask(sampler, NUMPY, seeds, 300))
    assert np.array_equal(sampler.seed_table(NUMPY, seeds, 300, 300), np.where(direct, 0.5, 0.0))
    assert 0.2 < direct.mean() < 0.4
