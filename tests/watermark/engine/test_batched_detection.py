"""Batched detection (``detect_many`` / ``prefix_p_values_many``) equals the single-text
methods bit for bit, on random ragged batches (empty texts, texts shorter than the context,
repeated contexts), for every native configuration on both backends and for the schemes that
use the base class's loop; the segment-aware repeat mask equals the per-text one."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np
import pytest

from evalrun._util.errors import EvalrunError
from evalrun.kernels.backend import NUMPY, TorchOps
from evalrun.kernels.token_stats import first_occurrence
from evalrun.watermark.base import Detection
from evalrun.watermark.registry import parse_watermark

KEY = "batch-key"


def _bits(x: Any) -> Any:
    """Floats as their IEEE bit patterns (``==`` would equate 0.0 and -0.0)."""
    if isinstance(x, float):
        return struct.pack("<d", x)
    if isinstance(x, dict):
        return {k: _bits(v) for k, v in x.items()}
    return x


def _same(a: Detection, b: Detection) -> bool:
    return _bits(a.as_json()) == _bits(b.as_json()) and type(a.num_tokens_scored) is type(
        b.num_tokens_scored)


def _ragged(rng: np.random.Generator, vocab: int, count: int, max_len: int) -> list[list[int]]:
    """Texts of lengths 0..max_len; half of them from a tiny alphabet (repeated contexts)."""
    out = []
    for i in range(count):
        alphabet = vocab if i % 2 else min(vocab, 4)
        out.append(rng.integers(0, alphabet, size=int(rng.integers(0, max_len + 1))).tolist())
    return out


NATIVE = [
    "kgw:gamma=0.25,delta=2",
    "kgw:gamma=0.5,randomness=minhash,context=3,skip=0.2",
    "kgw:context=3,repeats=count",
    "kgw:context=2,skip=0.3",
    "exp",
    "exp:context=2,repeats=count",
    "exp:randomness=minhash,context=2,skip=0.1",
    "binary",
    "binary:randomness=minhash,context=2,repeats=count",
    "its:permutations=20",
    "its:context=2,skip=0.1,permutations=10,repeats=count",
    "kgw:randomness=fixed,key_len=16,permutations=10",
    "exp:randomness=fixed,key_len=8,permutations=10",
    "its:randomness=fixed,key_len=8,score=edit,permutations=5",
    "kgw:randomness=fixed,key_len=8,skip=0.3,score=edit,permutations=6",
    "exp:randomness=fixed,key_len=5,score=edit,psi=0.25,permutations=4",
    "binary:randomness=fixed,key_len=6,permutations=7",
]
FIXED = [s for s in NATIVE if "randomness=fixed" in s]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("spec", NATIVE)
def test_native_batches_equal_single_texts(spec: str, backend: str) -> None:
    scheme = parse_watermark(spec)
    rng = np.random.default_rng(zlib.crc32(f"{spec}/{backend}".encode()))
    for vocab, count, max_len in [(50, 17, 30), (1000, 5, 60), (3, 9, 8)]:
        texts = _ragged(rng, vocab, count, max_len)
        many = scheme.detect_many(texts, KEY, vocab, backend=backend)
        assert len(many) == len(texts)
        for ids, det in zip(texts, many):
            assert _same(det, scheme.detect(ids, KEY, vocab, backend=backend)), (spec, ids)
        prefixes = scheme.prefix_p_values_many(texts, KEY, vocab, backend=backend)
        for ids, p in zip(texts, prefixes):
            want = scheme.prefix_p_values(ids, KEY, vocab, backend=backend)
            assert p.dtype == want.dtype and p.tobytes() == want.tobytes(), (spec, ids)


def test_native_batches_split_into_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches larger than one pass (and single texts larger than a pass) give the same
    results as one pass."""
    import evalrun.watermark.engine.detection as detection

    rng = np.random.default_rng(7)
    texts = _ragged(rng, 200, 40, 50) + [rng.integers(0, 200, 300).tolist()]
    for spec in ("kgw", "exp:context=2", "binary"):
        scheme = parse_watermark(spec)
        whole = scheme.detect_many(texts, KEY, 200)
        monkeypatch.setattr(detection, "BATCH_ELEMENTS", 64)
        split = scheme.detect_many(texts, KEY, 200)
        monkeypatch.undo()
        assert all(_same(a, b) for a, b in zip(whole, split))


@pytest.mark.parametrize("spec", FIXED)
def test_fixed_key_batches_on_torch_equal_numpy(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed-key texts batched on torch (padded to the longest, a chunk of null keys at a
    time, :meth:`_fixed_many`) give what numpy gives text by text (the compiled kernel where
    built), bit for bit; also in passes of one or two texts and chunks of one key, and with
    the accelerator's ordered prefix sums (one add per step) in place of torch's own."""
    import evalrun.watermark.engine.detection as detection
    from evalrun.kernels import backend

    scheme = parse_watermark(spec)
    rng = np.random.default_rng(zlib.crc32(spec.encode()))
    texts = _ragged(rng, 300, 9, 40) + [[7], rng.integers(0, 300, 70).tolist()]
    want = [scheme.detect(ids, KEY, 300, backend="numpy") for ids in texts]
    want_p = [scheme.prefix_p_values(ids, KEY, 300, backend="numpy") for ids in texts]

    def check() -> None:
        got = scheme.detect_many(texts, KEY, 300, backend="torch")
        assert all(_same(a, b) for a, b in zip(got, want)), spec
        got_p = scheme.prefix_p_values_many(texts, KEY, 300, backend="torch")
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got_p, want_p)), spec

    check()
    monkeypatch.setattr(backend.TorchOps, "ordered_cumsum",
                        lambda self, x, axis: backend.ordered_cumsum_steps(x, axis))
    check()
    monkeypatch.setattr(detection, "CHUNK_ELEMENTS", 64)
    monkeypatch.setattr(detection, "CHUNK_DP", 64)
    check()


def test_ordered_cumsum_steps_is_numpys_cumsum() -> None:
    """The accelerator's prefix sums, one add per step: numpy's bits along any axis (run on
    the CPU here; the adds are IEEE additions on every device)."""
    import torch

    from evalrun.kernels.backend import ordered_cumsum_steps

    x = np.random.default_rng(23).normal(scale=1e3, size=(3, 41, 7)) ** 3
    for axis in (0, 1, 2, -1):
        got = ordered_cumsum_steps(torch.from_numpy(x), axis).numpy()
        assert got.tobytes() == np.cumsum(x, axis=axis).tobytes()
    one = torch.from_numpy(x[:, :1])
    assert torch.equal(ordered_cumsum_steps(one, 1), one)


def test_chunks_grow_off_the_cpu() -> None:
    """Null-key chunks and text passes are DEVICE_SCALE times larger on an accelerator, less
    where its free memory would not hold PEAK_ARRAYS of them."""
    import evalrun.watermark.engine.detection as detection

    class Device:
        type = "cuda"

    class OnDevice:
        device = Device()

    assert detection._scale(NUMPY) == detection._scale(TorchOps()) == 1
    assert detection._scale(OnDevice()) == detection.DEVICE_SCALE  # type: ignore[arg-type]  # duck-typed ops

    class Cuda:  # a device whose free memory torch reports
        def __init__(self, free: int) -> None:
            self.free = free

        def mem_get_info(self, device: object) -> tuple[int, int]:
            return self.free, 2 * self.free

    class Torch:
        def __init__(self, free: int) -> None:
            self.cuda = Cuda(free)

    chunk_bytes = detection.CHUNK_ELEMENTS * 8 * detection.PEAK_ARRAYS
    for free, scale in [(100 * 2**30, detection.DEVICE_SCALE), (5 * chunk_bytes + 1, 5), (10, 1)]:
        ops = OnDevice()
        ops.torch = Torch(free)  # type: ignore[attr-defined]  # duck-typed ops
        assert detection._scale(ops) == scale  # type: ignore[arg-type]  # duck-typed ops


def test_native_batches_accept_arrays_and_tensors() -> None:
    import torch

    rng = np.random.default_rng(3)
    texts = [rng.integers(0, 100, n) for n in (0, 1, 5, 40)]
    scheme = parse_watermark("kgw")
    want = scheme.detect_many([t.tolist() for t in texts], KEY, 100)
    for form in (texts, [torch.as_tensor(t) for t in texts]):
        assert all(_same(a, b) for a, b in zip(scheme.detect_many(form, KEY, 100), want))
    assert scheme.detect_many([], KEY, 100) == []
    assert scheme.prefix_p_values_many([], KEY, 100) == []


def test_native_batches_reject_what_detect_rejects() -> None:
    scheme = parse_watermark("kgw")
    with pytest.raises(EvalrunError, match="token id 100 at position 2"):
        scheme.detect_many([[1, 2], [3, 4, 100]], KEY, 100)
    with pytest.raises(EvalrunError, match="vocab size"):
        scheme.detect_many([[0]], KEY, 1)


@pytest.mark.parametrize("spec,key", [
    ("unigram:gamma=0.5", KEY),
    ("waterfall:k_p=1,kappa=2", "7"),
    ("synthid", "654,400,836,123,340,443,597,160,57"),
])
def test_default_batches_loop_over_detect(spec: str, key: str) -> None:
    scheme = parse_watermark(spec)
    rng = np.random.default_rng(11)
    texts = _ragged(rng, 300, 6, 40)
    for ids, det in zip(texts, scheme.detect_many(texts, key, 300)):
        assert _same(det, scheme.detect(ids, key, 300))
    for ids, p in zip(texts, scheme.prefix_p_values_many(texts, key, 300)):
        assert np.array_equal(p, scheme.prefix_p_values(ids, key, 300))


@pytest.mark.parametrize("ops", [NUMPY, TorchOps()], ids=lambda o: o.name)
def test_segment_aware_first_occurrence(ops: Any) -> None:
    """Repeats count within a segment only; on numpy the 1-D path (unstable sort) and the
    stable-sort path agree."""
    rng = np.random.default_rng(5)
    for _ in range(30):
        lengths = rng.integers(0, 12, size=int(rng.integers(1, 8)))
        words = [rng.integers(0, 4, n).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
                 for n in lengths]
        flat = np.concatenate(words)
        seg = np.repeat(np.arange(len(lengths)), lengths)
        got = ops.to_numpy(first_occurrence(ops, ops.u64(flat), ops.i64(seg)))
        want = np.concatenate([np.asarray(ops.to_numpy(first_occurrence(ops, ops.u64(w))), bool)
                               for w in words]) if len(flat) else np.zeros(0, bool)
        assert got.tolist() == want.tolist()
        # without segments: the whole array is one text (2-D input takes the stable path)
        one = ops.to_numpy(first_occurrence(ops, ops.u64(flat)))
        two = ops.to_numpy(first_occurrence(ops, ops.u64(flat)[None, :]))[0] if len(flat) else one
        assert one.tolist() == two.tolist()
        if ops is NUMPY:  # a caller's sort, equal words in any order among them, saves one
            order = np.lexsort((rng.random(len(flat)), flat))
            given = first_occurrence(ops, flat, seg, order=order)
            assert given.tolist() == got.tolist()
