"""The logits processors' vocabulary-wide keyed work, a decoding step's rows in one call.

At every step a processor hashes its row's seed word with every token of the vocabulary:
green lists (kgw, SWEET, EWD, MorphMark), Feistel permutations (its, DiPmark), keyed noise
for a Gumbel-max or permute-and-flip choice (exp, EXPGumbel, PF); and the elementwise parts
of MorphMark's probability transfer and of DiPmark's reweighting, in one pass each instead of
a dozen torch operations; Waterfall's rows, numpy's legacy permutation of the vocabulary
drawn again from its generator state; and SynthID's tournament, each layer's g-values read
off one permuted table, its update one pass, and its sum taken in the kernel in the order
torch sums (checked against the loaded torch: :func:`torch_sum_order`). numpy takes ten passes over
``[V]`` arrays for one SplitMix64 finaliser; at V = 128,256 and 16 rows that is most of a
decoding step of a small model. The compiled kernel ``evalrun.kernels._vocab_rows``
(``kernels/vocab_rows.c``, built at install when a C compiler is present) hashes a row in one
pass and, for the argmax choices, computes the exact noise only of the tokens that could win.

Every function here has a numpy twin made of the kernels the processors used before
(:mod:`evalrun.kernels.green`, :mod:`evalrun.kernels.keyed_hash`,
:mod:`evalrun.kernels.token_stats`): the twins define the results, run where the kernel was
not built (``compiled=False`` asks for them), and tests hold the kernel to their bits. The
exceptions are :func:`torch_row_sums` and the tournaments built on it, whose results are
defined by torch's own sums: they exist compiled only, and without them SynthID sums with
torch as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evalrun.kernels.backend import NUMPY
from evalrun.kernels.green import green_mask as _green_mask
from evalrun.kernels.keyed_hash import feistel_bits, feistel_rank, neg_log_uniform, pair, range_codes, threshold53
from evalrun.kernels.token_stats import exp_gumbel

try:  # built by setup.py when a C compiler is available (the extension is optional)
    from evalrun.kernels import _vocab_rows as _compiled
except ImportError:  # pragma: no cover - exercised where the build was skipped
    _compiled = None

#: :func:`keyed_argmax`'s noises: exp_gumbel's ``-log(-log u)`` and ``-log u`` (PF's)
NOISE_GUMBEL, NOISE_EXP = 0, 1
#: :func:`keyed_argmax`'s sums: ``f32(x + f32(noise))`` for float32 x (exp), ``f64(x) +
#: noise`` for float32 x (EXPGumbel), ``(x - offset) + noise`` for float64 x (PF)
COMBINE_F32, COMBINE_F64_OF_F32, COMBINE_F64 = 0, 1, 2
#: the build of the loops that calls without a ``variant`` run: "" for the widest this CPU
#: runs, or one of :func:`variants` (tests set it to check every build)
DEFAULT_VARIANT = ""


def compiled_available() -> bool:
    """Whether the compiled kernel was built with this install."""
    return _compiled is not None


def variants() -> list[str]:
    """The builds of the kernel's loops this CPU runs (``portable``, ``avx2``, ``avx512``)."""
    return list(_compiled.variants()) if _compiled is not None else []


def _use(compiled: bool | None) -> bool:
    if compiled and _compiled is None:
        raise RuntimeError("the compiled vocabulary kernel was not built with this install "
                           "(evalrun.kernels._vocab_rows; it needs a C compiler at install)")
    return _compiled is not None and compiled is not False


def _seeds(seeds: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(seeds, dtype=np.uint64).reshape(-1))


def _rows(x: np.ndarray, dtype: Any, what: str) -> np.ndarray:
    if x.dtype != dtype or x.ndim != 2 or not x.flags.c_contiguous:
        raise ValueError(f"{what}: a C-contiguous 2-D {np.dtype(dtype).name} array, "
                         f"got {x.dtype} {x.shape}")
    return x


def green_add(scores: np.ndarray, seeds: Any, n: int, gamma: float, delta: float,
              active: Any = None, *, compiled: bool | None = None) -> None:
    """``scores[b, :n] += where(green, f32(delta), f32(0))`` in place, green being native
    kgw's list of ``seeds[b]`` (:func:`evalrun.kernels.green.green_mask`; nothing where
    ``active[b]`` is False). ``scores``: C-contiguous float32 ``[B, W]``, ``n <= W``."""
    _rows(scores, np.float32, "green_add: scores")
    seeds = _seeds(seeds)
    flags = (np.ones(len(seeds), dtype=np.uint8) if active is None
             else np.ascontiguousarray(np.asarray(active, dtype=bool).reshape(-1)).view(np.uint8))
    if len(seeds) != scores.shape[0] or len(flags) != len(seeds) or not 0 <= n <= scores.shape[1]:
        raise ValueError("green_add: one seed and flag per row, n within the row")
    t = threshold53(gamma)
    if _use(compiled):
        _compiled.green_add(scores, scores.shape[1], seeds, flags, n, t << 11 if t < 1 << 53 else 0,
                            t >= 1 << 53, float(np.float32(delta)), DEFAULT_VARIANT)
        return
    bias = np.float32(delta)
    for b in range(len(seeds)):
        mask = np.asarray(_green_mask(NUMPY, seeds[b:b + 1], n, gamma))[0] & bool(flags[b])
        view = scores[b, :n]
        view += np.where(mask, bias, np.float32(0.0))


def green_mask(seeds: Any, n: int, gamma: float, *, compiled: bool | None = None) -> np.ndarray:
    """:func:`evalrun.kernels.green.green_mask` of ``seeds [B]`` over ``n`` columns: bool ``[B, n]``."""
    seeds = _seeds(seeds)
    if not _use(compiled):
        return np.asarray(_green_mask(NUMPY, seeds, n, gamma), dtype=bool)
    out = np.empty((len(seeds), n), dtype=np.uint8)
    t = threshold53(gamma)
    _compiled.green_mask(seeds, n, t << 11 if t < 1 << 53 else 0, t >= 1 << 53, out, DEFAULT_VARIANT)
    return out.view(bool)


def green_products(probs: np.ndarray, seeds: Any, n: int, gamma: float, active: Any = None, *,
                   out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                   compiled: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MorphMark's masked probabilities: ``(green, probs * f32(green), probs * f32(~green))``
    for float32 ``probs [B, W]`` (C-contiguous), green being native kgw's list of ``seeds[b]``
    over the first ``n`` columns (none beyond, nor where ``active[b]`` is False): bool
    ``[B, W]`` and the two float32 products torch makes of a float tensor and a bool mask
    (NaN or inf times 0 is NaN, as there). ``out``: the compiled kernel's buffers to write
    them into (uint8 and two float32 arrays like ``probs``), reused across steps."""
    _rows(probs, np.float32, "green_products: probs")
    seeds = _seeds(seeds)
    rows, width = probs.shape
    flags = (np.ones(rows, dtype=bool) if active is None
             else np.asarray(active, dtype=bool).reshape(-1))
    if len(seeds) != rows or len(flags) != rows or not 0 <= n <= width:
        raise ValueError("green_products: one seed and flag per row, n within the row")
    if _use(compiled):
        green, gp, rp = out if out is not None else (
            np.empty((rows, width), dtype=np.uint8), np.empty_like(probs), np.empty_like(probs))
        t = threshold53(gamma)
        _compiled.green_products(probs, seeds, np.ascontiguousarray(flags).view(np.uint8), n,
                                 t << 11 if t < 1 << 53 else 0, t >= 1 << 53, green, gp, rp,
                                 DEFAULT_VARIANT)
        return green.view(bool), gp, rp
    green = np.zeros((rows, width), dtype=bool)
    if n:
        green[:, :n] = np.asarray(_green_mask(NUMPY, seeds, n, gamma), dtype=bool) & flags[:, None]
    with np.errstate(invalid="ignore"):
        return green, probs * green.astype(np.float32), probs * (~green).astype(np.float32)


def mass_transfer(probs: np.ndarray, green: np.ndarray, green_mass: Any, red_mass: Any,
                  beta: Any, *, out: np.ndarray | None = None,
                  compiled: bool | None = None) -> np.ndarray:
    """MorphMark's transfer of ``beta`` from red to green probability, elementwise in float32
    as its torch code computes it: ``up = nan_to_num(p / green_mass * beta)``, ``down =
    nan_to_num(p / red_mass * beta)``, then ``clamp(nan_to_num(where(green, p + up, p -
    down)), min=0)`` (float32 ``[B, W]``; the masses and ``beta`` one float32 per row), into
    ``out`` when given (the compiled kernel's)."""
    _rows(probs, np.float32, "mass_transfer: probs")
    rows = probs.shape[0]
    per_row = [np.ascontiguousarray(np.asarray(a, dtype=np.float32).reshape(-1))
               for a in (green_mass, red_mass, beta)]
    if green.shape != probs.shape or any(len(a) != rows for a in per_row):
        raise ValueError("mass_transfer: green like probs, one mass and beta per row")
    if _use(compiled):
        out = np.empty_like(probs) if out is None else out
        _compiled.mass_transfer(probs, np.ascontiguousarray(green).view(np.uint8), *per_row, out,
                                DEFAULT_VARIANT)
        return out
    gm, rm, b = (a[:, None] for a in per_row)
    with np.errstate(all="ignore"):
        up = np.nan_to_num(probs / gm * b, nan=0.0)
        down = np.nan_to_num(probs / rm * b, nan=0.0)
        q = np.nan_to_num(np.where(green, probs + up, probs - down), nan=0.0)
    return np.where(q < 0, np.float32(0.0), q)


def dip_weights(cdf: np.ndarray, alpha: float, *, out: np.ndarray | None = None,
                zero: np.ndarray | None = None,
                compiled: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """DiPmark's reweighted probabilities from the running sums ``cdf`` (float64 ``[n]``) of
    the permuted probabilities, as its torch code computes them: ``c = cdf / cdf[-1]``,
    ``mapped = clamp(c - alpha, min=0) + clamp(c - (1 - alpha), min=0)``, ``w =
    clamp(diff(mapped, prepend=0), min=0)``. Returns ``(w with 1.0 where it is 0, where it is
    0)``: ``log(0)`` is ``-inf`` whatever library computes it, and zeros cost torch's log a
    slow path, so the caller takes the log of the first and puts ``-inf`` at the second
    (:func:`dip_finish`). Into ``out`` (which may be ``cdf``) and ``zero`` when given."""
    if cdf.dtype != np.float64 or cdf.ndim != 1 or not cdf.flags.c_contiguous:
        raise ValueError("dip_weights: a C-contiguous 1-D float64 cdf")
    out = np.empty_like(cdf) if out is None else out
    zero = np.empty(cdf.shape, dtype=bool) if zero is None else zero
    if _use(compiled):
        _compiled.dip_weights(cdf, float(alpha), out, zero.view(np.uint8), DEFAULT_VARIANT)
        return out, zero
    if not len(cdf):
        return out, zero
    with np.errstate(all="ignore"):
        c = cdf / cdf[-1]
        a, b = c - alpha, c - (1.0 - alpha)
        mapped = np.where(a < 0, 0.0, a) + np.where(b < 0, 0.0, b)
        d = np.diff(mapped, prepend=0.0)
    w = np.where(d < 0, 0.0, d)
    zero[:] = w == 0
    out[:] = np.where(zero, 1.0, w)
    return out, zero


def permute(x: np.ndarray, idx: np.ndarray, is_perm: bool, out: np.ndarray, *,
            divisor: float = 0.0, compiled: bool | None = None) -> np.ndarray:
    """``x`` (float32 or float64 ``[n]``) as float64 in permuted order, into ``out``:
    ``out[j] = x[idx[j]]`` when ``is_perm`` (``idx``: the token at each rank), else
    ``out[idx[v]] = x[v]`` (``idx``: each token's rank); each value divided by ``divisor``
    first when it is not 0 (``float64(x) / divisor``)."""
    if idx.dtype != np.int64 or out.dtype != np.float64 or not (x.shape == idx.shape == out.shape):
        raise ValueError("permute: x [n], int64 idx [n], float64 out [n]")
    if _use(compiled):
        _compiled.permute(np.ascontiguousarray(x), np.ascontiguousarray(idx), is_perm, out,
                          float(divisor))
        return out
    v = x.astype(np.float64)
    if divisor:
        v = v / divisor
    if is_perm:
        out[:] = v[idx]
    else:
        out[idx] = v
    return out


def dip_finish(logs: np.ndarray, zero: np.ndarray, lse: float, idx: np.ndarray, is_perm: bool,
               out: np.ndarray, *, compiled: bool | None = None) -> np.ndarray:
    """DiPmark's last step, back in token order: ``(-inf where zero else logs) + lse`` in
    float64, rounded to ``out``'s dtype (float32 or float64) and put at token ``idx[j]``
    (``is_perm``) or at the token whose rank is ``j``."""
    n = len(idx)
    if logs.shape != (n,) or zero.shape != (n,) or out.shape != (n,) or idx.dtype != np.int64:
        raise ValueError("dip_finish: logs, zero, idx and out all [n]")
    if _use(compiled) and out.flags.c_contiguous:
        _compiled.dip_finish(np.ascontiguousarray(logs), np.ascontiguousarray(zero).view(np.uint8),
                             float(lse), np.ascontiguousarray(idx), is_perm, out,
                             np.empty_like(out))
        return out
    values = (np.where(zero, -np.inf, logs) + lse).astype(out.dtype)
    if is_perm:
        out[idx] = values
    else:
        out[:] = values[idx]
    return out


def legacy_state(seed: Any, *, compiled: bool | None = None) -> tuple[Any, ...]:
    """The state ``RandomState(seed)`` starts from, as its ``get_state()`` gives it, for a
    sequence (a tuple, even of one: numpy seeds a one-element *array* as the integer) of
    integers in ``[0, 2**32)``, which numpy's ``init_by_array`` seeds from. The kernel's seeding
    costs a few microseconds; a RandomState's, about 60 (Waterfall seeds one per row and
    step)."""
    words = np.asarray(seed, dtype=np.int64).reshape(-1)
    if len(words) == 0 or int(words.min()) < 0 or int(words.max()) > 0xFFFFFFFF:
        raise ValueError("legacy_state: a non-empty sequence of integers in [0, 2**32)")
    if _use(compiled):
        key = np.empty(624, dtype=np.uint32)
        _compiled.legacy_seed(words.astype(np.uint32), key)
        return ("MT19937", key, 624, 0, 0.0)
    rs = np.random.RandomState()
    rs.seed(tuple(int(w) for w in words))
    return tuple(rs.get_state(legacy=True))


def legacy_permuted(state: tuple[Any, ...], values: np.ndarray, *,
                    compiled: bool | None = None) -> np.ndarray:
    """``values[RandomState.permutation(n)]`` rounded to float32 (``n = len(values)``, float64
    values), the permutation drawn as numpy's legacy ``RandomState`` draws it from ``state``
    (what its ``get_state()`` returns: the MT19937 key and position). Waterfall's rows. The
    kernel releases the GIL, so rows can be drawn on threads at once."""
    if values.dtype != np.float64 or values.ndim != 1:
        raise ValueError("legacy_permuted: 1-D float64 values")
    n = len(values)
    key, pos = np.ascontiguousarray(state[1], dtype=np.uint32), int(state[2])
    if _use(compiled) and n < 2**32:
        out = np.empty(n, dtype=np.float32)
        _compiled.legacy_permuted(key, pos, np.ascontiguousarray(values), out)
        return out
    rs = np.random.RandomState()
    rs.set_state(("MT19937", key, pos, 0, 0.0))
    return values[rs.permutation(n)].astype(np.float32)


_LCG = 6364136223846793005


def tournament_layout(table: np.ndarray, context_hashes: Any, keys: np.ndarray,
                      ) -> tuple[np.ndarray, np.ndarray]:
    """SynthID's g-values as rotations of one table: for a sampling table of a power-of-two
    size S, layer k's g-value of token v after context hash c is ``table[h & (S - 1)]`` with
    ``h = ((v + c) * M + 1 + key_k) * M + 1``, which is ``(h0 + v * a) mod S`` for ``a = M**2
    mod S`` (odd) and ``h0`` its value at ``v = 0``. So with the table permuted once,
    ``rotated[j] = table[j * a mod S]``, the layer's g-values are ``rotated[(offset + v) mod S]``
    for ``offset = h0 * a**-1 mod S``: a contiguous read. Returns ``(rotated, offsets [R,
    depth])``."""
    size = len(table)
    if size < 1 or size & (size - 1):
        raise ValueError("tournament_layout: a table of a power-of-two size")
    low = size - 1
    rotated = np.ascontiguousarray(table[(np.arange(size, dtype=np.int64) * _rotation(size)) & low],
                                   dtype=np.uint8)
    return rotated, tournament_offsets(size, context_hashes, keys)


def _rotation(size: int) -> int:
    """The step ``a = M**2 mod size`` of :func:`tournament_layout`'s rotations."""
    return (_LCG * _LCG) & (size - 1)


def tournament_offsets(size: int, context_hashes: Any, keys: np.ndarray) -> np.ndarray:
    """:func:`tournament_layout`'s offsets ``[R, depth]`` alone (the rotated table depends on
    the table only, so a processor makes it once)."""
    low = size - 1
    hashes = np.asarray(context_hashes, dtype=np.uint64).reshape(-1, 1)
    with np.errstate(over="ignore"):
        h0 = (hashes * np.uint64(_LCG) + np.uint64(1) + np.asarray(keys, dtype=np.uint64)[None, :]
              ) * np.uint64(_LCG) + np.uint64(1)
    inverse = pow(_rotation(size), -1, size) if size > 1 else 0
    offsets = ((h0 & np.uint64(low)).astype(np.int64) * inverse) & low
    return np.ascontiguousarray(offsets, dtype=np.int64)


def tournament_layer(probs: np.ndarray, rotated: np.ndarray, offsets: np.ndarray | None,
                     mass: Any, green_p: np.ndarray | None, next_offsets: np.ndarray | None, *,
                     compiled: bool | None = None) -> None:
    """One layer of SynthID's tournament in place, elementwise in float32 as its torch code
    computes it, g-values read off :func:`tournament_layout`'s rotated table: with
    ``offsets`` (one per row: this layer's), ``probs = probs * (f32(1 + g) - mass[r])``;
    then with ``next_offsets``, ``green_p = f32(g') * probs`` for the next layer's g-values
    (their row sums are the next masses)."""
    _rows(probs, np.float32, "tournament_layer: probs")
    rows, width = probs.shape
    m = np.ascontiguousarray(np.asarray(mass if offsets is not None else np.zeros(rows),
                                        dtype=np.float32).reshape(-1))
    empty = np.zeros(0, dtype=np.int64)
    if _use(compiled):
        _compiled.tournament_layer(
            probs, rotated, empty if offsets is None else np.ascontiguousarray(offsets, dtype=np.int64),
            m, green_p if green_p is not None else np.empty(0, np.float32),
            empty if next_offsets is None else np.ascontiguousarray(next_offsets, dtype=np.int64),
            DEFAULT_VARIANT)
        return
    low = len(rotated) - 1
    columns = np.arange(width, dtype=np.int64)[None, :]
    if offsets is not None:
        g = rotated[(np.asarray(offsets)[:, None] + columns) & low]
        probs *= (np.uint8(1) + g).astype(np.float32) - m[:, None]
    if next_offsets is not None:
        assert green_p is not None
        g = rotated[(np.asarray(next_offsets)[:, None] + columns) & low]
        np.multiply(g.astype(np.float32), probs, out=green_p)


#: row widths :func:`torch_sum_order` checks the kernel's sums at: short rows, rows of one
#: level of the cascade and of several, rows at and past the width torch splits among threads
_PROBE_WIDTHS = (5, 16, 1_003, 32_768, 40_000, 70_001, 128_256)


def torch_row_sums(x: np.ndarray, lanes: int, threads: int = 0) -> np.ndarray:
    """Row sums of float32 ``x [R, W]`` in the order of torch's float32 sum over the last
    dimension (its cascade sum, with vectors of ``lanes`` values): of a tensor of several
    rows, or of one row summed by one thread, for ``threads`` 0 or 1; of a single row summed
    on ``threads`` threads otherwise (long rows are cut into chunks summed apart). The bits
    of ``torch.from_numpy(x).sum(dim=1)`` in the order :func:`torch_sum_order` finds.
    Compiled only."""
    _use(True)
    _rows(x, np.float32, "torch_row_sums: x")
    out = np.empty(x.shape[0], dtype=np.float32)
    _compiled.torch_row_sums(x, x.shape[1], lanes, threads, out, DEFAULT_VARIANT)
    return out


_ORDERS: dict[tuple[bool, int], tuple[int, int] | None] = {}
#: the most threads the kernel splits a row's sum among (MAX_SPLIT in vocab_rows.c)
_MAX_SPLIT = 256


def torch_sum_order(rows: int) -> tuple[int, int] | None:
    """``(lanes, threads)`` with which :func:`torch_row_sums` gives the loaded torch's float32
    sums over the last dimension of a tensor of ``rows`` rows at its present thread count,
    or None when no order the kernel knows does (another torch, another parallel backend, a
    build without the kernel). Checked once per process and case (one row or several, the
    thread count) on random rows whose magnitudes span 30 binades, where another order
    shows in the last bits."""
    import torch

    single, count = rows == 1, int(torch.get_num_threads())
    if _compiled is None or (single and count > _MAX_SPLIT):
        return None
    key = (single, count)
    if key not in _ORDERS:
        rng = np.random.default_rng(20261129)
        probes = [(rng.random((1 if single else 3, w)) ** 8
                   * rng.choice([-1.0, 1.0], (1 if single else 3, w))).astype(np.float32)
                  for w in _PROBE_WIDTHS]
        wanted = [torch.from_numpy(x).sum(dim=1).numpy().view(np.uint32) for x in probes]
        threads = count if single else 0
        _ORDERS[key] = next(((lanes, threads) for lanes in (8, 16) if all(
            np.array_equal(torch_row_sums(x, lanes, threads).view(np.uint32), w)
            for x, w in zip(probes, wanted))), None)
    return _ORDERS[key]


def tournament_values(rotated: np.ndarray, width: int) -> np.ndarray:
    """:func:`tournament`'s g-values: ``rotated`` (:func:`tournament_layout`'s table, of
    zeros and ones, as SynthID's tables are) repeated over ``len(rotated) + width`` bytes, so
    that a layer's g-values are the ``width`` from its offset. Depends on the table and the
    width only: made once."""
    rotated = np.asarray(rotated, dtype=np.uint8)
    if rotated.size and int(rotated.max()) > 1:
        raise ValueError("tournament_values: a table of zeros and ones")
    low = len(rotated) - 1
    ext = rotated[np.arange(len(rotated) + width, dtype=np.int64) & low]
    ext.setflags(write=False)
    return ext


def tournament(probs: np.ndarray, values: np.ndarray, offsets: np.ndarray,
               order: tuple[int, int]) -> None:
    """SynthID's whole tournament on float32 ``probs [R, W]`` in place, row by row: for each
    layer, the mass as :func:`torch_row_sums` (``order``: its lanes and threads) of the
    green products, then :func:`tournament_layer`'s update (g-values from
    :func:`tournament_values`, ``offsets [R, depth]`` from :func:`tournament_layout`). The
    numbers of :func:`tournament_layer` with torch summing the products, when ``order`` is
    :func:`torch_sum_order`'s for the rows torch would sum. Compiled only; releases the GIL."""
    _use(True)
    _rows(probs, np.float32, "tournament: probs")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if offsets.ndim != 2 or offsets.shape[0] != probs.shape[0] or offsets.shape[1] < 1:
        raise ValueError(f"tournament: offsets [R, depth >= 1] for {probs.shape[0]} rows, "
                         f"got {offsets.shape}")
    if values.dtype != np.uint8 or len(values) < probs.shape[1]:
        raise ValueError("tournament: values from tournament_values for this width")
    lanes, threads = order
    _compiled.tournament(probs, np.ascontiguousarray(values), offsets, offsets.shape[1], lanes,
                         threads, DEFAULT_VARIANT)


#: at::internal::GRAIN_SIZE: torch sums one row of this many values or more on its threads
TORCH_GRAIN = 32_768


def split_parts(width: int, threads: int) -> int:
    """How many chunks torch sums one row of ``width`` values in on ``threads`` threads (1:
    the row whole)."""
    if threads < 2 or width < TORCH_GRAIN:
        return 1
    return min(threads, -(-width // TORCH_GRAIN))


def tournament_state() -> np.ndarray:
    """What the parts of one row's :func:`tournament_part` share (zeroed; one per row)."""
    _use(True)
    return np.zeros(_compiled.PART_STATE_SIZE, dtype=np.uint8)


def tournament_part(probs: np.ndarray, values: np.ndarray, offsets: np.ndarray,
                    order: tuple[int, int], part: int, state: np.ndarray) -> None:
    """Chunk ``part`` of :func:`tournament` of one row that torch sums in chunks on its
    threads (:func:`split_parts` > 1 for ``order``'s threads): the calls for parts 0 ..
    ``split_parts - 1``, sharing one :func:`tournament_state`, must run at once, each on a
    thread of its own (they meet at every layer's sum); together they give :func:`tournament`'s
    bits in about 1 / parts of its time. A part left alone raises RuntimeError after 10 s.
    Compiled only; releases the GIL."""
    _use(True)
    _rows(probs, np.float32, "tournament_part: probs")
    lanes, threads = order
    if probs.shape[0] != 1 or split_parts(probs.shape[1], threads) < 2:
        raise ValueError("tournament_part: one row that torch sums in chunks")
    if values.dtype != np.uint8 or len(values) < probs.shape[1]:
        raise ValueError("tournament_part: values from tournament_values for this width")
    offsets = np.ascontiguousarray(offsets, dtype=np.int64).reshape(-1)
    _compiled.tournament_part(probs, np.ascontiguousarray(values), offsets, len(offsets), lanes,
                              threads, part, state, DEFAULT_VARIANT)


def ranks(seeds: Any, n: int, vocab_size: int, *, inverse: bool = False,
          out: np.ndarray | None = None, compiled: bool | None = None) -> np.ndarray:
    """int64 ``[B, n]``: ``feistel_rank(seeds[b], v, vocab_size)`` for ``v < n`` (``n <=
    vocab_size``); with ``inverse`` (``n == vocab_size``) the permutation itself, ``argsort``
    of the ranks: ``out[b, rank] = v``. Into ``out`` (C-contiguous int64 ``[B, n]``) when
    given, so that blocks of rows can fill one array from several threads."""
    seeds = _seeds(seeds)
    if inverse and n != vocab_size:
        raise ValueError("ranks: the inverse needs n == vocab_size")
    if out is not None and (out.shape != (len(seeds), n) or out.dtype != np.int64
                            or not out.flags.c_contiguous):
        raise ValueError("ranks: out must be a C-contiguous int64 [len(seeds), n] array")
    if not _use(compiled):
        r = np.asarray(feistel_rank(NUMPY, seeds[:, None], np.arange(n, dtype=np.int64)[None, :],
                                    vocab_size)).astype(np.int64).reshape(len(seeds), n)
        r = np.argsort(r, axis=1, kind="stable") if inverse else r
        if out is None:
            return r
        out[:] = r
        return out
    if out is None:
        out = np.empty((len(seeds), n), dtype=np.int64)
    _compiled.ranks(seeds, n, vocab_size, feistel_bits(vocab_size), out, inverse, DEFAULT_VARIANT)
    return out


def its_choose(probs: np.ndarray, seeds: Any, u: Any, vocab_size: int, *,
               compiled: bool | None = None) -> np.ndarray:
    """Inverse-transform sampling (the ``its`` sampler's step): per row of ``probs`` (float32
    ``[B, vocab_size]``, C-contiguous), the probabilities in the rank order of ``seeds[b]``'s
    Feistel permutation, their float64 cumsum, the first rank whose cdf reaches ``u[b]``
    (else the last rank with positive probability) and the token at that rank. int64 ``[B]``;
    the compiled kernel gives -1 for rows holding a NaN, which the caller computes itself."""
    _rows(probs, np.float32, "its_choose: probs")
    seeds = _seeds(seeds)
    u = np.ascontiguousarray(np.asarray(u, dtype=np.float64).reshape(-1))
    if probs.shape != (len(seeds), vocab_size) or len(u) != len(seeds):
        raise ValueError("its_choose: probs [B, vocab_size], one seed and u per row")
    out = np.empty(len(seeds), dtype=np.int64)
    if _use(compiled):
        _compiled.its_choose(probs, vocab_size, seeds, u, vocab_size, feistel_bits(vocab_size), out,
                             DEFAULT_VARIANT)
        return out
    table = ranks(seeds, vocab_size, vocab_size, inverse=True, compiled=False)
    permuted = np.take_along_axis(probs, table, axis=1)
    cdf = np.cumsum(permuted, axis=1, dtype=np.float64)
    for b in range(len(seeds)):
        k = int(np.searchsorted(cdf[b], u[b]))
        if k == vocab_size:
            positive = np.flatnonzero(permuted[b] > 0)
            k = int(positive[-1]) if len(positive) else -1
        out[b] = table[b, k]
    return out


def keyed_argmax(x: np.ndarray, seeds: Any, n: int, noise: int, combine: int,
                 offsets: Any = None, *, compiled: bool | None = None) -> np.ndarray:
    """Per row ``b`` of ``x`` (C-contiguous ``[B, W]``, ``n <= W``): the first index of the
    maximum (NaN the largest, as numpy's and torch's argmax) over ``v < n`` of

    * ``COMBINE_F32``: ``f32(x[b, v] + f32(noise))`` (float32 ``x``; the exp sampler),
    * ``COMBINE_F64_OF_F32``: ``f64(x[b, v]) + noise`` (float32 ``x``; EXPGumbel),
    * ``COMBINE_F64``: ``(x[b, v] - offsets[b]) + noise`` (float64 ``x``; PF),

    the noise being that of ``seeds[b]`` and token v: ``NOISE_GUMBEL``, the float64
    :func:`~evalrun.kernels.token_stats.exp_gumbel` row, or ``NOISE_EXP``,
    ``neg_log_uniform(pair(seed, code(v)))``. int64 ``[B]``."""
    f64 = combine == COMBINE_F64
    _rows(x, np.float64 if f64 else np.float32, "keyed_argmax: x")
    seeds = _seeds(seeds)
    if len(seeds) != x.shape[0] or not 1 <= n <= x.shape[1]:
        raise ValueError("keyed_argmax: one seed per row, 1 <= n <= the row's width")
    off = np.ascontiguousarray(np.asarray(offsets if f64 else [], dtype=np.float64).reshape(-1))
    out = np.empty(len(seeds), dtype=np.int64)
    if _use(compiled):
        _compiled.keyed_argmax(x, f64, x.shape[1], seeds, off, n, noise, combine, out,
                               DEFAULT_VARIANT)
        return out
    for b in range(len(seeds)):
        if noise == NOISE_GUMBEL:
            g = np.asarray(exp_gumbel(NUMPY, seeds[b:b + 1], n))[0]
        else:
            g = np.asarray(neg_log_uniform(NUMPY, pair(NUMPY, seeds[b], range_codes(NUMPY, n))))
        if combine == COMBINE_F32:
            values = x[b, :n] + g.astype(np.float32)
        elif combine == COMBINE_F64_OF_F32:
            values = x[b, :n].astype(np.float64) + g
        else:
            values = (x[b, :n] - off[b]) + g
        out[b] = int(np.argmax(values))
    return out
