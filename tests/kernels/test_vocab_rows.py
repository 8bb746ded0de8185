"""The compiled vocabulary kernel (kernels/vocab_rows.c) against its numpy twins
(kernels/vocab_rows.py), bit for bit, in every build of its loops this CPU runs; and the twins
against the kernels the processors used before (green_mask, feistel_rank, exp_gumbel)."""

from __future__ import annotations

import numpy as np
import pytest

from evalrun._util.threads import run_together
from evalrun.kernels import vocab_rows as vr
from evalrun.kernels.backend import NUMPY
from evalrun.kernels.green import green_mask
from evalrun.kernels.keyed_hash import feistel_rank

pytestmark = pytest.mark.skipif(not vr.compiled_available(),
                                reason="the compiled vocabulary kernel was not built with this install")


@pytest.fixture(params=vr.variants() or ["none"])
def variant(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(vr, "DEFAULT_VARIANT", request.param)
    return str(request.param)


def _seeds(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)


@pytest.mark.parametrize("vocab", [1, 7, 300, 8192, 50_257])
def test_green_lists(vocab: int, variant: str) -> None:
    rng = np.random.default_rng(vocab)
    seeds = _seeds(rng, 5)
    for gamma in (0.25, 0.5, 1e-9, 1.0):
        want = np.asarray(green_mask(NUMPY, seeds, vocab, gamma), dtype=bool)
        assert np.array_equal(vr.green_mask(seeds, vocab, gamma, compiled=True), want)
        assert np.array_equal(vr.green_mask(seeds, vocab, gamma, compiled=False), want)
        x = rng.normal(size=(5, vocab + 2)).astype(np.float32)
        x[0, 0], x[1, :1] = -0.0, -np.inf  # -0.0 + 0.0 is +0.0 in both
        a, b = x.copy(), x.copy()
        active = [True, False, True, True, True]
        vr.green_add(a, seeds, vocab, gamma, 2.0, active, compiled=True)
        vr.green_add(b, seeds, vocab, gamma, 2.0, active, compiled=False)
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
        assert np.array_equal(a[:, vocab:], x[:, vocab:])


@pytest.mark.parametrize("vocab", [2, 3, 1000, 32_768, 50_257])
def test_feistel_permutations(vocab: int, variant: str) -> None:
    seeds = _seeds(np.random.default_rng(vocab), 3)
    ranks = vr.ranks(seeds, vocab, vocab, compiled=True)
    want = np.asarray(feistel_rank(NUMPY, seeds[:, None], np.arange(vocab)[None, :], vocab))
    assert np.array_equal(ranks, want.astype(np.int64))
    inverse = vr.ranks(seeds, vocab, vocab, inverse=True, compiled=True)
    assert np.array_equal(inverse, np.argsort(want, axis=1, kind="stable"))
    assert np.array_equal(vr.ranks(seeds, vocab // 2 + 1, vocab, compiled=True),
                          want[:, :vocab // 2 + 1])


@pytest.mark.parametrize("compiled", [None, False])
def test_ranks_fill_blocks_of_a_given_array(compiled: bool | None) -> None:
    """``out=``: blocks of rows written in place (DiPmark's threads each fill their own),
    the same ranks as one call; a wrong array is refused, naming what is expected."""
    vocab = 1000
    seeds = _seeds(np.random.default_rng(7), 5)
    whole = vr.ranks(seeds, vocab, vocab, compiled=compiled)
    out = np.full((5, vocab), -1, dtype=np.int64)
    vr.ranks(seeds[:2], vocab, vocab, out=out[:2], compiled=compiled)
    vr.ranks(seeds[2:], vocab, vocab, out=out[2:], compiled=compiled)
    assert np.array_equal(out, whole)
    for bad in (np.empty((5, vocab), dtype=np.int32), np.empty((4, vocab), dtype=np.int64),
                np.empty((vocab, 5), dtype=np.int64).T):
        with pytest.raises(ValueError, match="C-contiguous int64"):
            vr.ranks(seeds, vocab, vocab, out=bad, compiled=compiled)


@pytest.mark.parametrize("vocab", [2, 5, 1000, 50_257])
def test_inverse_transform_choice(vocab: int, variant: str) -> None:
    rng = np.random.default_rng(vocab)
    seeds = _seeds(rng, 6)
    probs = rng.dirichlet(np.full(vocab, 0.05), size=6).astype(np.float32)
    probs[1] = 0.0
    probs[1, vocab - 1] = 1.0  # one token holds all the mass
    probs[2, : vocab // 2] = 0.0  # no mass early in token order
    u = rng.random(6)
    u[3] = 1.0  # above every cdf: the last rank with mass
    u[4] = 0.0
    if vocab > 2:
        probs[0] = 0.0  # no mass at all: the token at the last rank
    got = vr.its_choose(probs, seeds, u, vocab, compiled=True)
    assert np.array_equal(got, vr.its_choose(probs, seeds, u, vocab, compiled=False))
    probs[5, 0] = np.nan
    assert vr.its_choose(probs, seeds, u, vocab, compiled=True)[5] == -1


ARGMAX = [(vr.NOISE_GUMBEL, vr.COMBINE_F32), (vr.NOISE_GUMBEL, vr.COMBINE_F64_OF_F32),
          (vr.NOISE_EXP, vr.COMBINE_F64), (vr.NOISE_GUMBEL, vr.COMBINE_F64),
          (vr.NOISE_EXP, vr.COMBINE_F32)]


def _argmax_rows(rng: np.random.Generator, batch: int, width: int, dtype: type) -> np.ndarray:
    x = rng.normal(size=(batch, width))
    x[0] *= 1e-6  # flat: the noise decides
    x[1] *= 30.0  # peaked: the logits decide
    x[2] = np.round(x[2])  # many ties
    x[3, ::2] = -np.inf
    x[4] *= 1e4  # large logits: float32 rounding of the sums matters
    x[5] = -np.inf
    x[5, width // 2] = 0.0
    return x.astype(dtype)


@pytest.mark.parametrize("vocab", [1, 2, 3, 1000, 50_257])
@pytest.mark.parametrize(("noise", "combine"), ARGMAX)
def test_keyed_argmax(vocab: int, noise: int, combine: int, variant: str) -> None:
    rng = np.random.default_rng(vocab + 10 * noise + combine)
    dtype = np.float64 if combine == vr.COMBINE_F64 else np.float32
    width = vocab + 3
    x = _argmax_rows(rng, 8, width, dtype)
    seeds = _seeds(rng, 8)
    offsets = rng.normal(size=8) * 5
    got = vr.keyed_argmax(x, seeds, vocab, noise, combine, offsets, compiled=True)
    want = vr.keyed_argmax(x, seeds, vocab, noise, combine, offsets, compiled=False)
    assert np.array_equal(got, want)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize(("noise", "combine"), ARGMAX)
def test_keyed_argmax_odd_rows(noise: int, combine: int, variant: str) -> None:
    """NaN, +inf and all -inf rows take the exhaustive path: numpy's argmax (first NaN, first
    maximum) exactly."""
    rng = np.random.default_rng(7)
    dtype = np.float64 if combine == vr.COMBINE_F64 else np.float32
    x = rng.normal(size=(4, 500)).astype(dtype)
    x[0, 17] = np.nan
    x[1, [40, 41]] = np.inf
    x[2] = -np.inf
    x[3, 3] = np.nan
    x[3, 200] = np.inf
    seeds = _seeds(rng, 4)
    offsets = np.array([0.0, 1.0, 2.0, np.inf])
    got = vr.keyed_argmax(x, seeds, 500, noise, combine, offsets, compiled=True)
    assert np.array_equal(got, vr.keyed_argmax(x, seeds, 500, noise, combine, offsets, compiled=False))


def test_argument_checks() -> None:
    seeds = np.zeros(2, dtype=np.uint64)
    with pytest.raises(ValueError):
        vr.green_add(np.zeros((2, 5), dtype=np.float64), seeds, 5, 0.5, 1.0)
    with pytest.raises(ValueError):
        vr.green_add(np.zeros((2, 5), dtype=np.float32), seeds, 6, 0.5, 1.0)
    with pytest.raises(ValueError):
        vr.keyed_argmax(np.zeros((2, 5), dtype=np.float32), seeds, 5, vr.NOISE_EXP, vr.COMBINE_F64)
    with pytest.raises(ValueError):
        vr.ranks(seeds, 4, 5, inverse=True)
    with pytest.raises(ValueError, match="variant"):
        vr._compiled.green_mask(seeds, 5, 0, False, np.zeros(10, dtype=np.uint8), "no-such-build")


@pytest.mark.parametrize(("vocab", "width"), [(7, 7), (1000, 1003), (50_257, 50_257)])
def test_morphmark_transfer(vocab: int, width: int, variant: str) -> None:
    """green_products and mass_transfer against their twins and against the torch operations
    MorphMark's processor performs, NaN, infinities and negative masses included."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(width)
    p = rng.dirichlet(np.full(width, 0.3), size=4).astype(np.float32)
    p[1, 3], p[2, 5] = np.nan, np.inf
    seeds = _seeds(rng, 4)
    active = [True, False, True, True]
    got = vr.green_products(p, seeds, vocab, 0.5, active, compiled=True)
    want = vr.green_products(p, seeds, vocab, 0.5, active, compiled=False)
    for a, b in zip(got, want):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    probs, green = torch.from_numpy(p), torch.from_numpy(got[0])
    assert np.array_equal((probs * green).numpy().view(np.uint32), got[1].view(np.uint32))
    assert np.array_equal((probs * ~green).numpy().view(np.uint32), got[2].view(np.uint32))
    g_mass = np.array([0.3, 0.0, np.nan, 1.2], dtype=np.float32)
    r_mass = np.array([0.7, 1.0, 0.5, -0.1], dtype=np.float32)
    beta = np.array([0.2, 0.0, 0.5, -1e-8], dtype=np.float32)
    moved = vr.mass_transfer(p, got[0], g_mass, r_mass, beta, compiled=True)
    assert np.array_equal(moved.view(np.uint32),
                          vr.mass_transfer(p, got[0], g_mass, r_mass, beta, compiled=False).view(np.uint32))
    gm, rm, b = (torch.from_numpy(a)[:, None] for a in (g_mass, r_mass, beta))
    up = torch.nan_to_num(probs / gm * b, nan=0.0)
    down = torch.nan_to_num(probs / rm * b, nan=0.0)
    q = torch.clamp(torch.nan_to_num(torch.where(green, probs + up, probs - down), nan=0.0), min=0)
    assert np.array_equal(q.numpy().view(np.uint32), moved.view(np.uint32))


@pytest.mark.parametrize("n", [1, 2, 17, 1000, 50_257])
def test_dipmark_steps(n: int, variant: str) -> None:
    """dip_weights, permute and dip_finish against their twins, and chained with torch's
    logsumexp, softmax, cumsum and log against DiPmark's own dip_reweight, bit for bit."""
    torch = pytest.importorskip("torch")
    from evalrun.watermark.schemes.dipmark import dip_reweight

    rng = np.random.default_rng(n)
    for alpha, scale in ((0.45, 0.05), (0.5, 3.0), (0.2, 30.0)):
        x32 = (rng.normal(size=n) * scale).astype(np.float32)
        if n > 4:
            x32[:n // 4] = -np.inf
        perm = rng.permutation(n).astype(np.int64)
        ranks = np.argsort(perm).astype(np.int64)
        for tau in (0.0, 0.7):
            permuted = vr.permute(x32, perm, True, np.empty(n), divisor=tau, compiled=True)
            assert np.array_equal(permuted, vr.permute(x32, perm, True, np.empty(n), divisor=tau,
                                                       compiled=False))
            assert np.array_equal(permuted, vr.permute(x32, ranks, False, np.empty(n), divisor=tau,
                                                       compiled=True))
            x = torch.from_numpy(x32).double() / (tau or 1.0)
            want = dip_reweight(x, torch.from_numpy(perm), alpha).float().numpy()
            lse = torch.logsumexp(x, dim=0)
            cdf = torch.cumsum(torch.softmax(torch.from_numpy(permuted), dim=0), dim=0)
            w, zero = vr.dip_weights(cdf.numpy(), alpha, compiled=True)
            w2, zero2 = vr.dip_weights(cdf.numpy(), alpha, compiled=False)
            assert np.array_equal(w, w2) and np.array_equal(zero, zero2)
            logs = torch.log(torch.from_numpy(w)).numpy()
            for idx, is_perm in ((perm, True), (ranks, False)):
                for compiled in (True, False):
                    got = vr.dip_finish(logs, zero, float(lse), idx, is_perm,
                                        np.empty(n, dtype=np.float32), compiled=compiled)
                    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("n", [1, 2, 3, 1000, 65_536, 65_537, 128_256])
def test_legacy_permutation(n: int) -> None:
    """legacy_permuted shuffles as numpy's RandomState.permutation does, from a fresh seeding
    and from a generator part way into its block of 624 words."""
    values = np.random.default_rng(n).normal(size=n)
    rs = np.random.RandomState()
    for drawn in (0, 1, 10, 623, 700):
        rs.seed((42, n % 977, 5))
        rs.random_sample(drawn)
        state = rs.get_state()
        want = values[rs.permutation(n)].astype(np.float32)
        got = vr.legacy_permuted(state, values, compiled=True)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
        assert np.array_equal(vr.legacy_permuted(state, values, compiled=False).view(np.uint32),
                              want.view(np.uint32))


@pytest.mark.parametrize("length", [1, 2, 3, 17, 623, 624, 625, 1300])
def test_legacy_state_is_numpys_seeding_of_a_sequence(length: int) -> None:
    """legacy_state's key is RandomState.seed(tuple) for tuples of any length (numpy's
    init_by_array; a tuple of one too, which a one-element array would not give), words up
    to 2**32 - 1 included."""
    rng = np.random.default_rng(length)
    rs = np.random.RandomState()
    for words in (rng.integers(0, 2**32, size=length), np.full(length, 2**32 - 1), np.zeros(length)):
        seed = tuple(int(w) for w in words)
        rs.seed(seed)
        want = rs.get_state()
        for compiled in (True, False):
            got = vr.legacy_state(seed, compiled=compiled)
            assert got[0] == "MT19937" and got[2] == want[2] == 624
            assert np.array_equal(got[1], want[1])


@pytest.mark.parametrize("seed", [(), (-1, 3), (5, 2**32)])
def test_legacy_state_refuses_what_numpy_refuses(seed: tuple[int, ...]) -> None:
    for compiled in (True, False):
        with pytest.raises(ValueError, match=r"legacy_state: a non-empty sequence of integers in \[0, 2\*\*32\)"):
            vr.legacy_state(seed, compiled=compiled)


@pytest.mark.parametrize("size", [1, 2, 1024, 65_536])
def test_synthid_tournament(size: int, variant: str) -> None:
    """tournament_layout's rotations read layer_g_values' g-values, and tournament_layer
    matches its twin (the torch tournament itself is compared in
    tests/watermark/test_processor_identity.py)."""
    from evalrun.watermark.schemes.synthid import layer_g_values, sampling_table

    rng = np.random.default_rng(size)
    table = sampling_table(size, 3)
    keys = np.array([654, 400, -836, 2**62 + 5], dtype=np.int64).astype(np.uint64)
    hashes = rng.integers(0, 2**64 - 1, size=3, dtype=np.uint64, endpoint=True)
    width = 3 * size + 7  # several wraps of the table
    rotated, offsets = vr.tournament_layout(table, hashes, keys)
    with np.errstate(over="ignore"):
        ngram = (np.arange(width, dtype=np.uint64)[None, :] + hashes[:, None]) * np.uint64(
            6364136223846793005) + np.uint64(1)
        g = layer_g_values(ngram, keys, table)  # [3, width, 4]
    low = size - 1
    for k in range(4):
        assert np.array_equal(rotated[(offsets[:, k:k + 1] + np.arange(width)) & low], g[:, :, k])
    probs = rng.dirichlet(np.ones(width), size=3).astype(np.float32)
    for layer, nxt in ((None, 0), (0, 1), (3, None)):
        a, b = probs.copy(), probs.copy()
        ga, gb = np.zeros_like(a), np.zeros_like(b)
        mass = rng.random(3).astype(np.float32)
        cur = None if layer is None else offsets[:, layer]
        after = None if nxt is None else offsets[:, nxt]
        vr.tournament_layer(a, rotated, cur, mass, ga, after, compiled=True)
        vr.tournament_layer(b, rotated, cur, mass, gb, after, compiled=False)
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
        assert np.array_equal(ga.view(np.uint32), gb.view(np.uint32))


@pytest.fixture
def torch_threads() -> object:
    """torch, its thread count restored after the test."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    yield torch
    torch.set_num_threads(before)


def _wide(rng: np.random.Generator, rows: int, width: int) -> np.ndarray:
    """float32 values of both signs over 30 binades: another summation order shows."""
    return (rng.random((rows, width)) ** 8 * rng.choice([-1.0, 1.0], (rows, width))).astype(np.float32)


SUM_WIDTHS = [1, 3, 7, 8, 9, 31, 100, 1_003, 32_767, 32_768, 40_000, 70_001, 128_256, 262_145]


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_torch_row_sums_are_torch_sums(threads: int, variant: str, torch_threads: object) -> None:
    """The kernel's sums in torch_sum_order's order are torch.sum(dim=1)'s bits: several rows
    (each summed whole) and one row (cut among torch's threads when long), every width
    class of the cascade, at several thread counts."""
    torch = torch_threads
    torch.set_num_threads(threads)  # type: ignore[attr-defined]
    rng = np.random.default_rng(threads)
    for rows in (1, 2, 5):
        order = vr.torch_sum_order(rows)
        assert order is not None, "torch's float sums no longer follow the order the kernel knows"
        assert order[1] == (threads if rows == 1 else 0)
        for width in SUM_WIDTHS:
            x = _wide(rng, rows, width)
            want = torch.from_numpy(x).sum(dim=1).numpy()  # type: ignore[attr-defined]
            assert np.array_equal(vr.torch_row_sums(x, *order).view(np.uint32), want.view(np.uint32)), (rows, width)


def test_torch_sum_order_declines_more_threads_than_the_kernel_splits(monkeypatch: pytest.MonkeyPatch,
                                                                        torch_threads: object) -> None:
    """One row on more threads than the kernel's buffer holds: no order (SynthID sums with
    torch), several rows still one."""
    torch = torch_threads
    monkeypatch.setattr(torch, "get_num_threads", lambda: 300)
    assert vr.torch_sum_order(1) is None
    several = vr.torch_sum_order(4)
    assert several is not None and several[1] == 0


def test_torch_row_sums_tell_orders_apart(torch_threads: object) -> None:
    """The other vector width and the other row case give other bits on such rows (what the
    order check in torch_sum_order relies on)."""
    torch = torch_threads
    torch.set_num_threads(2)  # type: ignore[attr-defined]
    rows = [_wide(np.random.default_rng(seed), 1, 128_256) for seed in range(10)]
    want = [torch.from_numpy(x).sum(dim=1).numpy().view(np.uint32) for x in rows]  # type: ignore[attr-defined]
    for lanes, threads in ((8, 2), (16, 2), (8, 0), (8, 3)):
        same = sum(np.array_equal(vr.torch_row_sums(x, lanes, threads).view(np.uint32), w)
                   for x, w in zip(rows, want))
        if (lanes, threads) == (8, 2):  # torch's order on 2 threads
            assert same == 10
        else:
            assert same < 10, (lanes, threads)


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_tournament_is_layers_with_torch_sums(rows: int, threads: int, variant: str,
                                              torch_threads: object) -> None:
    """The fused tournament against tournament_layer with torch summing the green products,
    layer by layer, bit for bit: rows torch sums whole and a row it cuts among threads, a
    table the row wraps around several times, rows with NaN and zeros."""
    from evalrun.watermark.schemes.synthid import sampling_table

    torch = torch_threads
    torch.set_num_threads(threads)  # type: ignore[attr-defined]
    rng = np.random.default_rng(rows * 10 + threads)
    for width, size in ((128_256, 65_536), (40_000, 1_024), (1_000, 4), (5, 2)):
        table = sampling_table(size, 1)
        hashes = rng.integers(0, 2**64 - 1, size=rows, dtype=np.uint64, endpoint=True)
        keys = rng.integers(0, 2**63, size=7).astype(np.uint64)
        rotated, offsets = vr.tournament_layout(table, hashes, keys)
        probs = rng.dirichlet(np.full(width, 0.3), size=rows).astype(np.float32)
        probs[0, :3] = 0.0
        if rows > 1:
            probs[1, 7 % width] = np.nan
        want = probs.copy()
        green = np.empty_like(want)
        vr.tournament_layer(want, rotated, None, None, green, offsets[:, 0], compiled=False)
        for k in range(offsets.shape[1]):
            mass = torch.from_numpy(green).sum(dim=1).numpy()  # type: ignore[attr-defined]
            nxt = offsets[:, k + 1] if k + 1 < offsets.shape[1] else None
            vr.tournament_layer(want, rotated, offsets[:, k], mass, green, nxt, compiled=False)
        got = probs.copy()
        order = vr.torch_sum_order(rows)
        assert order is not None
        vr.tournament(got, vr.tournament_values(rotated, width), offsets, order)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (width, size)


@pytest.mark.parametrize(("width", "threads"), [(65_537, 2), (128_256, 2), (128_256, 3), (151_936, 8),
                                                (70_001, 16)])
def test_tournament_parts_are_the_one_thread_tournament(width: int, threads: int, variant: str) -> None:
    """One row's chunks on threads of their own, meeting at every layer, give the bits of the
    same tournament run whole on one thread (whose order test_tournament_is_layers_with_torch_sums
    holds to torch's), NaN rows and all."""
    from evalrun.watermark.schemes.synthid import sampling_table

    rng = np.random.default_rng(width + threads)
    rotated, offsets = vr.tournament_layout(sampling_table(65_536, 2),
                                            rng.integers(0, 2**63, 1).astype(np.uint64),
                                            rng.integers(0, 2**63, 30).astype(np.uint64))
    values = vr.tournament_values(rotated, width)
    assert vr.split_parts(width, threads) == min(threads, -(-width // 32_768))
    parts = vr.split_parts(width, threads)
    for row in (rng.dirichlet(np.full(width, 0.2), size=1).astype(np.float32),
                np.full((1, width), np.nan, dtype=np.float32)):
        want, got = row.copy(), row.copy()
        vr.tournament(want, values, offsets, (8, threads))
        state = vr.tournament_state()
        run_together(lambda k: vr.tournament_part(got, values, offsets, (8, threads), k, state), parts)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_tournament_part_refuses_rows_torch_sums_whole() -> None:
    values = vr.tournament_values(np.array([0, 1], dtype=np.uint8), 40_000)
    offsets = np.zeros((1, 3), dtype=np.int64)
    state = vr.tournament_state()
    assert vr.split_parts(32_767, 8) == 1 and vr.split_parts(10**6, 1) == 1
    with pytest.raises(ValueError, match="one row that torch sums in chunks"):
        vr.tournament_part(np.full((1, 30_000), 0.1, np.float32), values, offsets, (8, 2), 0, state)
    with pytest.raises(ValueError, match="one row that torch sums in chunks"):
        vr.tournament_part(np.full((2, 40_000), 0.1, np.float32), values, offsets, (8, 2), 0, state)


def test_tournament_part_alone_gives_up_with_an_error() -> None:
    """A part whose partner never comes raises after its wait instead of hanging or summing
    half a row (the state says a partner gave up: no 10 s wait here)."""
    from evalrun.kernels import _vocab_rows

    probs = np.full((1, 40_000), 1 / 40_000, dtype=np.float32)
    values = vr.tournament_values(np.array([0, 1], dtype=np.uint8), 40_000)
    state = vr.tournament_state()
    assert len(state) == _vocab_rows.PART_STATE_SIZE
    state[4:8] = np.frombuffer(np.int32(1).tobytes(), dtype=np.uint8)  # abandoned
    with pytest.raises(RuntimeError, match="did not arrive"):
        _vocab_rows.tournament_part(probs, values, np.zeros(2, np.int64), 2, 8, 2, 0, state)
    with pytest.raises(ValueError, match="part < min"):
        _vocab_rows.tournament_part(probs, values, np.zeros(2, np.int64), 2, 8, 2, 2, state)


def test_tournament_and_sums_refuse_bad_arguments() -> None:
    probs = np.full((2, 10), 0.1, dtype=np.float32)
    values = vr.tournament_values(np.array([0, 1, 1, 0], dtype=np.uint8), 10)
    offsets = np.zeros((2, 3), dtype=np.int64)
    with pytest.raises(ValueError, match="lanes must be 8 or 16, got 4"):
        vr.tournament(probs, values, offsets, (4, 0))
    with pytest.raises(ValueError, match=r"threads must lie in \[0, 256\], got 300"):
        vr.torch_row_sums(probs, 8, 300)
    with pytest.raises(ValueError, match="an offset outside ext"):
        vr.tournament(probs, values, offsets + 5, (8, 0))
    with pytest.raises(ValueError, match="offsets \\[R, depth >= 1\\] for 2 rows"):
        vr.tournament(probs, values, offsets[:1], (8, 0))
    with pytest.raises(ValueError, match="values from tournament_values"):
        vr.tournament(probs, values[:5], offsets, (8, 0))
    with pytest.raises(ValueError, match="values from tournament_values"):
        vr.tournament(probs, values.astype(np.float32), offsets, (8, 0))
    with pytest.raises(ValueError, match="a table of zeros and ones"):
        vr.tournament_values(np.array([0, 2], dtype=np.uint8), 10)
