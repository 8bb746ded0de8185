"""Permute-and-flip (``pf``): MarkLLM agreement, evalrun's Gamma(n, 1) null, generation with
the embedded model, spec and key validation.

Reference values: ``tests/watermark/schemes/data/markllm_reference.json`` (``scripts/markllm_reference.py``
ran MarkLLM 112fa74's ``PF`` with config/PF.json: salt_key 35317, seed 0, ngram 8).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.integrate
import scipy.stats

from evalrun._util.errors import SpecError
from evalrun.testing.float_drift import assert_clear_of, assert_within, float32_bound
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes.permute_flip import MARKLLM_ALPHA, PermuteFlip

ROOT = Path(__file__).resolve().parents[3]
DATA = json.loads((ROOT / "tests" / "watermark" / "schemes" / "data" / "markllm_reference.json").read_text())
SALT = str(DATA["configs"]["PF"]["salt_key"])
KEY = "pf-test-key"


def _pf(text: str = "pf") -> PermuteFlip:
    scheme = parse_watermark(text)
    assert isinstance(scheme, PermuteFlip)
    return scheme


def _entries(vocab: int) -> list[dict]:
    return DATA["vocab"][str(vocab)]["algorithms"]["PF"]


# ------------------------------------------------------------------------------------------
# MarkLLM agreement
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("vocab", [1000, 50257])
def test_markllm_score_equals_markllms_for_every_stored_sequence(vocab: int) -> None:
    pytest.importorskip("torch")
    config = DATA["configs"]["PF"]
    scheme = _pf(f"pf:compat=markllm,ngram={config['ngram']},seed={config['seed']}")
    entries = _entries(vocab)
    assert {e["kind"] for e in entries} == {"uniform-random", "model-sampled", "repeated-block",
                                            "watermarked"}
    for e in entries:
        det = scheme.detect(e["ids"], SALT, vocab)
        # a float32 sum of n float32 logs, each within one unit of its last place on any CPU (x86's
        # MKL rounds them correctly; arm64's kernels do not always): n + 2 roundoffs of the sum
        n = e["detail"]["n_scored"]
        bound = float32_bound(e["score"], roundoffs=n + 2)
        assert_within(det.extra["markllm_score"], e["score"], bound, e["kind"])
        assert det.extra["markllm_num_scored"] == n
        cut = scipy.stats.gamma.ppf(1 - MARKLLM_ALPHA, a=n - config["ngram"]) if n > config["ngram"] else np.inf
        assert_clear_of(e["score"], cut, 2 * bound, "MarkLLM's sum against its threshold")
        assert det.extra["markllm_is_watermarked"] == e["is_watermarked"]
        # evalrun scores position ngram too (MarkLLM's off-by-one skips it) and drops repeats
        distinct = {tuple(e["ids"][t - 8:t]) for t in range(8, len(e["ids"]))}
        assert det.num_tokens_scored == len(distinct)
        assert det.p_value == pytest.approx(scipy.stats.gamma.sf(det.score, det.num_tokens_scored))
    repeated = next(e for e in entries if e["kind"] == "repeated-block")
    assert scheme.detect(repeated["ids"], SALT, vocab).num_tokens_scored == 20
    for e in entries:
        if e["kind"] == "watermarked":
            # a wrong salt key scores the same ids as unwatermarked
            assert scheme.detect(e["ids"], str(int(SALT) + 1), vocab).extra["markllm_score"] != e["score"]


@pytest.mark.parametrize("vocab,count", [(1000, 2), (50257, 1)])
def test_compat_generation_reproduces_markllms_watermarked_ids(vocab: int, count: int) -> None:
    """MarkLLM's generate_watermarked_text on the reference model gave these ids; the compat
    processor, fed the same model's logits, picks the same 50 tokens."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from markllm_reference import build_model
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    model = build_model(vocab)
    proc = _pf("pf:compat=markllm").logits_processor(SALT, vocab, temperature=1.0, seed=0)
    marked = [e for e in _entries(vocab) if e["kind"] == "watermarked"][:count]
    for e in marked:
        ids = torch.tensor([e["ids"][: e["prompt_length"]]])
        with torch.no_grad():
            for _ in range(len(e["ids"]) - e["prompt_length"]):
                out = proc(ids, model(ids).logits[:, -1, :])
                assert int(torch.isfinite(out).sum()) == 1
                ids = torch.cat([ids, out.argmax(-1, keepdim=True)], dim=1)
        assert ids[0].tolist() == e["ids"]


# ------------------------------------------------------------------------------------------
# evalrun's null: Gamma(n, 1) over the distinct contexts
# ------------------------------------------------------------------------------------------
N_NULL, ALPHA = 400, 0.02


def _inside(p: np.ndarray) -> bool:
    lo, hi = scipy.stats.binom.interval(0.95, len(p), ALPHA)
    return lo <= int((p <= ALPHA).sum()) <= hi


def test_native_null_fpr_and_uniform_p_values() -> None:
    rng = np.random.default_rng(32)
    seqs = rng.integers(0, 1000, (N_NULL, 60))
    scheme = _pf()
    p = np.array([scheme.detect(s, KEY, 1000).p_value for s in seqs])
    assert _inside(p)
    assert scipy.stats.kstest(p, "uniform").pvalue > 0.01


def test_compat_null_fpr_holds_where_markllms_threshold_does_not() -> None:
    pytest.importorskip("torch")
    rng = np.random.default_rng(33)
    seqs = rng.integers(0, 1000, (N_NULL, 60))
    scheme = _pf("pf:compat=markllm")
    dets = [scheme.detect(s, SALT, 1000) for s in seqs]
    p = np.array([d.p_value for d in dets])
    assert _inside(p) and scipy.stats.kstest(p, "uniform").pvalue > 0.01
    # MarkLLM's threshold (shape n - ngram for n = L - ngram - 1 scores) flags ~11.5%, not 1%
    flagged = sum(d.extra["markllm_is_watermarked"] for d in dets)
    assert flagged > 0.05 * len(dets)


def test_repeated_contexts_are_dropped_and_prefixes_agree() -> None:
    rng = np.random.default_rng(5)
    block = rng.integers(0, 1000, 20).tolist()
    scheme = _pf()
    det = scheme.detect(block * 3, KEY, 1000)
    assert det.num_tokens_scored == 20 and det.extra["num_repeated_contexts"] == 32
    seq = rng.integers(0, 1000, 70)
    prefix = scheme.prefix_p_values(seq, KEY, 1000)
    assert prefix.shape == (70,) and np.all(prefix[:8] == 1.0)
    for i in (7, 8, 9, 40, 69):
        assert prefix[i] == pytest.approx(scheme.detect(seq[: i + 1], KEY, 1000).p_value, rel=1e-12)
    assert scheme.detect([], KEY, 1000).p_value == 1.0
    with pytest.raises(ValueError):
        scheme.detect([1, 1000], KEY, 1000)


# ------------------------------------------------------------------------------------------
# Processor
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,key", [("pf", KEY), ("pf:compat=markllm", SALT)])
def test_processor_numpy_and_torch_choose_one_token(spec: str, key: str) -> None:
    torch = pytest.importorskip("torch")
    scheme = _pf(spec)
    vocab = 500
    proc = scheme.logits_processor(key, vocab, temperature=0.8, seed=0)
    scores = torch.randn(3, vocab + 4, generator=torch.Generator().manual_seed(1)) * 2
    ids = torch.randint(0, vocab, (3, 12), generator=torch.Generator().manual_seed(2))
    out = proc(ids, scores.clone())
    assert out.shape == scores.shape and (torch.isfinite(out).sum(1) == 1).all()
    assert int(out.argmax(1).max()) < vocab
    as_np = proc(ids.numpy(), scores.numpy().copy())
    assert isinstance(as_np, np.ndarray) and np.array_equal(as_np, out.numpy())
    assert torch.equal(proc(ids, scores.clone()), out)  # keyed, no hidden state
    greedy = scheme.logits_processor(key, vocab, temperature=0.0, seed=0)
    assert torch.equal(greedy(ids, scores.clone()), scores)
    with pytest.raises(ValueError, match="temperature"):
        scheme.logits_processor(key, vocab, temperature=-1.0, seed=0)


def _pf_mechanism(p: np.ndarray) -> np.ndarray:
    """P[argmax_i log p_i + E_i = i] for i.i.d. Exp(1) noise E, by quadrature."""
    lp = np.log(p)

    def win(i: int) -> float:
        def f(e: float) -> float:
            others = [max(0.0, 1 - np.exp(-(lp[i] - lp[j] + e))) for j in range(len(p)) if j != i]
            return float(np.exp(-e) * np.prod(others))
        return float(scipy.integrate.quad(f, 0, np.inf, limit=200)[0])
    return np.array([win(i) for i in range(len(p))])


def test_processor_follows_the_permute_and_flip_distribution() -> None:
    """Over many contexts the chosen tokens follow the PF mechanism on softmax(logits / T)
    (not softmax itself: PF favours the mode)."""
    vocab = 4
    proc = _pf("pf:ngram=2").logits_processor(KEY, vocab, temperature=1.0, seed=0)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    expected = _pf_mechanism(p)
    assert expected.sum() == pytest.approx(1.0) and expected[-1] > 0.45
    counts = np.zeros(vocab)
    for a in range(60):
        for b in range(50):
            counts[int(np.argmax(proc(np.array([[a, b]]), np.log(p)[None, :])))] += 1
    assert scipy.stats.chisquare(counts, 3000 * expected).pvalue > 0.001


# ------------------------------------------------------------------------------------------
# Generation with the embedded model
# ------------------------------------------------------------------------------------------
def _generate(generate, spec: str, key: str, n: int = 4, max_tokens: int = 64) -> list:
    prompts = ["It was a truth universally acknowledged", "Emma Woodhouse, handsome, clever",
               "The family of Dashwood had long been settled", "Sir Walter Elliot, of Kellynch"]
    return generate(spec, key, prompts[:n], max_tokens=max_tokens, seed=7)


def test_embedded_generation_is_detected_and_reproducible(generate, false_alarms_allowed) -> None:
    scheme = _pf()
    spec = str(scheme.spec)
    gens = _generate(generate, spec, KEY)
    assert all(g.error is None and len(g.token_ids) >= 40 for g in gens)
    vocab = gens[0].extra["vocab_size"]
    p = [scheme.detect(g.token_ids, KEY, vocab).p_value for g in gens]
    assert all(x <= 0.02 for x in p), p
    wrong = [scheme.detect(g.token_ids, f"another key {i}", vocab).p_value for g in gens for i in range(10)]
    assert sum(x <= 0.02 for x in wrong) <= false_alarms_allowed(len(wrong), 0.02), wrong
    again = _generate(generate, spec, KEY)
    assert [g.token_ids for g in again] == [g.token_ids for g in gens]
    compat = _pf("pf:compat=markllm")
    [marked] = _generate(generate, str(compat.spec), SALT, n=1)
    assert compat.detect(marked.token_ids, SALT, vocab).p_value <= 0.02


# ------------------------------------------------------------------------------------------
# Specs and keys
# ------------------------------------------------------------------------------------------
def test_defaults_and_canonical_specs() -> None:
    native = _pf("pf")
    assert _pf("pf:compat=none").spec == native.spec
    assert str(native.spec) == "pf:ngram=8" and parse_watermark(str(native.spec)).spec == native.spec
    compat = _pf("pf:compat=markllm")
    assert str(compat.spec) == "pf:compat=markllm,ngram=8,seed=0"
    assert (compat.ngram, compat.seed) == (8, 0)
    assert KEY not in repr(native) and SALT not in repr(compat.logits_processor(SALT, 10, temperature=1.0, seed=0))


@pytest.mark.parametrize("text,name", [
    ("pf:ngram=0", "ngram"), ("pf:ngram=x", "ngram"), ("pf:gamma=0.5", "gamma"),
    ("pf:compat=marklm", "compat"), ("pf:seed=3", "seed"), ("pf:compat=none,seed=0", "seed"), ("pf:compat=markllm,seed=-1", "seed"),
    ("pf:compat=markllm,seed=1.5", "seed"),
])
def test_bad_specs_give_one_line_naming_the_parameter(text: str, name: str) -> None:
    with pytest.raises(SpecError, match=name) as err:
        parse_watermark(text)
    assert "\n" not in str(err.value) and "pf" in str(err.value)


@pytest.mark.parametrize("key", ["abc", "1.5", "0x10", ""])
def test_compat_key_must_be_an_integer(key: str) -> None:
    scheme = _pf("pf:compat=markllm")
    with pytest.raises(SpecError) as err:
        scheme.check_key(key)
    msg = str(err.value)
    assert "\n" not in msg and "pf" in msg and (key == "" or ("compat" in msg and key not in msg))
    with pytest.raises(SpecError):
        scheme.detect([1, 2, 3], key, 10)
    _pf("pf").check_key("abc")  # native keys are any non-blank string
