"""The Fisher-Yates trace (kernels/fisher_yates.py and its compiled twin) against
``torch.randperm``, and the two implementations against each other."""

from __future__ import annotations

import shutil
import sysconfig

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from evalrun.kernels import fisher_yates  # noqa: E402
from evalrun.kernels.fisher_yates import compiled_available, traced_members  # noqa: E402

needs_compiled = pytest.mark.skipif(not compiled_available(),
                                    reason="the compiled kernel was not built with this install")
KERNELS = [pytest.param(True, marks=needs_compiled, id="compiled"),
           pytest.param(False, id="numpy")]


def fisher_yates_members(seeds: list[int], targets: list[np.ndarray], n: int, size: int,
                         **kwargs) -> list[np.ndarray]:
    """:func:`traced_members` per seed: ``targets[k]`` are asked about ``seeds[k]``."""
    counts = [len(t) for t in targets]
    flat = np.concatenate([np.asarray(t, dtype=np.int64) for t in targets]) if sum(counts) \
        else np.zeros(0, dtype=np.int64)
    flags = traced_members(np.repeat(np.asarray(seeds, dtype=np.uint64), counts), flat, n, size,
                           **kwargs)
    return np.split(flags, np.cumsum(counts)[:-1])


def _randperm_green(seed: int, n: int, size: int) -> np.ndarray:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    return torch.randperm(n, device="cpu", generator=gen)[:size].numpy()


@pytest.mark.parametrize("compiled", KERNELS)
@pytest.mark.parametrize("n,size", [(1, 0), (1, 1), (2, 1), (3, 2), (10, 2), (10, 9), (10, 10),
                                    (257, 64), (1000, 250), (1000, 999), (32000, 8000),
                                    (50257, 12564)])
def test_trace_equals_randperm(n: int, size: int, compiled: bool) -> None:
    rng = np.random.default_rng(n + size)
    seeds = [0, 1, 2**32 - 1] + rng.integers(0, 2**32, 37).tolist()
    targets = []
    for k in range(len(seeds)):
        # every target of small vocabularies; else random ids and the step boundaries
        want = np.arange(n) if n <= 257 else np.concatenate(
            [rng.integers(0, n, 1 + k % 9), [0, max(size - 1, 0), min(size, n - 1), n - 1]])
        targets.append(want)
    got = fisher_yates_members(seeds, targets, n, size, compiled=compiled)
    for seed, want, flags in zip(seeds, targets, got):
        assert flags.dtype == bool
        assert np.array_equal(flags, np.isin(want, _randperm_green(seed, n, size)))


@pytest.mark.parametrize("compiled", KERNELS)
def test_targets_outside_the_vocabulary_are_never_members(compiled: bool) -> None:
    got = fisher_yates_members([7, 7], [np.array([-1, 10, 2**40]), np.array([])], 10, 10,
                               compiled=compiled)
    assert got[0].tolist() == [False, False, False] and got[1].tolist() == []


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 2000), frac=st.floats(0, 1), data=st.data())
@example(n=2, frac=1.0, data=None)  # the last step has span 1
def test_compiled_equals_numpy(n: int, frac: float, data) -> None:
    """Lane packing (any pair count, not a multiple of eight), repeated seeds, targets in and
    out of range and at every step boundary give the same flags in both implementations."""
    size = min(n, int(n * frac))
    if data is None:
        seeds, targets = [5, 5, 9], [np.array([0, 1]), np.array([1]), np.array([0, 1, 2])]
    else:
        k = data.draw(st.integers(1, 21))
        seeds = data.draw(st.lists(st.integers(0, 2**32 - 1), min_size=k, max_size=k))
        targets = [np.array(data.draw(st.lists(st.integers(-2, n + 2), max_size=5)),
                            dtype=np.int64) for _ in range(k)]
    fast = fisher_yates_members(seeds, targets, n, size, compiled=True)
    slow = fisher_yates_members(seeds, targets, n, size, compiled=False)
    assert [f.tolist() for f in fast] == [s.tolist() for s in slow]


@needs_compiled
# the last block of draws twists only the state words it reads: 851 = 624 + 227 and 852
# stop on either side of the twist's wrap point (227 = 624 - 397), 1248 ends on a whole block
@pytest.mark.parametrize("n,size", [(3, 3), (10, 9), (257, 64), (1000, 999), (1000, 851),
                                    (1000, 852), (2000, 1248), (32000, 8000), (50257, 12564)])
def test_both_compiled_builds_equal_randperm(n: int, size: int) -> None:
    """The portable vector build (what CPUs without AVX2 run) and the build picked on this CPU
    (AVX2 where it has it; its chunk filter differs) give torch's flags, for pair counts that
    leave lanes empty and targets at the step boundaries."""
    from evalrun.kernels import _fisher_yates

    rng = np.random.default_rng(n)
    pairs = 203
    seeds = rng.integers(0, 2**32, pairs, dtype=np.uint64).astype(np.uint32)
    targets = np.concatenate([[0, max(size - 1, 0), n - 1],
                              rng.integers(0, n, pairs - 3)]).astype(np.uint32)
    want = np.array([t in _randperm_green(int(s), n, size) for s, t in zip(seeds, targets)])
    for portable in (False, True):
        flags = np.full(pairs, 7, dtype=np.uint8)
        _fisher_yates.trace(seeds, targets, flags, n, size, portable=portable)
        assert np.array_equal(flags, want.astype(np.uint8)), f"portable={portable}"


@needs_compiled
@pytest.mark.parametrize("portable", [False, True], ids=["picked", "portable"])
@pytest.mark.parametrize("n,size,green", [(4000, 2000, 0.9), (997, 500, 0.5), (5000, 1300, 0.05)])
def test_lanes_settled_early_make_room(portable: bool, n: int, size: int, green: float) -> None:
    """Pairs settled early (most targets green) empty their lanes, and the lanes still running
    are moved together block after block, generators and all: every pair still gets the
    membership read off its permutation prefix (``randperm``, itself checked against torch),
    over several cohorts of groups and a last partial one."""
    from evalrun.kernels import _fisher_yates

    rng = np.random.default_rng(n)
    pairs = 16 * 8 * 3 + 45
    seeds = rng.integers(0, 2**32, pairs, dtype=np.uint64).astype(np.uint32)
    prefixes = np.zeros((pairs, size), dtype=np.uint32)
    _fisher_yates.randperm(seeds, prefixes, n, size)
    inside = prefixes[np.arange(pairs), rng.integers(0, size, pairs)]
    anywhere = rng.integers(0, n, pairs)
    targets = np.where(rng.random(pairs) < green, inside, anywhere).astype(np.uint32)
    want = np.array([t in row for t, row in zip(targets, prefixes)], dtype=np.uint8)
    flags = np.full(pairs, 7, dtype=np.uint8)
    _fisher_yates.trace(seeds, targets, flags, n, size, portable=portable)
    assert np.array_equal(flags, want)


@needs_compiled
def test_compiled_kernel_rejects_bad_buffers() -> None:
    """The extension checks what it is handed instead of reading past a buffer."""
    from evalrun.kernels import _fisher_yates

    seeds = np.zeros(3, dtype=np.uint32)
    out = np.zeros(3, dtype=np.uint8)
    with pytest.raises(ValueError, match="same number of items"):
        _fisher_yates.trace(seeds, np.zeros(2, dtype=np.uint32), out, 10, 5)
    with pytest.raises(ValueError, match="same number of items"):
        _fisher_yates.trace(seeds, seeds, np.zeros(2, dtype=np.uint8), 10, 5)
    with pytest.raises(ValueError, match="whole number of uint32"):
        _fisher_yates.trace(b"\0" * 5, b"\0" * 5, bytearray(1), 10, 5)
    with pytest.raises(ValueError, match="0 <= size <= n"):
        _fisher_yates.trace(seeds, seeds, out, 10, 11)
    with pytest.raises(ValueError, match="1 <= n"):
        _fisher_yates.trace(seeds, seeds, out, 0, 0)
    with pytest.raises(TypeError):
        _fisher_yates.trace(seeds, seeds, b"\0\0\0", 10, 5)  # out must be writable


def test_bad_arguments_name_the_problem(monkeypatch) -> None:
    with pytest.raises(ValueError, match="size=11 exceeds n=10"):
        fisher_yates_members([1], [np.array([0])], 10, 11)
    with pytest.raises(ValueError, match="build it instead"):
        fisher_yates_members([1], [np.array([0])], 2**32 // 20, 5)
    monkeypatch.setattr(fisher_yates, "_compiled", None)
    with pytest.raises(RuntimeError, match="C compiler"):
        fisher_yates_members([1], [np.array([0])], 10, 5, compiled=True)
    # without the kernel the default is the numpy trace, with the same answer
    assert fisher_yates_members([1], [np.arange(10)], 10, 5)[0].sum() == 5


@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")) or
                    not sysconfig.get_paths().get("include"),
                    reason="no C compiler here: the install skips the optional kernel")
def test_the_kernel_is_built_where_a_compiler_is() -> None:
    """The extension is optional in setup.py, so a failed build would only show as slowness;
    where a compiler exists (CI), the install must have built it."""
    assert compiled_available()


@needs_compiled
@pytest.mark.parametrize("n,size", [(1, 0), (1, 1), (2, 2), (10, 3), (10, 10), (257, 64),
                                    (1000, 851), (1000, 852), (2000, 1248), (32000, 8000),
                                    (32000, 32000), (50257, 12564)])
def test_randperm_prefixes_equal_torch(n: int, size: int) -> None:
    """Whole prefixes, any number of seeds per call (lanes of eight and a remainder)."""
    seeds = np.array([0, 1, 2**32 - 1, 2971215073] + list(range(5, 16)), dtype=np.uint32)
    got = fisher_yates.randperm_prefixes(seeds, n, size)
    assert got.shape == (len(seeds), size) and got.dtype == np.int64
    for seed, row in zip(seeds.tolist(), got):
        assert np.array_equal(row, _randperm_green(seed, n, size))


@needs_compiled
def test_randperm_rejects_bad_buffers() -> None:
    from evalrun.kernels import _fisher_yates

    seeds = np.zeros(2, dtype=np.uint32)
    with pytest.raises(ValueError, match="len\\(seeds\\) \\* size \\* 4 bytes"):
        _fisher_yates.randperm(seeds, np.zeros(5, dtype=np.uint32), 10, 3)
    with pytest.raises(ValueError, match="ceil\\(n / 8\\)"):
        _fisher_yates.green_bits(seeds, np.zeros(3, dtype=np.uint8), 10, 3)
    with pytest.raises(ValueError, match="0 <= size <= n"):
        _fisher_yates.randperm(seeds, np.zeros(22, dtype=np.uint32), 10, 11)


@needs_compiled
@pytest.mark.parametrize("n,size", [(1, 1), (9, 4), (10, 10), (32000, 8000), (50257, 12564)])
def test_packed_prefix_masks_equal_packbits_of_torch(n: int, size: int) -> None:
    seeds = np.arange(11, dtype=np.uint32) * 977
    got = fisher_yates.packed_prefix_masks(seeds, n, size)
    assert got.shape == (len(seeds), (n + 7) // 8) and got.dtype == np.uint8
    for seed, row in zip(seeds.tolist(), got):
        mask = np.zeros(n, dtype=bool)
        mask[_randperm_green(seed, n, size)] = True
        assert np.array_equal(row, np.packbits(mask))
