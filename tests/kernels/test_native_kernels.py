"""numpy and torch (CPU) kernels give identical results; kernels against brute force."""

from __future__ import annotations

import functools
import itertools
import operator

import numpy as np
import pytest
import torch

from evalrun.kernels import keyed_hash as H
from evalrun.kernels import seed_words as kr
from evalrun.kernels import token_stats as ks
from evalrun.kernels.align import align_prefix, edit_prefix
from evalrun.kernels.backend import NUMPY, TorchOps, get_ops, resolve_backend
from evalrun.kernels.green import green_mask, is_green
from evalrun.watermark.registry import parse_watermark

T = TorchOps()


def same(a_np: np.ndarray, a_t: torch.Tensor) -> bool:
    """Bit-for-bit equality of a numpy result and a torch result."""
    b = a_t.numpy()
    if a_np.dtype == np.uint64:
        b = b.view(np.uint64)
    return a_np.shape == b.shape and np.array_equal(a_np, b)


def test_mix64_matches_reference_splitmix() -> None:
    def ref(x: int) -> int:
        m = (1 << 64) - 1
        x ^= x >> 30
        x = (x * 0xBF58476D1CE4E5B9) & m
        x ^= x >> 27
        x = (x * 0x94D049BB133111EB) & m
        return x ^ (x >> 31)

    xs = [0, 1, 2**63, 2**64 - 1, 123456789123456789]
    got = H.mix64(NUMPY, NUMPY.u64(xs))
    assert [int(v) for v in got] == [ref(x) for x in xs]
    assert same(got, H.mix64(T, T.u64(xs)))


def test_hashing_and_randomness_identical() -> None:
    rng = np.random.default_rng(0)
    words = NUMPY.u64(rng.integers(0, 2**63, 500, dtype=np.int64)) * NUMPY.const(3)
    toks = rng.integers(0, 50_000, 500)
    assert same(H.pair(NUMPY, words, H.code(NUMPY, toks)), H.pair(T, T.u64(words), H.code(T, T.i64(toks))))
    assert same(NUMPY.to_unit(words), T.to_unit(T.u64(words)))
    ctx = rng.integers(0, 1000, (200, 3))
    key = NUMPY.u64([987654321987654321])
    assert same(kr.window_seeds(NUMPY, key, ctx), kr.window_seeds(T, T.u64(key), T.i64(ctx)))
    assert same(kr.minhash_seeds(NUMPY, key, ctx), kr.minhash_seeds(T, T.u64(key), T.i64(ctx)))
    keys = kr.null_keys(NUMPY, 42, 5)
    assert same(keys, kr.null_keys(T, 42, 5))
    assert same(kr.key_sequences(NUMPY, keys, 16), kr.key_sequences(T, T.u64(keys), 16))
    seeds = kr.key_sequences(NUMPY, keys, 16)
    assert same(kr.skip_mask(NUMPY, seeds, 0.3), kr.skip_mask(T, T.u64(seeds), 0.3))


def test_umin_is_unsigned() -> None:
    x = [[2**63 + 5, 7], [1, 2**64 - 1]]
    assert same(NUMPY.umin(NUMPY.u64(x), axis=-1), T.umin(T.u64(x), axis=-1))
    assert [int(v) for v in NUMPY.umin(NUMPY.u64(x), axis=-1)] == [7, 1]


def test_green_masks_identical_and_consistent() -> None:
    seeds = kr.null_keys(NUMPY, 7, 6)
    mask = green_mask(NUMPY, seeds, 3000, 0.25)
    assert same(mask, green_mask(T, T.u64(seeds), 3000, 0.25))
    toks = np.arange(3000)
    assert np.array_equal(mask[2], is_green(NUMPY, seeds[2], toks, 0.25))
    assert abs(mask.mean() - 0.25) < 0.02


@pytest.mark.parametrize("vocab", [2, 3, 1000, 1025, 32_000])
def test_feistel_rank_is_a_permutation_and_identical(vocab: int) -> None:
    seeds = kr.null_keys(NUMPY, vocab, 3)[:, None]
    ranks = H.feistel_rank(NUMPY, seeds, np.arange(vocab)[None, :], vocab)
    for row in ranks:
        assert np.array_equal(np.sort(row), np.arange(vocab))
    assert same(ranks, H.feistel_rank(T, T.u64(seeds), T.i64(np.arange(vocab)[None, :]), vocab))


def test_per_token_stats_identical() -> None:
    seeds = kr.null_keys(NUMPY, 3, 400)
    toks = np.random.default_rng(1).integers(0, 1000, 400)
    ts, tt = T.u64(seeds), T.i64(toks)
    assert same(ks.exp_stat(NUMPY, seeds, toks), ks.exp_stat(T, ts, tt))
    assert same(ks.its_stat(NUMPY, seeds, toks, 1000), ks.its_stat(T, ts, tt, 1000))
    words = ks.node_words(NUMPY, seeds, toks)
    bits = toks % 2 == 1
    assert same(ks.bit_stat(NUMPY, words, bits), ks.bit_stat(T, T.u64(words), torch.from_numpy(bits)))
    dup = np.array([[5, 3, 5, 9, 3, 3], [1, 1, 1, 2, 2, 0]])
    first = ks.first_occurrence(NUMPY, NUMPY.u64(dup))
    assert first.tolist() == [[True, True, False, True, False, False],
                              [True, False, False, True, False, True]]
    assert same(first, ks.first_occurrence(T, T.u64(dup)))


def test_ordered_sum_adds_left_to_right_on_both_backends() -> None:
    """Binary evidence is a sum over each token's Huffman path; library reductions associate
    differently per backend, so the kernel must add in one fixed order (issue 18)."""
    x = np.random.default_rng(18).exponential(size=(64, 13))
    expected = np.array([functools.reduce(operator.add, row.tolist()) for row in x])
    assert np.array_equal(NUMPY.ordered_sum(x), expected)
    assert same(expected, T.ordered_sum(T.f64(x)))
    assert NUMPY.ordered_sum(np.zeros((3, 0))).tolist() == [0.0, 0.0, 0.0]


def test_ordered_cumsum_is_sequential_on_both_backends() -> None:
    """Detection's prefix sums of float evidence: ``s[i] = s[i-1] + x[i]`` on every backend,
    along the last axis (sum scores) and an inner one (align scores)."""
    x = np.random.default_rng(19).normal(size=(4, 50, 6))
    last = np.array([[list(itertools.accumulate(row)) for row in block] for block in x.tolist()])
    inner = np.moveaxis(np.array([[list(itertools.accumulate(col)) for col in block.T]
                                  for block in x]), -1, -2)
    assert np.array_equal(NUMPY.ordered_cumsum(x, axis=-1), last)
    assert same(last, T.ordered_cumsum(T.f64(x), axis=-1))
    assert np.array_equal(NUMPY.ordered_cumsum(x, axis=-2), inner)
    assert same(inner, T.ordered_cumsum(T.f64(x), axis=-2))


def test_its_null_mean_is_exact() -> None:
    vocab = 7
    eta = np.arange(vocab) / (vocab - 1)
    u = (np.arange(200_000) + 0.5) / 200_000
    brute = np.mean(1 - np.abs(u[:, None] - eta[None, :]))
    assert ks.its_null_mean(vocab) == pytest.approx(brute, abs=1e-8)


def _edit_brute(m: np.ndarray, psi: float, pre: int) -> float:
    n, key_len = m.shape
    best = -np.inf
    for j in range(key_len):
        d = np.zeros((pre + 1, pre + 1))
        d[0, :] = -psi * np.arange(pre + 1)
        d[:, 0] = -psi * np.arange(pre + 1)
        for i in range(1, pre + 1):
            for k in range(1, pre + 1):
                d[i, k] = max(d[i - 1, k - 1] + m[i - 1, (j + k - 1) % key_len],
                              d[i - 1, k] - psi, d[i, k - 1] - psi)
        best = max(best, d[pre, pre])
    return best


def test_align_and_edit_against_brute_force_and_backends() -> None:
    m = np.random.default_rng(2).normal(size=(2, 9, 5))
    al, off = align_prefix(NUMPY, m)
    al_t, off_t = align_prefix(T, T.f64(m))
    assert same(al, al_t) and same(off, off_t)
    ed, _ = edit_prefix(NUMPY, m, 0.4)
    ed_t, _ = edit_prefix(T, T.f64(m), 0.4)
    assert same(ed, ed_t)
    for b in range(2):
        for pre in range(1, 10):
            brute_al = max(sum(m[b, i, (i + j) % 5] for i in range(pre)) for j in range(5))
            assert al[b, pre - 1] == pytest.approx(brute_al)
            assert ed[b, pre - 1] == pytest.approx(_edit_brute(m[b], 0.4, pre))


PARITY_SPECS = [
    "kgw:gamma=0.25,context=2,skip=0.2", "kgw:randomness=minhash,repeats=count",
    "exp:randomness=minhash,context=3", "exp:skip=0.2,repeats=count",
    "binary", "binary:context=2,skip=0.1,repeats=count", "binary:randomness=minhash",
    "its:permutations=40", "kgw:randomness=fixed,key_len=8,permutations=30",
    "exp:randomness=fixed,key_len=8,score=edit,permutations=20",
    "binary:randomness=fixed,key_len=8,permutations=20",
    "binary:randomness=fixed,key_len=6,score=edit,permutations=10",
    "its:randomness=fixed,key_len=8,permutations=20",
]


@pytest.mark.parametrize("spec", PARITY_SPECS)
def test_detection_identical_across_backends(spec: str) -> None:
    """Every p-value, per text and per prefix, has the same bits on numpy and torch: a dozen
    seeded inputs per scheme (vocabularies from 2 to 50k, short and long texts), because a
    backend difference in float summation shows on some inputs only."""
    scheme = parse_watermark(spec)
    rng = np.random.default_rng(PARITY_SPECS.index(spec))
    for i in range(12):
        vocab = int(rng.choice([2, 3, 500, 5000, 50_000]))
        tokens = rng.integers(0, vocab, int(rng.integers(0, 60))).tolist()
        key = f"k{i}"
        assert scheme.detect(tokens, key, vocab, backend="numpy") == \
            scheme.detect(tokens, key, vocab, backend="torch"), (i, vocab, tokens)
        assert np.array_equal(scheme.prefix_p_values(tokens, key, vocab, backend="numpy"),
                              scheme.prefix_p_values(tokens, key, vocab, backend="torch")), \
            (i, vocab, tokens)


@pytest.mark.parametrize("spec", ["kgw:delta=3", "exp", "its", "binary:context=2",
                                  "its:randomness=fixed,key_len=8,skip=0.3"])
def test_processors_identical_across_backends(spec: str) -> None:
    scheme = parse_watermark(spec)
    ids = torch.randint(0, 300, (4, 7), generator=torch.Generator().manual_seed(1))
    scores = torch.randn(4, 300, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    a = scheme.logits_processor("k", 300, temperature=0.8, seed=5, backend="numpy")(ids, scores)
    b = scheme.logits_processor("k", 300, temperature=0.8, seed=5, backend="torch")(ids, scores)
    assert torch.equal(a, b)


def test_backend_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALRUN_KERNELS", raising=False)
    assert resolve_backend(None, np.zeros(3)) == "numpy"
    assert resolve_backend(None, torch.zeros(3)) == "numpy"  # CPU tensors use numpy
    assert resolve_backend("torch", np.zeros(3)) == "torch"
    monkeypatch.setenv("EVALRUN_KERNELS", "torch")
    assert get_ops(None, np.zeros(3)).name == "torch"
    monkeypatch.setenv("EVALRUN_KERNELS", "cuda")
    with pytest.raises(ValueError):
        resolve_backend(None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("spec", PARITY_SPECS)
def test_gpu_detection_matches_numpy(spec: str) -> None:
    """Tokens on a GPU select the torch backend there; the bits must still be numpy's."""
    scheme = parse_watermark(spec)
    tokens = np.random.default_rng(3).integers(0, 500, 60)
    on_gpu = torch.as_tensor(tokens, device="cuda")
    assert scheme.detect(on_gpu, "k", 500) == scheme.detect(tokens.tolist(), "k", 500, backend="numpy")
    assert np.array_equal(scheme.prefix_p_values(on_gpu, "k", 500),
                          scheme.prefix_p_values(tokens.tolist(), "k", 500, backend="numpy"))


def test_a_backend_missing_an_operation_fails_at_construction() -> None:
    """Ops is abstract: a backend that forgets an override cannot be made (instead of
    returning None from deep inside a kernel)."""
    from evalrun.kernels.backend import NumpyOps, Ops

    class Incomplete(NumpyOps):
        pass

    Incomplete()  # complete through its parent
    partial = type("Partial", (Ops,), {"name": "partial", "u64": lambda self, x: x})
    with pytest.raises(TypeError, match="abstract"):
        partial()
    assert {"u64", "cumsum", "take_along", "count_true"} <= set(Ops.__abstractmethods__)
