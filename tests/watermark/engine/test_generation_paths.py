"""The processors' fast generation path (memoised per-seed tables, one step for the whole
batch) against the schemes' definitions written out row by row in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evalrun.kernels import vocab_rows
from evalrun.kernels.backend import NUMPY
from evalrun.kernels.green import is_green
from evalrun.kernels.keyed_hash import code, feistel_rank, pair, uniform
from evalrun.kernels.token_stats import bit_uniforms, its_uniform
from evalrun.testing.float_drift import clear_of, float32_bound, float64_bound
from evalrun.watermark.engine.randomness import derive_key
from evalrun.watermark.engine.seed_tables import seed_tables
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes.binary import huffman_tree

V = 500
KEY = "paths-key"
ops = NUMPY


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


# Each oracle returns the token and the margin of its decision as a fraction of the quantity
# compared (exp: the gap of the two best scores; its: the draw's distance to its CDF
# interval's edges; binary: the smallest distance of a bit's draw to its split). The processors
# compute in float32 or float64, so the test compares tokens only where that margin exceeds
# the worst-case float bound of their own softmax and V-term sums (docs/reproducibility.md).
def _exp_token(seed: int, logits: np.ndarray, tau: float) -> tuple[int, float]:
    r = uniform(ops, pair(ops, ops.u64([seed]), code(ops, ops.arange(V))))
    p = _softmax(logits / tau)
    vals = np.where(p > 0, np.log(r) / np.where(p > 0, p, 1.0), -np.inf)
    best, second = np.sort(vals)[-2:][::-1]
    return int(np.argmax(vals)), float((best - second) / abs(best))


def _its_token(seed: int, logits: np.ndarray, tau: float) -> tuple[int, float]:
    p = _softmax(logits / tau)
    ranks = feistel_rank(ops, ops.u64([seed]), ops.arange(V), V).astype(np.int64)
    by_rank = np.empty(V, dtype=np.int64)
    by_rank[ranks] = np.arange(V)
    cdf = np.cumsum(p[by_rank])
    u = float(its_uniform(ops, ops.u64([seed]))[0])
    k = min(int(np.sum(cdf < u)), V - 1)
    return int(by_rank[k]), float(min(u - (cdf[k - 1] if k else 0.0), cdf[k] - u))


def _binary_token(seed: int, logits: np.ndarray, tau: float) -> tuple[int, float]:
    tree = huffman_tree(V)
    p = _softmax(logits / tau)

    def mass(ref: int) -> float:  # probability of a subtree, summed leaf by leaf
        if ref < 0:
            return float(p[-ref - 1])
        return float(p[tree.leaf_order[tree.lo[ref]:tree.hi[ref]]].sum())

    node, margin = tree.root, 1.0
    while True:
        total = mass(node)
        p0 = mass(int(tree.left[node])) / total if total > 0 else 0.5
        u = float(bit_uniforms(ops, ops.u64([seed]), ops.i64([node]))[0])
        margin = min(margin, abs(u - p0))
        child = int(tree.right[node] if u >= p0 else tree.left[node])
        if child < 0:
            return -child - 1, margin
        node = child


ORACLES = {"exp": _exp_token, "its": _its_token, "binary": _binary_token}


def _seeds(scheme, ids: torch.Tensor, proc) -> tuple[np.ndarray, np.ndarray]:
    r = scheme.randomness
    seeds = r.generation_seeds(ops, derive_key(KEY), ids.numpy(), 0, proc._offsets)
    return seeds, np.asarray(r.skipped(ops, seeds))


@pytest.mark.parametrize("spec", ["exp", "its", "binary", "exp:randomness=minhash,context=3,skip=0.3",
                                  "its:randomness=fixed,key_len=16,skip=0.2", "binary:context=2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_choosing_schemes_pick_the_defined_token(spec: str, dtype: torch.dtype) -> None:
    scheme = parse_watermark(spec)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, V, (64, 5), generator=g)
    logits = (torch.randn(64, V, generator=g, dtype=torch.float64) * 2.5).to(dtype)
    tau = 0.8
    for attempt in range(2):  # cold cache, then every row from the cache
        if attempt == 0:
            seed_tables().clear()
        proc = scheme.logits_processor(KEY, V, temperature=tau, seed=11)
        scores, tokens = proc.choose(ids, logits)
        seeds, skipped = _seeds(scheme, ids, proc)
        oracle = ORACLES[scheme.sampler.name]
        bound = float32_bound(1.0, roundoffs=V) if dtype == torch.float32 else float64_bound(1.0, roundoffs=V)
        compared = 0
        for b in range(64):
            if skipped[b]:
                assert tokens[b] == -1
                assert torch.equal(scores[b], logits[b] / tau)
            else:
                token, margin = oracle(int(seeds[b]), logits[b].double().numpy(), tau)
                if clear_of(margin, 0.0, bound):
                    assert tokens[b] == token, b
                    compared += 1
        assert compared >= 0.9 * (64 - skipped.sum())
        assert (scores is None) == (not skipped.any())
        # the transformers contract: one-hot scores where the scheme chose
        out = scheme.logits_processor(KEY, V, temperature=tau, seed=11)(ids, logits)
        for b in range(64):
            if tokens[b] >= 0:
                assert out[b, tokens[b]] == 0 and torch.isinf(out[b]).sum() == V - 1
            else:
                assert torch.equal(out[b], scores[b])
    # binary hashes the nodes its walk visits, and float32 host scores go through the
    # compiled vocabulary kernel: neither keeps table rows
    tableless = scheme.sampler.name == "binary" or (
        dtype == torch.float32 and vocab_rows.compiled_available())
    assert tableless or seed_tables().stats.hits > 0


@pytest.mark.parametrize("spec", ["kgw:gamma=0.3,delta=1.5", "kgw:skip=0.3,delta=0.1",
                                  "kgw:randomness=minhash,context=2,skip=0.4"])
@pytest.mark.parametrize("history", [4, 0])
def test_green_list_scores_are_the_defined_bias(spec: str, history: int) -> None:
    """One-token contexts go through the dense mask table, longer ones through per-seed
    rows; an empty history is seeded by the padding context."""
    scheme = parse_watermark(spec)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, V, (16, history), generator=g)
    logits = torch.randn(16, V + 12, generator=g)  # padded vocabulary columns are biased too
    for tau in (0.0, 0.7):
        proc = scheme.logits_processor(KEY, V, temperature=tau, seed=0)
        scores, tokens = proc.choose(ids, logits)
        assert tokens is None
        seeds, skipped = _seeds(scheme, ids, proc)
        green = is_green(ops, seeds[:, None], ops.arange(V + 12)[None, :], scheme.sampler.gamma)
        bias = np.where(green & ~skipped[:, None], np.float32(scheme.sampler.delta), np.float32(0))
        expected = logits + torch.from_numpy(bias)
        if tau:
            expected = expected / tau
        assert torch.equal(scores, expected)


@pytest.mark.parametrize("spec,key", [("kgw:delta=1.25", KEY),
                                      ("kgw:seeding=lefthash", "15485863")])
def test_dense_mask_tables_give_the_per_seed_rows_result(spec: str, key: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The dense table of one-token contexts and the per-seed rows it replaces give the same
    scores, also for previous tokens outside the table (ids past the score columns) and when
    the table would not fit the budget."""
    from evalrun.watermark.engine import seed_tables as st

    monkeypatch.setattr(vocab_rows, "_compiled", None)  # per-seed rows, not the tableless kernel
    scheme = parse_watermark(spec)
    ids = torch.randint(0, V, (12, 3), generator=torch.Generator().manual_seed(21))
    logits = torch.randn(12, V + 3, generator=torch.Generator().manual_seed(22)) * 2
    monkeypatch.setattr(st, "_CACHE", st.SeedTableCache(64 << 20))
    dense = scheme.logits_processor(key, V, temperature=0.7, seed=0).choose(ids, logits)[0]
    assert len(st.seed_tables()._dense) == 1
    # a budget too small for the table: per-seed rows
    monkeypatch.setattr(st, "_CACHE", st.SeedTableCache(4 * (V + 3) * ((V + 10) // 8) - 1))
    rows = scheme.logits_processor(key, V, temperature=0.7, seed=0).choose(ids, logits)[0]
    assert len(st.seed_tables()._dense) == 0 and len(st.seed_tables()) > 0
    assert torch.equal(dense, rows)
    # a previous token past the score columns has no table row: per-seed rows for the step
    outside = ids.clone()
    outside[3, -1] = V + 50
    monkeypatch.setattr(st, "_CACHE", st.SeedTableCache(64 << 20))
    got = scheme.logits_processor(key, V + 60, temperature=0.7, seed=0).choose(outside, logits)[0]
    monkeypatch.setattr(st, "_CACHE", st.SeedTableCache(0))
    want = scheme.logits_processor(key, V + 60, temperature=0.7, seed=0).choose(outside, logits)[0]
    assert torch.equal(got, want)


def test_its_takes_the_last_positive_rank_when_rounding_leaves_the_cdf_under_u(
        monkeypatch: pytest.MonkeyPatch) -> None:
    scheme = parse_watermark("its")
    ids = torch.randint(0, V, (5, 2), generator=torch.Generator().manual_seed(30))
    logits = torch.randn(5, V, generator=torch.Generator().manual_seed(31))
    logits[:, V // 2:] = float("-inf")  # half the vocabulary has no mass
    monkeypatch.setattr(type(scheme.sampler), "_uniforms",
                        lambda self, hash_ops, words: [1.5] * len(words))  # past every cdf
    proc = scheme.logits_processor(KEY, V, temperature=1.0, seed=0)
    _, tokens = proc.choose(ids, logits)
    seeds, _ = _seeds(scheme, ids, proc)
    for b in range(5):
        ranks = feistel_rank(ops, ops.u64([int(seeds[b])]), ops.arange(V), V).astype(np.int64)
        alive = np.flatnonzero(np.isfinite(logits[b].numpy()))
        assert tokens[b] == alive[np.argmax(ranks[alive])]  # the highest rank with mass


def test_greedy_decoding_of_choosing_schemes_is_unwatermarked() -> None:
    proc = parse_watermark("exp").logits_processor(KEY, V, temperature=0.0, seed=0)
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(0))
    scores, tokens = proc.choose(torch.zeros(3, 2, dtype=torch.long), logits)
    assert tokens is None and torch.equal(scores, logits)


@pytest.mark.parametrize("spec", ["kgw", "exp", "its", "binary", "kgw:skip=0.5",
                                  "kgw:seeding=lefthash", "exp:skip=0.5"])
def test_given_up_scores_give_the_same_result_and_kept_scores_are_never_written(spec: str) -> None:
    scheme = parse_watermark(spec)
    key = "15485863" if "seeding" in spec else KEY
    ids = torch.randint(0, V, (6, 3), generator=torch.Generator().manual_seed(5))
    logits = torch.randn(6, V, generator=torch.Generator().manual_seed(6))
    kept = logits.clone()
    proc = scheme.logits_processor(key, V, temperature=0.9, seed=0)
    scores, tokens = proc.choose(ids, logits)
    assert torch.equal(logits, kept)  # reuse=False: the caller's scores are left alone
    assert torch.equal(proc(ids, logits), proc(ids, logits)) and torch.equal(logits, kept)
    given_up = logits.clone()
    scores2, tokens2 = proc.choose(ids, given_up, reuse=True)
    assert (scores is None) == (scores2 is None) and (tokens is None) == (tokens2 is None)
    if scores is not None:
        assert torch.equal(scores, scores2)
    if tokens is not None:
        assert np.array_equal(tokens, tokens2)


@pytest.mark.parametrize("spec", ["kgw", "exp", "its", "binary", "kgw:seeding=lefthash",
                                  "its:skip=0.4"])
def test_device_path_equals_the_host_path(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scores numpy cannot view (GPU tensors, bfloat16) keep their table rows on the device
    and work with torch row by row; forcing that path on CPU float32 gives the same result."""
    from evalrun.watermark.engine import processing
    from evalrun.watermark.schemes import exponential, inverse_transform, kgw_compat

    scheme = parse_watermark(spec)
    key = "15485863" if "seeding" in spec else KEY
    ids = torch.randint(0, V, (8, 3), generator=torch.Generator().manual_seed(8))
    logits = torch.randn(8, V + 4, generator=torch.Generator().manual_seed(9)) * 3
    want = scheme.logits_processor(key, V, temperature=0.8, seed=1).choose(ids, logits)
    for module in (processing, exponential, inverse_transform, kgw_compat):  # where it is looked up
        monkeypatch.setattr(module, "host_view", lambda x: None)
    seed_tables().clear()
    got = scheme.logits_processor(key, V, temperature=0.8, seed=1).choose(ids, logits)
    for a, b in zip(want, got):
        assert (a is None) == (b is None)
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b)
        elif a is not None:
            assert torch.equal(a, b)


def test_bfloat16_scores_get_the_bias_in_their_own_dtype() -> None:
    scheme = parse_watermark("kgw:gamma=0.3,delta=1.5")
    ids = torch.randint(0, V, (4, 2), generator=torch.Generator().manual_seed(10))
    logits = torch.randn(4, V, generator=torch.Generator().manual_seed(11)).to(torch.bfloat16)
    proc = scheme.logits_processor(KEY, V, temperature=1.0, seed=0)
    scores, _ = proc.choose(ids, logits)
    seeds, _ = _seeds(scheme, ids, proc)
    green = is_green(ops, seeds[:, None], ops.arange(V)[None, :], scheme.sampler.gamma)
    bias = torch.from_numpy(np.where(green, 1.5, 0.0)).to(torch.bfloat16)
    assert scores.dtype == torch.bfloat16 and torch.equal(scores, logits + bias)
