"""Unbiased (``unbiased``, gamma-reweight): MarkLLM agreement, the p-value bound, generation,
specs.

Reference values: ``tests/watermark/schemes/data/markllm_reference.json`` (MarkLLM 112fa74 on the random
2-layer GPT-2 of ``scripts/markllm_reference.py`` at V=1000 and V=50257, the hash key expanded
from config key 42): per text the ids, MarkLLM's p-value ``score`` and ``is_watermarked``, and
the intermediates of its ``score_sequence`` (per-query sums, best query, per-token scores).
The model's logits come from :class:`markllm_model.ReferenceLogits`, the same network rebuilt.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from evalrun._util.errors import SpecError
from evalrun.testing.portable_inputs import TextLogits
from evalrun.watermark.base import ModelRequired
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes import unbiased as unbiased_module
from evalrun.watermark.schemes.dipmark import context_seed, permutation
from evalrun.watermark.schemes.unbiased import Unbiased, gamma_reweight, grid_queries

sys.path.insert(0, str(Path(__file__).parent))
from markllm_model import DATA, ReferenceLogits, reference_model, reference_script  # noqa: E402

from evalrun.testing.float_drift import assert_clear_of, assert_within, float32_bound  # noqa: E402

torch = pytest.importorskip("torch")

MARKLLM_KEY = str(DATA["configs"]["Unbiased"]["key"])  # 42
KEY = "unbiased test key"


def _scheme(text: str = "unbiased") -> Unbiased:
    scheme = parse_watermark(text)
    assert isinstance(scheme, Unbiased)
    return scheme


def _cases(vocab: str) -> list[dict]:
    return DATA["vocab"][vocab]["algorithms"]["Unbiased"]


@pytest.fixture(scope="module")
def model_logits() -> dict[int, ReferenceLogits]:
    """One ReferenceLogits per vocabulary size for the whole module (the V=50257 build is slow)."""
    torch.set_num_threads(1)
    return {1000: ReferenceLogits(1000), 50257: ReferenceLogits(50257)}


# ------------------------------------------------------------------------------------------
# (a) MarkLLM agreement
# ------------------------------------------------------------------------------------------
def test_markllm_defaults_are_ours() -> None:
    cfg = DATA["configs"]["Unbiased"]
    s = _scheme("unbiased:compat=markllm")
    assert (s.n_grid, s.prefix_length, s.p_threshold, s.spec.params["type"]) == (
        cfg["n_grid"], cfg["prefix_length"], cfg["p_threshold"], cfg["type"])
    assert (s.ignore_history_generation, s.ignore_history_detection) == (
        bool(cfg["ignore_history_generation"]), bool(cfg["ignore_history_detection"]))
    assert len(grid_queries(10)) == 11 and grid_queries(10)[0] == (-np.inf, -np.inf)


def _sum_bounds(case: dict, model: ReferenceLogits) -> tuple[float, float]:
    """(token, sum) bounds of the float32 drift of MarkLLM's token scores and their per-query
    sums: 0 where this machine reproduces the reference run's logits. A token score is the log
    of a ratio of two probabilities of one row, which moves by at most twice the row's logits
    (``log softmax`` is 2-Lipschitz in the largest coordinate change); a sum of n scores by n
    times that."""
    token = 2 * model.bound(case)
    return token, case["detail"]["n_scored"] * token


@pytest.mark.parametrize("vocab", [1000, 50257])
def test_markllm_intermediates_and_score(vocab: int, model_logits: dict[int, ReferenceLogits]) -> None:
    """MarkLLM's intermediates and p-value, bit for bit where this machine's forward pass gives
    the reference run's logits and within their float32 drift elsewhere. The best query and
    the verdict are decisions: compared where no other query (and not the threshold) lies
    within that drift."""
    scheme = _scheme("unbiased:compat=markllm")
    kinds = set()
    for case in _cases(str(vocab)):
        kinds.add(case["kind"])
        detail = case["detail"]
        token_bound, sum_bound = _sum_bounds(case, model_logits[vocab])
        tokens = scheme.markllm_token_scores(case["ids"], MARKLLM_KEY, vocab, logits=model_logits[vocab])
        assert tokens.dtype == np.float32 and tokens.shape == (detail["n_scored"], 11)
        with np.errstate(over="ignore"):
            sums = tokens.sum(axis=0)
        want = np.array(detail["grid_sums"], dtype=np.float64)
        overflowed = np.abs(want) >= 1e38  # MarkLLM's k = 0 sums: -inf or -FLT_MAX
        assert np.array_equal(sums[overflowed], want[overflowed].astype(np.float32))
        assert_within(sums[~overflowed], want[~overflowed], sum_bound, "per-query sums")
        best = detail["best_index"]
        rivals = (np.abs(want - want[best]) <= 2 * sum_bound) & (want != want[best])  # exact ties stay ties
        if not rivals.any():
            assert int(np.argmax(sums)) == best
        assert_within(tokens[:, best], detail["per_token_best"], token_bound, "token scores of the best query")
        assert tokens[-1, best] == detail["last_token_llr"] == 0.0
        score = scheme.markllm_score(tokens)
        assert_within(np.log(score), np.log(case["score"]), sum_bound, "log of MarkLLM's p-value")
        assert_clear_of(np.log(case["score"]), np.log(scheme.p_threshold), 2 * sum_bound, "MarkLLM's p-value")
        assert (score < scheme.p_threshold) is case["is_watermarked"]
    assert kinds == {"uniform-random", "model-sampled", "repeated-block", "watermarked"}


def test_detect_reports_markllm_score(model_logits: dict[int, ReferenceLogits]) -> None:
    scheme = _scheme("unbiased:compat=markllm")
    picks = [(1000, c) for c in _cases("1000")] + [
        (50257, next(c for c in _cases("50257") if c["is_watermarked"]))]
    for vocab, case in picks:
        unbiased_module._SCORED.clear()  # other tests may have scored the text already
        before = model_logits[vocab].calls
        det = scheme.detect(case["ids"], MARKLLM_KEY, vocab, logits=model_logits[vocab])
        assert model_logits[vocab].calls == before + 1  # one forward pass per text
        scheme.prefix_p_values(case["ids"], MARKLLM_KEY, vocab, logits=model_logits[vocab])
        assert model_logits[vocab].calls == before + 1  # the prefixes reuse that pass
        token_bound, sum_bound = _sum_bounds(case, model_logits[vocab])
        assert_within(np.log(det.extra["markllm_score"]), np.log(case["score"]), sum_bound,
                      "log of MarkLLM's p-value")
        assert det.extra["markllm_is_watermarked"] is case["is_watermarked"]
        # evalrun scores every new context, the last token included; the period-20 text has 20
        assert det.num_tokens_scored == (20 if case["kind"] == "repeated-block" else 55)
        # evalrun's own verdict at 0.02, judged where this machine's p-value is clear of it
        own_bound = det.num_tokens_scored * token_bound
        assert_clear_of(np.log(det.p_value), np.log(0.02), 2 * own_bound, "evalrun's p-value")
        assert (det.p_value <= 0.02) is (case["kind"] == "watermarked")
        # the mean e-value's bound: never above the paper's union bound, at most n_grid below it
        union = min(1.0, 10 * np.exp(-det.score))
        assert union / 10 * (1 - 1e-12) <= det.p_value <= union * (1 + 1e-12)


def test_p_value_is_the_bound_of_the_mean_e_value() -> None:
    """Hand-computed: n_grid = 2 and sums (log 4, log 4) give 2 / (4 + 4) = 1/4, where the
    paper's union bound gives 2 / 4; sums (log 8, -inf) give 1/4 both ways (one query only);
    nothing scored gives 1."""
    scheme = _scheme("unbiased:n_grid=2")
    sums = np.log(np.array([[4.0, 4.0], [8.0, 1.0], [1.0, 1.0]]))
    sums[1, 1] = -np.inf  # a query that scores nothing
    assert scheme._p_value(sums) == pytest.approx([0.25, 0.25, 1.0], rel=1e-15)
    assert scheme._p_value(np.zeros(2)) == 1.0


def test_history_detection_gives_repeats_no_ratio(model_logits: dict[int, ReferenceLogits]) -> None:
    """With ``ignore_history_detection=0`` MarkLLM keeps P for a repeated context, as it does
    for the last token: those rows score like the unreweighted last row, the others as before."""
    case = next(c for c in _cases("1000") if c["kind"] == "repeated-block")
    ids = np.array(case["ids"])
    keep = _scheme("unbiased:compat=markllm").markllm_token_scores(ids, MARKLLM_KEY, 1000,
                                                                  logits=model_logits[1000])
    drop = _scheme("unbiased:compat=markllm,ignore_history_detection=0").markllm_token_scores(
        ids, MARKLLM_KEY, 1000, logits=model_logits[1000])
    contexts = [ids[t - 5:t].tobytes() for t in range(5, len(ids))]
    repeat = np.array([c in contexts[:j] for j, c in enumerate(contexts)])
    assert repeat.sum() == 35
    assert repeat[-1] and np.array_equal(drop[~repeat], keep[~repeat])
    assert np.array_equal(drop[repeat], np.zeros_like(drop[repeat]))
    assert np.array_equal(drop[-1], keep[-1]) and np.array_equal(drop[-1], np.zeros(11, np.float32))


# ------------------------------------------------------------------------------------------
# (b) the p-value bound under the null
# ------------------------------------------------------------------------------------------
N_NULL, LENGTH, ALPHA = 200, 100, 0.02


def test_null_p_values_are_not_anti_conservative(model_logits: dict[int, ReferenceLogits]) -> None:
    rng = np.random.default_rng(20241126)
    scheme = _scheme()
    pvals = []
    for _ in range(N_NULL):
        det = scheme.detect(rng.integers(0, 1000, LENGTH), KEY, 1000, logits=model_logits[1000])
        assert det.num_tokens_scored == LENGTH - 5
        pvals.append(det.p_value)
    p = np.array(pvals)
    assert ((p > 0) & (p <= 1)).all()
    assert (p <= ALPHA).sum() <= scipy.stats.binom.interval(0.95, N_NULL, ALPHA)[1]
    for t in (0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 0.8):
        assert (p <= t).sum() <= scipy.stats.binom.ppf(0.975, N_NULL, t), t
    # and far from tight, as the docs say: a bound, not a tail probability
    assert (p <= 0.1).sum() == 0 and np.median(p) == 1.0


def test_permutation_null_fpr_inside_binomial_interval() -> None:
    """``permutations=N``: the score under N spec-fixed null keys; the real key's score is
    exchangeable with them on unwatermarked text, so p <= 0.02 (= 1/(N+1) with N = 49) happens
    with probability 0.02, less the texts whose best sum ties the null's at 0."""
    scheme = _scheme("unbiased:permutations=49,prefix_length=1")
    vocab, texts = 64, 300
    model = TextLogits(vocab)
    rng = np.random.default_rng(20261126)
    p = np.array([scheme.detect(rng.integers(0, vocab, 16), KEY, vocab, logits=model).p_value
                  for _ in range(texts)])
    assert set(np.round(p * 50).astype(int)) <= set(range(1, 51))  # multiples of 1/(N+1)
    lo, hi = scipy.stats.binom.interval(0.95, texts, ALPHA)
    assert lo <= int((p <= ALPHA).sum()) <= hi
    # the null keys are fixed by the spec, not by the secret key: every key sees the same null
    assert scheme.null_keys() == _scheme("unbiased:permutations=49,prefix_length=1").null_keys()
    assert len(set(scheme.null_keys())) == 49


def test_permutation_null_detects_and_matches_its_prefixes(model_logits: dict[int, ReferenceLogits]) -> None:
    prompt = list(range(100, 110))
    ids = _generate(1000, KEY, 11, prompt, 60)
    scheme = _scheme("unbiased:permutations=19")
    det = scheme.detect(ids, KEY, 1000, logits=model_logits[1000])
    assert det.p_value == 1 / 20 and det.extra["permutations"] == 19
    prefixes = scheme.prefix_p_values(ids, KEY, 1000, logits=model_logits[1000])
    assert prefixes[-1] == det.p_value and prefixes[0] == 1.0


def test_prefix_p_values_match_detect(model_logits: dict[int, ReferenceLogits]) -> None:
    rng = np.random.default_rng(5)
    seq = rng.integers(0, 1000, 40)
    seq[25:35] = seq[5:15]  # repeated contexts are dropped
    scheme = _scheme()
    logits = model_logits[1000]
    prefix = scheme.prefix_p_values(seq, KEY, 1000, logits=logits)
    full = scheme.detect(seq, KEY, 1000, logits=logits)
    assert prefix.shape == (40,) and prefix[-1] == full.p_value
    assert (prefix[:5] == 1.0).all()
    assert full.num_tokens_scored == 35 - 6  # positions 30..35 have the contexts of 10..15
    for i in range(5, 40, 4):
        # the prefix's own forward pass rounds its logits differently: log p = log 10 - best sum
        # moves by at most n token scores' drift (clipping at p = 1 only narrows the gap)
        det = scheme.detect(seq[: i + 1], KEY, 1000, logits=logits)
        bound = det.num_tokens_scored * 2 * float32_bound(np.abs(logits.rows(seq[: i + 1])).max())
        assert_within(np.log(prefix[i]), np.log(det.p_value), bound, f"log p of the prefix of {i + 1}")
    assert scheme.prefix_p_values([], KEY, 1000, logits=logits).shape == (0,)
    short = _scheme("unbiased:compat=markllm").detect([3, 4, 5], "7", 1000, logits=logits)
    assert short.num_tokens_scored == 0 and short.p_value == 1.0 and short.extra["grid_point"] is None
    assert short.extra["markllm_score"] == 10.0  # MarkLLM: nothing scored, n_grid * exp(0)
    empty = _scheme("unbiased:compat=markllm").detect([], "7", 1000, logits=logits)
    assert empty.p_value == 1.0 and empty.extra["markllm_score"] is None


# ------------------------------------------------------------------------------------------
# (c) generation
# ------------------------------------------------------------------------------------------
def test_processor_distribution_is_the_detectors_q() -> None:
    """Generation is DiPmark's processor at alpha = 1/2; its distribution is the Q that
    detection computes with :func:`gamma_reweight` (MarkLLM's formulation, written
    independently) under the same permutation, and extra columns keep their probability."""
    V = 60
    scheme = _scheme()
    hash_key = scheme.hash_key(KEY)
    gen = torch.Generator().manual_seed(5)
    scores = torch.randn(3, V + 4, generator=gen, dtype=torch.float64)
    ids = torch.randint(0, V, (3, 8), generator=gen)
    proc = scheme.logits_processor(KEY, V, temperature=0.7, seed=0)
    out = proc(ids, scores.clone())
    got = torch.softmax(out, dim=-1)
    base = torch.softmax(scores / 0.7, dim=-1)
    perms = torch.stack([permutation(context_seed(ids[row, -5:].numpy(), hash_key), V) for row in range(3)])
    q = torch.softmax(gamma_reweight(scores[:, :V] / 0.7, perms), dim=-1)
    mass = base[:, :V].sum(dim=-1, keepdim=True)
    assert torch.allclose(got[:, :V], q * mass, atol=1e-12)
    assert torch.allclose(got[:, V:], base[:, V:], atol=1e-12)
    assert not torch.allclose(got[:, :V], base[:, :V], atol=1e-3)
    # averaged over all permutations, Q is the original distribution (hence "unbiased")
    small = scores[0, :6]
    every = torch.tensor(list(itertools.permutations(range(6))))
    mean_q = torch.softmax(gamma_reweight(small.expand(len(every), 6), every), dim=-1).mean(dim=0)
    assert torch.allclose(mean_q, torch.softmax(small, dim=0), atol=1e-12)
    # stateless by default: the same call again, or a new processor, gives the same scores
    assert torch.equal(proc(ids, scores.clone()), out) and scheme.shared_context == 5
    as_np = scheme.logits_processor(KEY, V, temperature=0.7, seed=9)(ids.numpy(), scores.numpy())
    assert isinstance(as_np, np.ndarray) and np.allclose(as_np, out.numpy())
    # histories shorter than prefix_length are only temperature-scaled
    short = scheme.logits_processor(KEY, V, temperature=1.0, seed=0)(ids[:, :4], scores.clone())
    assert torch.equal(short, scores)
    # with a generation history, a context seen before in the row is left alone
    history = _scheme("unbiased:ignore_history_generation=0")
    assert history.shared_context is None
    hproc = history.logits_processor(KEY, V, temperature=1.0, seed=0)
    assert not torch.equal(hproc(ids, scores.clone()), scores)
    assert torch.equal(hproc(ids, scores.clone()), scores)
    with pytest.raises(ValueError, match="temperature"):
        scheme.logits_processor(KEY, V, temperature=-1.0, seed=0)


@pytest.mark.parametrize("vocab", [1000, 50257])
def test_processor_regenerates_markllm_watermarked_ids(vocab: int) -> None:
    """MarkLLM's own Unbiased generations, token for token, through our processor in
    ``model.generate`` with the same model, prompt and torch seed."""
    from transformers import LogitsProcessorList

    script = reference_script()
    torch.set_num_threads(1)
    model = reference_model(vocab)
    scheme = _scheme("unbiased:compat=markllm")
    for case in _cases(str(vocab)):
        if case["kind"] != "watermarked":
            continue
        prompt = torch.tensor([case["ids"][:script.PROMPT_LEN]])
        proc = scheme.logits_processor(MARKLLM_KEY, vocab, temperature=1.0, seed=0)
        torch.manual_seed(case["gen_seed"])
        with torch.no_grad():
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                 logits_processor=LogitsProcessorList([proc]), **script.GEN_KWARGS)
        assert out[0].tolist() == case["ids"]


def _generate(vocab: int, key: str, seed: int, prompt: list[int], new_tokens: int) -> list[int]:
    """Sample ``new_tokens`` from the reference model through the watermark processor."""
    model = reference_model(vocab)
    proc = _scheme().logits_processor(key, vocab, temperature=1.0, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(new_tokens):
            scores = proc(ids, model(ids, use_cache=False).logits[:, -1].float())
            nxt = torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=gen)
            ids = torch.cat([ids, nxt], dim=1)
    return ids[0].tolist()


def test_watermarked_generation_is_detected(model_logits: dict[int, ReferenceLogits]) -> None:
    prompt = list(range(100, 110))
    ids = _generate(1000, KEY, 11, prompt, 60)
    assert _generate(1000, KEY, 11, prompt, 60) == ids  # deterministic under key and seed
    scheme = _scheme()
    det = scheme.detect(ids, KEY, 1000, logits=model_logits[1000])
    assert det.p_value <= 0.02, det
    assert scheme.detect(ids, "another key", 1000, logits=model_logits[1000]).p_value > 0.02


# ------------------------------------------------------------------------------------------
# (d) specs, keys and the model
# ------------------------------------------------------------------------------------------
def test_defaults_and_canonical_spec() -> None:
    s = _scheme("unbiased")
    assert str(s.spec) == ("unbiased:compat=none,ignore_history_detection=1,ignore_history_generation=1,"
                           "n_grid=10,p_threshold=0.0005,permutations=0,prefix_length=5,type=gamma")
    assert _scheme(str(s.spec)).spec == s.spec and s.needs_model


@pytest.mark.parametrize("text,name", [
    ("unbiased:type=delta", "type"), ("unbiased:type=beta", "type"),
    ("unbiased:n_grid=0", "n_grid"), ("unbiased:n_grid=2.5", "n_grid"),
    ("unbiased:prefix_length=0", "prefix_length"), ("unbiased:prefix_length=x", "prefix_length"),
    ("unbiased:p_threshold=2", "p_threshold"), ("unbiased:p_threshold=nan", "p_threshold"),
    ("unbiased:ignore_history_detection=2", "ignore_history_detection"),
    ("unbiased:ignore_history_generation=x", "ignore_history_generation"),
    ("unbiased:compat=kgw", "compat"), ("unbiased:gamma=0.5", "gamma"),
    ("unbiased:permutations=-1", "permutations"), ("unbiased:permutations=1.5", "permutations"),
])
def test_bad_specs_give_one_line_errors(text: str, name: str) -> None:
    with pytest.raises(SpecError, match=name) as info:
        parse_watermark(text)
    message = str(info.value)
    assert "\n" not in message and "unbiased" in message and "--watermark" in message


@pytest.mark.parametrize("key", ["abc", "4.2", "0x2a", ""])
def test_markllm_compat_needs_an_integer_key(key: str, model_logits: dict[int, ReferenceLogits]) -> None:
    scheme = _scheme("unbiased:compat=markllm")
    with pytest.raises(SpecError, match="unbiased") as info:
        scheme.check_key(key)
    assert "\n" not in str(info.value) and (key == "" or "compat" in str(info.value))
    with pytest.raises(SpecError):
        scheme.detect([1, 2, 3, 4, 5, 6, 7], key, 1000, logits=model_logits[1000])
    scheme.check_key(" -7 ")
    _scheme().check_key("abc")


def test_detection_needs_the_model(model_logits: dict[int, ReferenceLogits]) -> None:
    scheme = _scheme()
    for call in (scheme.detect, scheme.prefix_p_values):
        with pytest.raises(ModelRequired, match="unbiased") as info:
            call(list(range(20)), KEY, 1000)
        assert "\n" not in str(info.value) and "--model" in str(info.value)
    with pytest.raises(ModelRequired, match="logits of shape"):  # the model's width is not V
        scheme.detect(list(range(20)), KEY, 1200, logits=model_logits[1000])
