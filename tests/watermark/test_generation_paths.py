"""The processors' fast generation path (memoised per-seed tables, one step for the whole
batch) against the schemes' definitions written out row by row in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evalrun.kernels.backend import NUMPY
from evalrun.kernels.hashing import code, feistel_rank, pair, uniform
from evalrun.kernels.green import is_green
from evalrun.kernels.stats import bit_uniforms, its_uniform
from evalrun.watermark.binary import huffman_tree
from evalrun.watermark.randomness import derive_key
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.seed_tables import seed_tables

V = 500
KEY = "paths-key"
ops = NUMPY


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def _exp_token(seed: int, logits: np.ndarray, tau: float) -> int:
    r = uniform(ops, pair(ops, ops.u64([seed]), code(ops, ops.arange(V))))
    p = _softmax(logits / tau)
    return int(np.argmax(np.where(p > 0, np.log(r) / np.where(p > 0, p, 1.0), -np.inf)))


def _its_token(seed: int, logits: np.ndarray, tau: float) -> int:
    p = _softmax(logits / tau)
    ranks = feistel_rank(ops, ops.u64([seed]), ops.arange(V), V).astype(np.int64)
    by_rank = np.empty(V, dtype=np.int64)
    by_rank[ranks] = np.arange(V)
    cdf = np.cumsum(p[by_rank])
    u = float(its_uniform(ops, ops.u64([seed]))[0])
    return int(by_rank[min(int(np.sum(cdf < u)), V - 1)])


def _binary_token(seed: int, logits: np.ndarray, tau: float) -> int:
    tree = huffman_tree(V)
    p = _softmax(logits / tau)

    def mass(ref: int) -> float:  # probability of a subtree, summed leaf by leaf
        if ref < 0:
            return float(p[-ref - 1])
        return float(p[tree.leaf_order[tree.lo[ref]:tree.hi[ref]]].sum())

    node = tree.root
    while True:
        total = mass(node)
        p0 = mass(int(tree.left[node])) / total if total > 0 else 0.5
        u = float(bit_uniforms(ops, ops.u64([seed]), ops.i64([node]))[0])
        child = int(tree.right[node] if u >= p0 else tree.left[node])
        if child < 0:
            return -child - 1
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
        for b in range(64):
            if skipped[b]:
                assert tokens[b] == -1
                assert torch.equal(scores[b], logits[b] / tau)
            else:
                assert tokens[b] == oracle(int(seeds[b]), logits[b].double().numpy(), tau), b
        assert (scores is None) == (not skipped.any())
        # the transformers contract: one-hot scores where the scheme chose
        out = scheme.logits_processor(KEY, V, temperature=tau, seed=11)(ids, logits)
        for b in range(64):
            if tokens[b] >= 0:
                assert out[b, tokens[b]] == 0 and torch.isinf(out[b]).sum() == V - 1
            else:
                assert torch.equal(out[b], scores[b])
    assert seed_tables().stats.hits > 0


@pytest.mark.parametrize("spec", ["kgw:gamma=0.3,delta=1.5", "kgw:randomness=minhash,context=2,skip=0.4"])
def test_green_list_scores_are_the_defined_bias(spec: str) -> None:
    scheme = parse_watermark(spec)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, V, (16, 4), generator=g)
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


def test_greedy_decoding_of_choosing_schemes_is_unwatermarked() -> None:
    proc = parse_watermark("exp").logits_processor(KEY, V, temperature=0.0, seed=0)
    logits = torch.randn(3, V)
    scores, tokens = proc.choose(torch.zeros(3, 2, dtype=torch.long), logits)
    assert tokens is None and torch.equal(scores, logits)


def test_reused_score_buffers_give_the_same_scores_and_never_leak_to_callers() -> None:
    proc = parse_watermark("kgw").logits_processor(KEY, V, temperature=0.9, seed=0)
    ids = torch.randint(0, V, (4, 3), generator=torch.Generator().manual_seed(5))
    logits = torch.randn(4, V, generator=torch.Generator().manual_seed(6))
    first, _ = proc.choose(ids, logits, reuse=True)
    kept = first.clone()
    second, _ = proc.choose(ids, logits * 2, reuse=True)
    assert second is first  # one buffer, overwritten by the next call
    assert torch.equal(proc.choose(ids, logits)[0], kept)
    fresh = proc(ids, logits)
    assert fresh is not proc.choose(ids, logits, reuse=True)[0] and torch.equal(fresh, kept)
