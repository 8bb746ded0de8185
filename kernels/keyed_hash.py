"""Keyed 64-bit hashing, vectorised: the one source of pseudo-randomness of the engine.

* :func:`mix64` is the SplitMix64 output finaliser (Steele, Lea & Flood 2014; constants from
  Stafford's "Mix13"), a bijection on 64-bit words with full avalanche.
* :func:`pair` hashes a well-mixed 64-bit seed with a small integer (a token id, a tree node,
  a Feistel half): ``mix64(seed ^ (x * GOLDEN))``. Multiplying by the odd constant ``GOLDEN``
  (2**64 / golden ratio) keeps distinct ``x`` distinct, as in SplitMix64's own state stepping.
* :func:`below` turns a hash into a Bernoulli(p) draw by comparing its top 53 bits with
  ``round(p * 2**53)`` in integers, so numpy and torch agree exactly.
* :func:`feistel_rank` is a keyed permutation of ``[0, V)`` computed per element in O(1): a
  4-round (possibly unbalanced) Feistel network on ``ceil(log2 V)`` bits with cycle walking
  (Black & Rogaway 2002), so a token's rank under a per-position permutation is found without
  materialising the permutation.
"""

from __future__ import annotations

from typing import Any

from evalrun.kernels.backend import Ops

#: version of the keyed functions' outputs. Every stored green list, score and p-value depends
#: on the constants below and on how they are combined: bump this with any change to them and
#: pin the new outputs in tests/watermark/engine/test_golden_values.py (which fails until then).
KEYING_VERSION = 1

GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB

#: domain-separation tags mixed into seeds for the different uses of one context seed
TAG_SKIP = 0x5C1F_0D3E_A2B4_7791
TAG_UNIFORM = 0x1D5E_77A1_C3F0_9B25
TAG_NODE = 0x0B1A_A27E_5E3D_4C67
TAG_KEYSEQ = 0x3A7C_5F19_0E6B_D2C3
TAG_NULL = 0x6E11_D00D_4B1D_5EED
TAG_ROUNDS = (0x2545_F491_4F6C_DD1D, 0x7F4A_7C15_9E37_79B9, 0x4CF5_AD43_2745_937F,
              0x1B87_3593_CC9E_2D51)
NUM_ROUNDS = 4


def mix64(ops: Ops, x: Any) -> Any:
    """SplitMix64 finaliser on 64-bit words (a new array; ``x`` is left as it is).

    After the first step every operation works in place, the shifts into one scratch array:
    two arrays instead of eight per call. Vocabulary-wide hashing runs inside the decoding
    loop, where each fresh array is memory the forward pass has just pushed out of cache."""
    tmp = ops.shr(x, 30)
    tmp ^= x
    x = tmp
    if not getattr(x, "shape", ()):  # a scalar: nothing to gain in place
        x = x * ops.const(_M1)
        x = x ^ ops.shr(x, 27)
        x = x * ops.const(_M2)
        return x ^ ops.shr(x, 31)
    x *= ops.const(_M1)
    scratch = ops.shr(x, 27)
    x ^= scratch
    x *= ops.const(_M2)
    x ^= ops.shr(x, 31, out=scratch)
    return x


def code(ops: Ops, x: Any) -> Any:
    """Spread small non-negative integers (token ids, node ids) over 64 bits (a bijection)."""
    return ops.u64(x) * ops.const(GOLDEN)


_RANGE_CODES: dict[tuple[str, str, int], Any] = {}


def range_codes(ops: Ops, n: int) -> Any:
    """``code(ops, arange(n))``, kept per backend, device and ``n``: every vocabulary-wide
    table starts from it (read-only; callers must not write into it)."""
    key = (ops.name, str(getattr(ops, "device", "")), n)
    found = _RANGE_CODES.get(key)
    if found is None:
        if len(_RANGE_CODES) >= 16:
            _RANGE_CODES.clear()
        found = _RANGE_CODES[key] = code(ops, ops.arange(n))
    return found


def pair(ops: Ops, seed: Any, x_code: Any) -> Any:
    """Hash of (seed, x) given ``x_code = code(ops, x)``; broadcasts."""
    return mix64(ops, seed ^ x_code)


def tag(ops: Ops, seed: Any, tag_value: int) -> Any:
    """A sub-seed of ``seed`` for one use (skip decision, uniform draw, ...)."""
    return mix64(ops, seed ^ ops.const(tag_value))


def threshold53(p: float) -> int:
    """Integer threshold so that ``top53(h) < threshold53(p)`` has probability p."""
    return int(round(min(max(p, 0.0), 1.0) * (1 << 53)))


def below(ops: Ops, h: Any, p: float) -> Any:
    """Boolean Bernoulli(p) draws from hash words."""
    return ops.below53(h, threshold53(p))


def uniform(ops: Ops, h: Any) -> Any:
    """Floats in (0, 1) from hash words; ``1 - uniform(h) == uniform(~h)`` exactly."""
    return ops.to_unit(h)


_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of ln 2: exact high part
_LN2_LO = 1.90821492927058770002e-10
_SQRT_HALF = 0.7071067811865476


def exact_log(ops: Ops, x: Any) -> Any:
    """``log(x)`` for positive finite floats from basic IEEE operations only (frexp, +, *, /),
    so numpy and torch return the same bits (library ``log`` functions differ in the last ulp).

    ``x = m 2**e`` with ``m`` in [sqrt(1/2), sqrt(2)); ``log m = 2 atanh(s)``, ``s = (m-1)/(m+1)``,
    ``|s| <= 0.1716``, summed to the ``s**21`` term (truncation below 1e-18 relative).
    """
    m, e = ops.frexp(x)
    low = m < _SQRT_HALF
    m = ops.where(low, m * 2.0, m)
    e = ops.where(low, e - 1.0, e)
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    poly = z * (1.0 / 21.0)  # Horner's rule, in place: this runs on every vocabulary entry
    poly += 1.0 / 19.0
    for k in range(8, -1, -1):
        poly *= z
        poly += 1.0 / (2 * k + 1)
    log_m = 2.0 * s * poly
    return (e * _LN2_LO + log_m) + e * _LN2_HI


def neg_log_uniform(ops: Ops, h: Any) -> Any:
    """``-log(uniform(h))``, bit-identical on every backend (:func:`exact_log`)."""
    return -exact_log(ops, uniform(ops, h))


def complement(ops: Ops, h: Any) -> Any:
    """Words whose uniform is exactly ``1 - uniform(h)``."""
    return h ^ ops.const((1 << 64) - 1)


def stream(ops: Ops, seed: int, n: int) -> Any:
    """``n`` pseudo-random 64-bit words from an integer seed (key sequences, null keys)."""
    base = mix64(ops, ops.u64([seed & ((1 << 64) - 1)]))
    return mix64(ops, base ^ code(ops, ops.arange(n)))


def _feistel_once(ops: Ops, seed: Any, x: Any, bits: int) -> Any:
    hi_bits, lo_bits = bits // 2, bits - bits // 2
    for r in range(NUM_ROUNDS):
        lo_mask = (1 << lo_bits) - 1
        hi_mask = (1 << hi_bits) - 1
        hi = ops.shr(x, lo_bits)
        lo = x & ops.const(lo_mask)
        f = mix64(ops, seed ^ ops.const(TAG_ROUNDS[r]) ^ code(ops, lo)) & ops.const(hi_mask)
        # (hi, lo) -> (lo, hi ^ F(lo)): a bijection on `bits`-bit words; the split swaps
        x = (lo * ops.const(1 << hi_bits)) | (hi ^ f)
        hi_bits, lo_bits = lo_bits, hi_bits
    return x


def feistel_bits(vocab_size: int) -> int:
    return max(2, (vocab_size - 1).bit_length())


def feistel_rank(ops: Ops, seed: Any, x: Any, vocab_size: int) -> Any:
    """Rank of ``x`` (ints in ``[0, vocab_size)``) under the keyed permutation of ``seed``.

    ``seed`` and ``x`` broadcast; returns words in ``[0, vocab_size)``. For each fixed seed the
    map is a bijection of ``[0, vocab_size)`` (cycle walking stays inside the domain).
    """
    bits = feistel_bits(vocab_size)
    xs = ops.u64(x)
    zero = ops.const(0)
    seed_b = seed ^ (xs & zero)  # broadcast both to the output shape
    xs = xs ^ (seed_b & zero)
    limit = ops.const(vocab_size)
    y = _feistel_once(ops, seed_b, xs, bits)
    out = y >= limit
    while ops.any(out):
        idx = ops.nonzero(out)
        y[idx] = _feistel_once(ops, seed_b[idx], y[idx], bits)
        out = y >= limit
    return y
