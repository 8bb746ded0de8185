"""Unigram watermark (Zhao et al.): green list, detection, processor, calibration, specs.

Reference values: ``_ref_mask`` below transcribes ``GPTWatermarkBase.__init__`` of
github.com/XuandongZhao/Unigram-Watermark (``gptwm.py``): ``np.random.default_rng`` seeded
with the first 4 bytes (little endian) of sha256 over ``np.int64(watermark_key)``, shuffling a
mask of ``int(fraction * vocab_size)`` True entries. ``KNOWN_HEADS`` were produced by that
transcription with numpy 2.4.
"""

from __future__ import annotations

import hashlib
import math
import re

import numpy as np
import pytest
import scipy.stats
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from evalrun._util.errors import SpecError
from evalrun._util.specs import parse_spec
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes.unigram import Unigram, build, green_mask, key_seed

KEY = "20240611"


def _ref_mask(watermark_key: int, fraction: float, vocab_size: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(np.int64(watermark_key)).digest()[:4], "little")
    rng = np.random.default_rng(seed)
    mask = np.array([True] * int(fraction * vocab_size) + [False] * (vocab_size - int(fraction * vocab_size)))
    rng.shuffle(mask)
    return mask


#: (key, fraction, vocab) -> first 8 green ids, from _ref_mask (numpy 2.4)
KNOWN_HEADS = {
    (0, 0.5, 50272): [1, 4, 6, 9, 11, 12, 16, 17],
    (15485863, 0.25, 32000): [0, 5, 6, 10, 12, 18, 28, 29],
}


def _scheme(gamma: float = 0.5, delta: float = 2.0, repeats: str = "ignore") -> Unigram:
    return parse_watermark(f"unigram:gamma={gamma},delta={delta},repeats={repeats}")


# ------------------------------------------------------------------------------------------
# Green list
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key,fraction,vocab", [(0, 0.5, 50272), (15485863, 0.25, 32000),
                                                (-7, 0.3, 1000), (2**63 - 1, 0.1, 997)])
def test_integer_keys_give_the_authors_green_list(key: int, fraction: float, vocab: int) -> None:
    mine = green_mask(str(key), vocab, fraction)
    assert np.array_equal(mine, _ref_mask(key, fraction, vocab))
    assert mine.sum() == int(fraction * vocab)
    if (key, fraction, vocab) in KNOWN_HEADS:
        assert np.flatnonzero(mine)[:8].tolist() == KNOWN_HEADS[(key, fraction, vocab)]


def test_string_keys_and_distinct_keys() -> None:
    a = green_mask("my secret", 1000, 0.5)
    assert a.sum() == 500 and np.array_equal(a, green_mask("my secret", 1000, 0.5))
    assert not np.array_equal(a, green_mask("my secret!", 1000, 0.5))
    assert int(np.flatnonzero(a)[0]) >= 0
    assert key_seed(" 42 ") == key_seed("42")


# ------------------------------------------------------------------------------------------
# Detection on constructed sequences
# ------------------------------------------------------------------------------------------
def test_all_green_and_alternating() -> None:
    vocab = 1000
    mask = green_mask(KEY, vocab, 0.5)
    green, red = np.flatnonzero(mask), np.flatnonzero(~mask)
    scheme = _scheme()
    det = scheme.detect(green[:100], KEY, vocab)
    assert (det.num_tokens_scored, det.num_green_tokens) == (100, 100)
    assert det.z_score == pytest.approx(10.0)
    assert det.p_value == pytest.approx(scipy.stats.hypergeom.sf(99, vocab, 500, 100))
    assert det.p_value < 1e-30 and det.extra["binomial_p_value"] == pytest.approx(0.5**100)
    alt = np.ravel(np.column_stack([green[:50], red[:50]]))
    det = scheme.detect(alt, KEY, vocab)
    assert (det.num_tokens_scored, det.num_green_tokens, det.z_score) == (100, 50, 0.0)
    assert scheme.green_mask(KEY, vocab)[alt].tolist() == [True, False] * 50


def test_repeats_ignore_versus_count() -> None:
    vocab = 1000
    mask = green_mask(KEY, vocab, 0.5)
    g = int(np.flatnonzero(mask)[0])
    r = np.flatnonzero(~mask)[:10].tolist()
    seq = [g] * 30 + r
    ignore = _scheme().detect(seq, KEY, vocab)
    count = _scheme(repeats="count").detect(seq, KEY, vocab)
    assert (ignore.num_tokens_scored, ignore.num_green_tokens) == (11, 1)
    assert (count.num_tokens_scored, count.num_green_tokens) == (40, 30)
    assert count.p_value == count.extra["binomial_p_value"]
    assert ignore.p_value == ignore.extra["hypergeom_p_value"]
    assert count.p_value < 0.01 < ignore.p_value


def test_prefix_p_values_match_detect() -> None:
    rng = np.random.default_rng(0)
    seq = rng.integers(0, 300, 80)
    seq[40:60] = seq[:20]
    for repeats in ("ignore", "count"):
        scheme = _scheme(0.3, repeats=repeats)
        prefix = scheme.prefix_p_values(seq, KEY, 300)
        want = [scheme.detect(seq[: i + 1], KEY, 300).p_value for i in range(len(seq))]
        assert prefix.shape == (80,) and np.allclose(prefix, want, rtol=1e-12, atol=0)
    assert scheme.prefix_p_values([], KEY, 300).shape == (0,)
    empty = scheme.detect([], KEY, 300)
    assert empty.num_tokens_scored == 0 and empty.p_value == 1.0


def test_bad_token_ids() -> None:
    with pytest.raises(ValueError, match="token ids"):
        _scheme().detect([1, 1000], KEY, 1000)
    with pytest.raises(ValueError, match="token ids"):
        _scheme().detect([-1, 3], KEY, 1000)


# ------------------------------------------------------------------------------------------
# Processor and generation
# ------------------------------------------------------------------------------------------
def test_processor_adds_exactly_delta_batched() -> None:
    torch = pytest.importorskip("torch")
    vocab = 700
    scheme = _scheme(0.25, delta=1.5)
    mask = torch.from_numpy(scheme.green_mask(KEY, vocab))
    scores = torch.randn(5, vocab, generator=torch.Generator().manual_seed(1)) * 3
    ids = torch.zeros(5, 3, dtype=torch.long)
    out = scheme.logits_processor(KEY, vocab, temperature=1.0, seed=0)(ids, scores.clone())
    assert torch.equal(out[:, mask], scores[:, mask] + 1.5)
    assert torch.equal(out[:, ~mask], scores[:, ~mask])
    # logits wider than the vocabulary: the extra columns are never green
    wide = torch.randn(2, vocab + 8, generator=torch.Generator().manual_seed(2))
    out_wide = scheme.logits_processor(KEY, vocab, temperature=1.0, seed=0)(ids[:2], wide.clone())
    assert torch.equal(out_wide[:, vocab:], wide[:, vocab:])
    hot = scheme.logits_processor(KEY, vocab, temperature=0.7, seed=0)(ids, scores.clone())
    assert torch.allclose(hot, out / 0.7)
    as_np = scheme.logits_processor(KEY, vocab, temperature=1.0, seed=0)(ids.numpy(), scores.numpy())
    assert isinstance(as_np, np.ndarray) and np.array_equal(as_np, out.numpy())
    with pytest.raises(ValueError, match="temperature"):
        scheme.logits_processor(KEY, vocab, temperature=-1.0, seed=0)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("repeats", ["ignore", "count"])
def test_generated_text_is_detected(repeats: str) -> None:
    vocab, steps, batch = 1000, 200, 4
    scheme = _scheme(0.5, 2.0, repeats)
    proc = scheme.logits_processor(KEY, vocab, temperature=1.0, seed=0)
    rng = np.random.default_rng(8)
    ids = np.zeros((batch, 0), dtype=np.int64)
    for _ in range(steps):
        logits = rng.standard_normal((batch, vocab)) * 1.5
        probs = _softmax(logits)
        assert (-(probs * np.log(probs)).sum(-1)).min() >= 3.0
        shifted = _softmax(proc(ids, logits))
        ids = np.concatenate([ids, [[rng.choice(vocab, p=row)] for row in shifted]], axis=1)
    for row in ids:
        det = scheme.detect(row, KEY, vocab)
        assert det.p_value < 1e-4 and det.extra["binomial_p_value"] < 1e-4
        assert scheme.detect(row, "another key", vocab).p_value > 1e-4


# ------------------------------------------------------------------------------------------
# Null calibration
# ------------------------------------------------------------------------------------------
N_NULL, ALPHA = 2000, 0.02


def _inside(pvals: np.ndarray) -> bool:
    lo, hi = scipy.stats.binom.interval(0.95, N_NULL, ALPHA)
    return lo <= int((pvals <= ALPHA).sum()) <= hi


def test_null_calibration_count_binomial() -> None:
    # 137 tokens at green probability 1/2: the exact test attains size 0.01996 (most lengths
    # give a conservative ~0.017 because the binomial is discrete).
    rng = np.random.default_rng(31)
    seqs = rng.integers(0, 1000, (N_NULL, 137))
    scheme = _scheme(0.5, repeats="count")
    p = np.array([scheme.detect(s, KEY, 1000).extra["binomial_p_value"] for s in seqs])
    assert _inside(p)


def test_null_calibration_unique_hypergeometric() -> None:
    # 163 distinct tokens (the hypergeometric test attains size 0.0198) plus 37 repeats of them
    rng = np.random.default_rng(32)
    scheme = _scheme(0.5)
    pvals = []
    for _ in range(N_NULL):
        distinct = rng.permutation(1000)[:163]
        seq = np.concatenate([distinct, rng.choice(distinct, 37)])
        rng.shuffle(seq)
        det = scheme.detect(seq, KEY, 1000)
        assert det.num_tokens_scored == 163
        pvals.append(det.p_value)
    assert _inside(np.array(pvals))


# ------------------------------------------------------------------------------------------
# Spec and key validation
# ------------------------------------------------------------------------------------------
def test_defaults_and_canonical_spec() -> None:
    s = parse_watermark("unigram:gamma=0.5")
    assert isinstance(s, Unigram) and (s.gamma, s.delta, s.repeats) == (0.5, 2.0, "ignore")
    assert str(s.spec) == "unigram:delta=2.0,gamma=0.5,repeats=ignore"
    assert parse_watermark(str(s.spec)).spec == s.spec
    assert KEY not in repr(s)


@pytest.mark.parametrize("text,key", [
    ("unigram:gamma=0", "gamma"), ("unigram:gamma=1.0", "gamma"), ("unigram:gamma=nan", "gamma"),
    ("unigram:gamma=x", "gamma"), ("unigram:delta=-0.5", "delta"), ("unigram:delta=nan", "delta"),
    ("unigram:repeats=unique", "repeats"), ("unigram:context=2", "context"),
])
def test_bad_specs_name_the_key(text: str, key: str) -> None:
    with pytest.raises(SpecError, match=key):
        parse_watermark(text)


@pytest.mark.parametrize("key", [None, "", "   "])
def test_missing_key_rejected(key) -> None:
    with pytest.raises(SpecError, match="key"):
        _scheme().detect([1, 2], key, 10)
    with pytest.raises(SpecError, match="key"):
        _scheme().logits_processor(key, 10, temperature=1.0, seed=0)


@settings(max_examples=60, deadline=None)
@given(gamma=st.floats(min_value=1e-6, max_value=1 - 1e-6), delta=st.floats(min_value=0, max_value=50),
       repeats=st.sampled_from(["ignore", "count"]))
def test_valid_specs_round_trip(gamma: float, delta: float, repeats: str) -> None:
    s = parse_watermark(f"unigram:gamma={gamma!r},delta={delta!r},repeats={repeats}")
    assert (s.gamma, s.delta, s.repeats) == (gamma, delta, repeats)
    assert build(parse_spec(str(s.spec))).spec == s.spec


@settings(max_examples=60, deadline=None)
@given(gamma=st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0), st.just(float("nan"))))
def test_out_of_range_gamma_rejected(gamma: float) -> None:
    with pytest.raises(SpecError, match="gamma"):
        parse_watermark(f"unigram:gamma={gamma!r}")


@settings(max_examples=60, deadline=None)
@given(delta=st.one_of(st.floats(max_value=-1e-300), st.just(float("inf")), st.just(float("nan"))))
def test_bad_delta_rejected(delta: float) -> None:
    with pytest.raises(SpecError, match="delta"):
        parse_watermark(f"unigram:delta={delta!r}")


@settings(max_examples=60, deadline=None)
@given(key=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,11}", fullmatch=True))
def test_unknown_keys_rejected(key: str) -> None:
    assume(key not in {"gamma", "delta", "repeats"})
    with pytest.raises(SpecError, match="unknown key"):
        parse_watermark(f"unigram:{key}=1")


@settings(max_examples=60, deadline=None)
@given(text=st.text(min_size=1, max_size=16))
def test_any_nonblank_key_gives_a_stable_list(text: str) -> None:
    assume(text.strip())
    m = green_mask(text, 64, 0.25)
    assert m.sum() == 16 and np.array_equal(m, green_mask(text, 64, 0.25))
    if re.fullmatch(r"[+-]?[0-9]+", text.strip()) and -(2**63) <= int(text.strip()) < 2**63:
        assert np.array_equal(m, _ref_mask(int(text.strip()), 0.25, 64))
    assert math.isfinite(_scheme(0.25).detect([1, 2, 3], text, 64).p_value)
