"""DiPmark (``dipmark``): MarkLLM agreement, exact null, generation, specs.

Reference values: ``tests/watermark/schemes/data/markllm_reference.json`` (MarkLLM 112fa74 on the random
2-layer GPT-2 of ``scripts/markllm_reference.py`` at V=1000 and V=50257, DiP's hash key expanded
from config key 42 as the script's docstring says): per sequence the ids, MarkLLM's ``score``,
``is_watermarked`` and per-position quantiles (-1 for a dropped repeated context).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from evalrun._util.errors import SpecError
from evalrun.kernels.backend import NUMPY
from evalrun.kernels.keyed_hash import GOLDEN, feistel_rank
from evalrun.watermark.engine.randomness import derive_key
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes.dipmark import (
    TAG_DIPMARK,
    DiPmark,
    context_seed,
    green_probability,
    markllm_hash_key,
    native_hash_key,
    permutation,
    quantiles,
)

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = json.loads((ROOT / "tests" / "watermark" / "schemes" / "data" / "markllm_reference.json").read_text())
MARKLLM_KEY = str(REFERENCE["configs"]["DIP"]["key"])  # 42
KEY = "dipmark test key"


def _scheme(text: str = "dipmark") -> DiPmark:
    scheme = parse_watermark(text)
    assert isinstance(scheme, DiPmark)
    return scheme


def _cases(vocab: str) -> list[dict]:
    return REFERENCE["vocab"][vocab]["algorithms"]["DIP"]


# ------------------------------------------------------------------------------------------
# (a) MarkLLM agreement
# ------------------------------------------------------------------------------------------
def test_markllm_defaults_are_ours() -> None:
    cfg = REFERENCE["configs"]["DIP"]
    s = _scheme("dipmark:compat=markllm")
    assert (s.gamma, s.alpha, s.prefix_length, s.z_threshold) == (
        cfg["gamma"], cfg["alpha"], cfg["prefix_length"], cfg["z_threshold"])
    assert (s.ignore_history_generation, s.ignore_history_detection) == (
        bool(cfg["ignore_history_generation"]), bool(cfg["ignore_history_detection"]))


@pytest.mark.parametrize("vocab", ["1000", "50257"])
def test_markllm_scores_and_quantiles(vocab: str) -> None:
    V = int(vocab)
    scheme = _scheme("dipmark:compat=markllm")
    hash_key = markllm_hash_key(int(MARKLLM_KEY))
    kinds = set()
    for case in _cases(vocab):
        kinds.add(case["kind"])
        ids = np.array(case["ids"], dtype=np.int64)
        det = scheme.detect(ids, MARKLLM_KEY, V)
        # float32 arithmetic as MarkLLM's: equal to the stored float
        assert det.extra["markllm_score"] == pytest.approx(case["score"], rel=1e-6, abs=1e-6)
        assert det.extra["markllm_is_watermarked"] == case["is_watermarked"]
        detail = case["detail"]
        assert det.num_green_tokens == detail["green"]
        # evalrun scores the same tokens less the first (no context)
        assert det.num_tokens_scored == detail["n"] - 1
        # every per-position quantile, recomputed from the key expansion and torch.randperm
        seen: set[bytes] = set()
        want = detail["quantiles"]
        assert want[0] == 0.0
        for i in range(1, len(ids)):
            ctx = ids[max(0, i - 5):i]
            code = ctx.astype("<i8").tobytes()
            if code in seen:
                assert want[i] == -1.0
                continue
            seen.add(code)
            pos = int((permutation(context_seed(ctx, hash_key), V) == int(ids[i])).nonzero()[0, 0])
            assert float(np.float32(pos + 1) / np.float32(V)) == want[i]
    assert kinds == {"uniform-random", "model-sampled", "repeated-block", "watermarked"}


def test_markllm_is_watermarked_where_meaningful() -> None:
    # MarkLLM flags all four watermarked texts at V=50257 and none of the others; so do we,
    # and evalrun's own p-values agree (the V=1000 model is too peaked for 60 tokens)
    scheme = _scheme("dipmark:compat=markllm")
    for case in _cases("50257"):
        det = scheme.detect(case["ids"], MARKLLM_KEY, 50257)
        marked = case["kind"] == "watermarked"
        assert case["is_watermarked"] is marked and det.extra["markllm_is_watermarked"] is marked
        assert (det.p_value <= 0.02) is marked


def test_ignore_history_detection_counts_repeats() -> None:
    case = next(c for c in _cases("1000") if c["kind"] == "repeated-block")
    det = _scheme("dipmark:compat=markllm,ignore_history_detection=1").detect(case["ids"], MARKLLM_KEY, 1000)
    base = _scheme("dipmark:compat=markllm").detect(case["ids"], MARKLLM_KEY, 1000)
    assert base.num_tokens_scored == det.num_tokens_scored == 24  # evalrun's null drops repeats
    # with repeats kept MarkLLM scores all 60 tokens; the text has period 20, so a repeated
    # position has the context and the token (hence the quantile) of the one 20 earlier
    q = list(case["detail"]["quantiles"])
    for i in range(len(q)):
        if q[i] == -1.0:
            q[i] = q[i - 20]
    green_all = sum(x >= 0.5 for x in q)
    assert green_all > det.num_green_tokens
    assert det.extra["markllm_score"] == pytest.approx(
        float((np.float32(green_all) - np.float32(30)) / np.float32(np.sqrt(60))), rel=1e-6)


@pytest.mark.parametrize("vocab", [1000, 50257])
def test_processor_regenerates_markllm_watermarked_ids(vocab: int) -> None:
    """MarkLLM's own watermarked generations, reproduced token for token through our
    processor in ``model.generate`` with the same model, prompt and torch seed."""
    from transformers import LogitsProcessorList

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from markllm_reference import GEN_KWARGS, PROMPT_LEN, build_model
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    torch.set_num_threads(1)
    model = build_model(vocab)
    scheme = _scheme("dipmark:compat=markllm")
    for case in _cases(str(vocab)):
        if case["kind"] != "watermarked":
            continue
        prompt = torch.tensor([case["ids"][:PROMPT_LEN]])
        proc = scheme.logits_processor(MARKLLM_KEY, vocab, temperature=1.0, seed=0)
        torch.manual_seed(case["gen_seed"])
        with torch.no_grad():
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                 logits_processor=LogitsProcessorList([proc]), **GEN_KWARGS)
        assert out[0].tolist() == case["ids"]


# ------------------------------------------------------------------------------------------
# (b) the null
# ------------------------------------------------------------------------------------------
def test_green_probability_is_exact() -> None:
    assert green_probability(1000, 0.5) == 501 / 1000  # q = k/1000 >= 0.5 for k = 500..1000
    assert green_probability(50257, 0.5) == 25129 / 50257
    assert green_probability(1000, 0.3) == 701 / 1000


N_NULL, LENGTH, ALPHA = 400, 100, 0.02


def test_null_fpr_and_uniformity() -> None:
    rng = np.random.default_rng(20240611)
    scheme = _scheme("dipmark:gamma=0.3")
    V = 1000
    p_green = green_probability(V, 0.3)
    pvals, randomized = [], []
    for _ in range(N_NULL):
        seq = rng.integers(0, V, LENGTH)
        det = scheme.detect(seq, KEY, V)
        n, g = det.num_tokens_scored, det.num_green_tokens
        assert n == LENGTH - 1
        assert det.p_value == pytest.approx(scipy.stats.binom.sf(g - 1, n, p_green), rel=1e-9)
        assert det.z_score == pytest.approx((g - n * p_green) / np.sqrt(n * p_green * (1 - p_green)))
        pvals.append(det.p_value)
        # randomised p-value: exactly uniform under the null
        randomized.append(scipy.stats.binom.sf(g, n, p_green)
                          + rng.random() * scipy.stats.binom.pmf(g, n, p_green))
    pvals_a = np.array(pvals)
    # the exact test's attained size at 0.02 for 99 tokens, and its 95% interval over N_NULL texts
    ks = np.arange(LENGTH)
    size = scipy.stats.binom.pmf(ks, LENGTH - 1, p_green)[
        scipy.stats.binom.sf(ks - 1, LENGTH - 1, p_green) <= ALPHA].sum()
    assert 0.01 < size <= ALPHA
    lo, hi = scipy.stats.binom.interval(0.95, N_NULL, size)
    assert lo <= int((pvals_a <= ALPHA).sum()) <= hi
    assert scipy.stats.kstest(randomized, "uniform").pvalue > 1e-3


def test_prefix_p_values_match_detect() -> None:
    rng = np.random.default_rng(3)
    seq = rng.integers(0, 300, 70)
    seq[40:60] = seq[10:30]  # repeated contexts are dropped
    scheme = _scheme()
    prefix = scheme.prefix_p_values(seq, KEY, 300)
    want = [scheme.detect(seq[: i + 1], KEY, 300).p_value for i in range(len(seq))]
    assert prefix.shape == (70,) and np.allclose(prefix, want, rtol=1e-12, atol=0)
    assert prefix[0] == 1.0
    # positions 45..60 have the contexts of 15..30
    assert scheme.detect(seq, KEY, 300).num_tokens_scored == 69 - 16
    assert scheme.prefix_p_values([], KEY, 300).shape == (0,)
    empty = _scheme("dipmark:compat=markllm").detect([], "7", 300)
    assert empty.num_tokens_scored == 0 and empty.p_value == 1.0
    assert empty.extra["markllm_score"] is None


MASK64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    """SplitMix64's finaliser on a Python integer (the documented hash, written out)."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & MASK64
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & MASK64
    return x ^ (x >> 31)


def _native_seed(key: str, context: np.ndarray) -> int:
    """The native seed from the module docstring, one Python integer at a time: the tagged key
    word, then ``pair`` folded over the context newest first."""
    seed = _mix64(derive_key(key) ^ TAG_DIPMARK)
    for tok in reversed(context.tolist()):
        seed = _mix64(seed ^ (tok * GOLDEN & MASK64))
    return seed


def _native_perm(key: str, context: np.ndarray, vocab: int) -> np.ndarray:
    """Tokens in the order of the native permutation (the inverse of their Feistel ranks)."""
    ranks = feistel_rank(NUMPY, NUMPY.u64([_native_seed(key, context)]), np.arange(vocab), vocab)
    perm = np.empty(vocab, dtype=np.int64)
    perm[np.asarray(ranks, dtype=np.int64)] = np.arange(vocab)
    return perm


@pytest.mark.parametrize("prefix_length", [0, 1, 5])
def test_native_detection_equals_the_slow_definition(prefix_length: int) -> None:
    """Per position: the context's seed, the token's place in its permutation, green iff the
    quantile reaches gamma, repeated contexts dropped; detect_many and prefix p-values agree."""
    V, rng = 700, np.random.default_rng(11)
    scheme = _scheme(f"dipmark:gamma=0.4,prefix_length={prefix_length}")
    texts = [rng.integers(0, V, n) for n in (0, 1, 2, 30, 80)]
    texts[-1][50:70] = texts[-1][10:30]  # repeated contexts
    dets = scheme.detect_many(texts, KEY, V)
    prefixes = scheme.prefix_p_values_many(texts, KEY, V)
    q = quantiles(V)
    for ids, det, pre in zip(texts, dets, prefixes):
        seen: set[tuple[int, ...]] = set()
        n = g = 0
        for i in range(1, len(ids)):
            ctx = ids[max(0, i - prefix_length) if prefix_length else 0:i]
            if tuple(ctx) in seen:
                continue
            seen.add(tuple(ctx))
            pos = int(np.flatnonzero(_native_perm(KEY, ctx, V) == ids[i])[0])
            n, g = n + 1, g + bool(q[pos] >= np.float32(0.4))
        assert (det.num_tokens_scored, det.num_green_tokens) == (n, g)
        assert det == scheme.detect(ids, KEY, V)
        assert np.array_equal(pre, scheme.prefix_p_values(ids, KEY, V))
        assert pre.shape == (len(ids),) and (not len(ids) or pre[-1] == det.p_value)
    # the repeated block was dropped (a whole history never repeats)
    if prefix_length:
        assert dets[-1].num_tokens_scored <= 79 - 20 + prefix_length
    else:
        assert dets[-1].num_tokens_scored == 79


def test_native_and_markllm_keys_differ() -> None:
    assert native_hash_key(KEY) != native_hash_key(KEY + "!")
    assert len(markllm_hash_key(42)) == 128 and markllm_hash_key(42) != markllm_hash_key(43)
    seq = np.arange(1, 41)
    a = _scheme().detect(seq, "42", 1000)
    b = _scheme("dipmark:compat=markllm").detect(seq, "42", 1000)
    assert "markllm_score" not in a.extra and "markllm_score" in b.extra
    assert KEY not in repr(_scheme()) and "42" not in str(_scheme().spec)


# ------------------------------------------------------------------------------------------
# processor
# ------------------------------------------------------------------------------------------
def _dip_distribution(p: np.ndarray, perm: np.ndarray, alpha: float) -> np.ndarray:
    """DiPmark's reweighted distribution, token by token from the paper's definition: the
    permuted token j covers [F_{j-1}, F_j) of the CDF and gets the length of its overlap
    with [alpha, 1) plus its overlap with [1 - alpha, 1)."""
    out = np.zeros_like(p)
    lo = 0.0
    for tok in perm:
        hi = lo + p[tok]
        out[tok] = sum(max(0.0, hi - max(lo, a)) for a in (alpha, 1 - alpha))
        lo = hi
    return out


def test_processor_reweights_and_keeps_history() -> None:
    V = 50
    scheme = _scheme("dipmark:alpha=0.3")
    gen = torch.Generator().manual_seed(5)
    scores = torch.randn(3, V + 4, generator=gen, dtype=torch.float64)
    ids = torch.randint(0, V, (3, 7), generator=gen)
    proc = scheme.logits_processor(KEY, V, temperature=0.8, seed=0)
    out = proc(ids, scores.clone())
    full = torch.softmax(out, dim=-1).numpy()
    base = torch.softmax(scores / 0.8, dim=-1).numpy()
    for row in range(3):
        perm = _native_perm(KEY, ids[row, -5:].numpy(), V)
        mass = base[row, :V].sum()
        want = _dip_distribution(base[row, :V] / mass, perm, 0.3) * mass
        assert np.allclose(full[row, :V], want, atol=1e-12)
        assert np.allclose(full[row, V:], base[row, V:], atol=1e-12)  # extra columns keep theirs
    # the same contexts again: history says leave them alone (MarkLLM's default)
    again = proc(ids, scores.clone())
    assert torch.allclose(again, scores / 0.8)
    # numpy in, numpy out; a fresh processor gives the same reweighting
    as_np = scheme.logits_processor(KEY, V, temperature=0.8, seed=1)(ids.numpy(), scores.numpy())
    assert isinstance(as_np, np.ndarray) and np.allclose(as_np, out.numpy())
    # prompts shorter than prefix_length are left as they are
    short = scheme.logits_processor(KEY, V, temperature=1.0, seed=0)(ids[:, :3], scores.clone())
    assert torch.equal(short, scores)
    with pytest.raises(ValueError, match="temperature"):
        scheme.logits_processor(KEY, V, temperature=-1.0, seed=0)


# ------------------------------------------------------------------------------------------
# (c) generation with the embedded model
# ------------------------------------------------------------------------------------------
PROMPTS = ["Write a short letter about the weather at Highbury.",
           "Describe a ball at Netherfield in a few sentences.",
           "Tell me about Mr Knightley's opinion of Harriet.",
           "What did Elizabeth think of Mr Darcy at first?"]


def _generate(generate, spec: str, key: str | None) -> list[tuple[list[int], int]]:
    gens = generate(spec, key, PROMPTS, max_tokens=90, seed=3)
    assert all(gen.error is None for gen in gens)
    return [(gen.token_ids, gen.extra["vocab_size"]) for gen in gens]


def test_embedded_model_generation_is_detected(generate, false_alarms_allowed) -> None:
    spec = str(_scheme().spec)
    first = _generate(generate, spec, KEY)
    assert _generate(generate, spec, KEY) == first  # same key and seed: same ids
    scheme = _scheme()
    detected = [scheme.detect(ids, KEY, vocab).p_value <= 0.02 for ids, vocab in first]
    assert sum(detected) >= 3, detected
    plain = _generate(generate, "none", None)
    alarms = [scheme.detect(ids, f"another key {i}", vocab).p_value <= 0.02 for ids, vocab in first
              for i in range(10)] + [scheme.detect(ids, KEY, vocab).p_value <= 0.02 for ids, vocab in plain]
    assert sum(alarms) <= false_alarms_allowed(len(alarms), 0.02), alarms


# ------------------------------------------------------------------------------------------
# (d) specs and keys
# ------------------------------------------------------------------------------------------
def test_defaults_and_canonical_spec() -> None:
    s = _scheme("dipmark")
    assert str(s.spec) == ("dipmark:alpha=0.45,compat=none,gamma=0.5,ignore_history_detection=0,"
                           "ignore_history_generation=0,prefix_length=5,z_threshold=1.513")
    assert _scheme(str(s.spec)).spec == s.spec


@pytest.mark.parametrize("text,name", [
    ("dipmark:gamma=0", "gamma"), ("dipmark:gamma=1", "gamma"), ("dipmark:gamma=nan", "gamma"),
    ("dipmark:alpha=0.6", "alpha"), ("dipmark:alpha=-0.1", "alpha"), ("dipmark:alpha=nan", "alpha"),
    ("dipmark:prefix_length=-1", "prefix_length"), ("dipmark:prefix_length=2.5", "prefix_length"),
    ("dipmark:ignore_history_detection=2", "ignore_history_detection"),
    ("dipmark:ignore_history_generation=x", "ignore_history_generation"),
    ("dipmark:z_threshold=inf", "z_threshold"), ("dipmark:compat=kgw", "compat"),
    ("dipmark:delta=2", "delta"),
])
def test_bad_specs_give_one_line_errors(text: str, name: str) -> None:
    with pytest.raises(SpecError, match=name) as info:
        parse_watermark(text)
    assert "\n" not in str(info.value) and "dipmark" in str(info.value)


@pytest.mark.parametrize("key", ["abc", "4.2", "0x2a", ""])
def test_markllm_compat_needs_an_integer_key(key: str) -> None:
    scheme = _scheme("dipmark:compat=markllm")
    with pytest.raises(SpecError, match="dipmark") as info:
        scheme.check_key(key)
    message = str(info.value)
    assert "\n" not in message and (key == "" or "compat" in message)
    with pytest.raises(SpecError):
        scheme.detect([1, 2, 3], key, 10)
    scheme.check_key(" -7 ")
    _scheme().check_key("abc")
