"""Golden values of the keyed functions (issue 18): a silent re-keying must fail here.

Every green list, score and p-value evalrun has stored is a function of the keyed hashes in
:mod:`evalrun.kernels.keyed_hash` (SplitMix64's multipliers, ``GOLDEN``, the Feistel round tags,
the domain tags) and of :func:`~evalrun.watermark.randomness.derive_key`. A change to any of
them keeps every property test green (a re-keyed hash is as random as the old one) while
making every stored result irreproducible. These tests pin today's outputs, version
``KEYING_VERSION == 1``; a deliberate change bumps that version and pins new values.

Where a value has a closed form (z-scores; binomial, Erlang, hypergeometric and normal
p-values) it is checked against the formula evaluated here with scipy, from pinned counts.
Each pin runs on numpy and torch (same bits, the backends' parity promise).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from evalrun.kernels import keyed_hash as H
from evalrun.kernels import seed_words as kr
from evalrun.kernels.backend import NUMPY, Ops, TorchOps
from evalrun.kernels.green import green_mask, is_green
from evalrun.watermark.engine.randomness import derive_key
from evalrun.watermark.registry import parse_watermark

BACKENDS: list[Ops] = [NUMPY, TorchOps()]
KEY = "golden-key"
KEY_WORD = 0x93226925756E6A34  # derive_key(KEY)
VOCAB = 1000
#: a fixed text (48 token ids below VOCAB; 78 and 799 occur twice)
TOKENS = [241, 675, 92, 214, 317, 309, 908, 799, 915, 995, 78, 142, 867, 78, 165, 180, 913, 359,
          263, 169, 458, 588, 800, 616, 986, 105, 487, 565, 687, 4, 202, 465, 66, 975, 641, 799,
          515, 596, 345, 325, 129, 206, 766, 442, 826, 278, 720, 874]


def words(ops: Ops, x: Any) -> list[int]:
    """64-bit words as Python ints on either backend."""
    return [int(v) for v in ops.to_numpy(x).astype(np.int64).view(np.uint64)]


def test_keying_version() -> None:
    assert H.KEYING_VERSION == 1, "a new keying version needs new golden values in this file"


def test_derive_key() -> None:
    assert derive_key(KEY) == KEY_WORD
    assert derive_key("15485863") == 0xAE19CBE7B8429E53


@pytest.mark.parametrize("ops", BACKENDS, ids=lambda o: o.name)
@pytest.mark.parametrize("vocab,expected", [
    (2, [[1, 0], [1, 0], [0, 1], [1, 0]]),
    (3, [[2, 0, 1], [1, 0, 2], [2, 1, 0], [1, 0, 2]]),
    (1000, [[232, 217, 755, 804], [939, 148, 178, 127], [443, 70, 414, 176],
            [458, 387, 112, 954]]),
    (1025, [[199, 409, 672, 781], [276, 134, 46, 34], [859, 166, 725, 811],
            [999, 716, 902, 923]]),
    (50257, [[687, 31323, 37191, 21053], [20332, 32891, 34801, 13149],
             [34486, 46270, 24169, 34133], [40805, 11462, 23960, 14107]]),
])
def test_feistel_rank(ops: Ops, vocab: int, expected: list[list[int]]) -> None:
    """Ranks of tokens 0, 1, V // 2 and V - 1 (deduplicated) under four seed words: the
    its permutation of every position (round tags, GOLDEN, cycle walking)."""
    seeds = ops.u64([0, 1, 0x0123456789ABCDEF, 2**64 - 1])[:, None]
    tokens = sorted({0, 1, vocab // 2, vocab - 1})
    ranks = H.feistel_rank(ops, seeds, ops.i64(tokens)[None, :], vocab)
    assert ops.to_numpy(ranks).astype(np.int64).tolist() == expected


#: window seeds (context 1) of KEY_WORD for previous tokens 0, 1, 7, 31999, 12345
CONTEXTS = [0, 1, 7, 31999, 12345]
SEEDS = [0x38A871F6BB9C8B4C, 0xB5C36E2140C44348, 0xF2065E056C6E7A43, 0x9BBDB6CD4B408CED,
         0xB59E5A3B84BF5FFA]


@pytest.mark.parametrize("ops", BACKENDS, ids=lambda o: o.name)
def test_window_seeds(ops: Ops) -> None:
    ctx = ops.i64(np.array(CONTEXTS)[:, None])
    assert words(ops, kr.window_seeds(ops, ops.u64([KEY_WORD]), ctx)) == SEEDS


@pytest.mark.parametrize("ops", BACKENDS, ids=lambda o: o.name)
def test_green_membership(ops: Ops) -> None:
    """kgw (gamma 0.25): which of tokens 0..15 are green after each context of ``SEEDS``."""
    green = is_green(ops, ops.u64(SEEDS)[:, None], ops.i64(np.arange(16))[None, :], 0.25)
    rows = ["".join("1" if b else "0" for b in row) for row in ops.to_numpy(green).tolist()]
    assert rows == ["0001000001000100", "1110000000000010", "0000010010001000",
                    "0100010000011000", "0000000100001100"]


@pytest.mark.parametrize("ops", BACKENDS, ids=lambda o: o.name)
def test_green_mask(ops: Ops) -> None:
    """The generation-side mask (gamma 0.5, 64 tokens) of the first two seeds, as bit
    patterns with token 0 in the lowest bit."""
    mask = ops.to_numpy(green_mask(ops, ops.u64(SEEDS[:2]), 64, 0.5))
    packed = [sum(1 << t for t in range(64) if row[t]) for row in mask]
    assert packed == [0x1D7B9C132C3F376A, 0x65600075BEF96397]


# --- one full detection per scheme -------------------------------------------------------
def z_formula(green: int, n: int, gamma: float) -> float:
    return (green - gamma * n) / math.sqrt(n * gamma * (1 - gamma))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("spec,n,green", [
    ("kgw:gamma=0.25,context=1", 47, 8),
    ("kgw:gamma=0.5,randomness=minhash,context=3,skip=0.2", 29, 11),
])
def test_kgw_sum_detection(backend: str, spec: str, n: int, green: int) -> None:
    gamma = float(parse_watermark(spec).sampler.gamma)
    det = parse_watermark(spec).detect(TOKENS, KEY, VOCAB, backend=backend)
    assert (det.num_tokens_scored, det.num_green_tokens, det.score) == (n, green, green)
    assert det.z_score == z_formula(green, n, gamma)
    assert det.p_value == pytest.approx(stats.binom.sf(green - 1, n, gamma), rel=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("spec,units,score", [
    ("exp", 47, 57.69697784434349),
    ("binary", 531, 502.14723534530697),
    ("binary:randomness=minhash,context=2,repeats=count", 523, 504.2725682107759),
])
def test_erlang_detection(backend: str, spec: str, units: int, score: float) -> None:
    """exp scores tokens, binary the bits of their Huffman codes; p = P[Gamma(units) >= score]."""
    det = parse_watermark(spec).detect(TOKENS, KEY, VOCAB, backend=backend)
    assert det.score == score
    assert det.extra.get("num_bits_scored", det.num_tokens_scored) == units
    assert det.p_value == pytest.approx(stats.gamma.sf(score, units), rel=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("spec,score,exceed,offset", [
    ("kgw:randomness=fixed,key_len=16,permutations=30", 6.0, 9, 7),
    ("exp:randomness=fixed,key_len=16,permutations=50", 7.537433320338462, 46, 1),
    ("its:permutations=50", 0.47807631343197365, 14, None),
    ("its:randomness=fixed,key_len=16,score=edit,permutations=30", 4.831385551715073, 6, 13),
])
def test_permutation_detection(backend: str, spec: str, score: float, exceed: int,
                               offset: int | None) -> None:
    """Scores tested against null keys: p = (1 + #null scores >= score) / (1 + N); the count
    pins the null keys (derived from the canonical spec) as well as the text's score."""
    scheme = parse_watermark(spec)
    det = scheme.detect(TOKENS, KEY, VOCAB, backend=backend)
    assert det.score == score
    assert det.p_value == (1 + exceed) / (1 + scheme.scoring.permutations)
    assert det.extra.get("offset") == offset


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_kgw_fixed_z_score(backend: str) -> None:
    det = parse_watermark("kgw:randomness=fixed,key_len=16,permutations=30").detect(
        TOKENS, KEY, VOCAB, backend=backend)
    assert (det.num_tokens_scored, det.num_green_tokens) == (48, 18)
    assert det.z_score == z_formula(18, 48, 0.25) == 2.0


def test_unigram_detection() -> None:
    """One green list for the key; 46 distinct tokens are scored (repeats ignored)."""
    det = parse_watermark("unigram:gamma=0.5").detect(TOKENS, KEY, VOCAB)
    n, green = 46, 33
    assert (det.num_tokens_scored, det.num_green_tokens) == (n, green)
    assert det.z_score == z_formula(green, n, 0.5)
    assert det.p_value == pytest.approx(stats.hypergeom.sf(green - 1, VOCAB, 500, n), rel=1e-12)
    assert det.extra["binomial_p_value"] == pytest.approx(stats.binom.sf(green - 1, n, 0.5),
                                                          rel=1e-12)


@pytest.mark.parametrize("seeding,n,green", [("lefthash", 47, 8), ("selfhash", 45, 10)])
def test_kgw_compat_detection(seeding: str, n: int, green: int) -> None:
    """The reference detector's z and normal p-value (its hash key, its green lists)."""
    det = parse_watermark(f"kgw:seeding={seeding}").detect(TOKENS, "15485863", VOCAB)
    assert (det.num_tokens_scored, det.num_green_tokens) == (n, green)
    z = z_formula(green, n, 0.25)
    assert det.z_score == z
    assert det.p_value == stats.norm.sf(z)
    assert det.extra["binomial_p_value"] == pytest.approx(stats.binom.sf(green - 1, n, 0.25),
                                                          rel=1e-12)
