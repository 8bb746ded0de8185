"""MorphMark (MarkLLM's ``watermark/morphmark``): MarkLLM's scores on its own token ids, the
exact binomial null, the processor against a transcription of MarkLLM's reweighting,
generation with the embedded model, ``evalrun detect`` and spec checks.

Reference values: ``tests/watermark/schemes/data/markllm_reference.json`` (``scripts/markllm_reference.py``,
MarkLLM 112fa74 on a random 2-layer GPT-2 at V=1000 and V=50257).
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from evalrun._util.errors import SpecError
from evalrun._util.specs import parse_spec
from evalrun.kernels.backend import NUMPY
from evalrun.kernels.keyed_hash import GOLDEN, mix64
from evalrun.watermark.engine.randomness import derive_key
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes.morphmark import TAG_MORPHMARK, MorphMark, build

DATA = json.loads((Path(__file__).parent / "data" / "markllm_reference.json").read_text())
CONFIG = DATA["configs"]["MorphMark"]
HASH_KEY = str(CONFIG["hash_key"])
KEY = "morphmark test key"


def _scheme(text: str = "morphmark") -> MorphMark:
    scheme = parse_watermark(text)
    assert isinstance(scheme, MorphMark)
    return scheme


def _cases() -> list[tuple[int, int, dict]]:
    return [(int(v), i, case) for v, block in DATA["vocab"].items()
            for i, case in enumerate(block["algorithms"]["MorphMark"])]


# ------------------------------------------------------------------------------------------
# MarkLLM's numbers
# ------------------------------------------------------------------------------------------
def test_reference_covers_both_vocabularies_and_all_kinds() -> None:
    cases = _cases()
    assert {v for v, _, _ in cases} == {1000, 50257}
    assert {c["kind"] for _, _, c in cases} == {"uniform-random", "model-sampled",
                                                "repeated-block", "watermarked"}
    assert {k: CONFIG[k] for k in ("gamma", "type", "k_exp", "p_0", "ewd", "prefix_length",
                                   "f_scheme", "z_threshold")} == {
        "gamma": 0.5, "type": "exp", "k_exp": 1.3, "p_0": 0.15, "ewd": False,
        "prefix_length": 1, "f_scheme": "time", "z_threshold": 2.0}


@pytest.mark.parametrize("vocab,index,case", _cases(),
                         ids=[f"V{v}-{i}-{c['kind']}" for v, i, c in _cases()])
def test_markllm_score_equals_markllm(vocab: int, index: int, case: dict) -> None:
    scheme = _scheme("morphmark:compat=markllm")
    det = scheme.detect(case["ids"], HASH_KEY, vocab)
    assert det.extra["markllm_score"] == pytest.approx(case["score"], rel=1e-6, abs=1e-6)
    assert det.extra["markllm_is_watermarked"] == case["is_watermarked"]
    detail = case["detail"]
    assert det.extra["green_with_repeats"] == detail["green"]
    assert det.extra["positions_with_repeats"] == detail["n_scored"]
    _, _, green, _ = scheme._flags([case["ids"]], HASH_KEY, vocab)
    assert [-1] + green[1:].astype(int).tolist() == detail["green_flags"]
    # evalrun's own count drops repeated contexts: never more positions than MarkLLM's
    assert det.num_tokens_scored <= detail["n_scored"]
    if case["kind"] == "repeated-block":
        assert det.num_tokens_scored < detail["n_scored"] // 2


def test_compat_seeds_are_reduced_mod_v_native_ones_are_not() -> None:
    vocab = 1000
    compat, native = _scheme("morphmark:compat=markllm"), _scheme()
    seeds = compat.seeds(range(vocab), HASH_KEY, vocab)
    assert max(seeds) < vocab and len(set(seeds)) == DATA["vocab"]["1000"]["bugs"][
        "morphmark_seed_mod_v"]["distinct_seeds"]
    # MarkLLM: another prime key gives the same set of green lists
    assert set(compat.seeds(range(vocab), "104729", vocab)) == set(seeds)
    mine = native.seeds(range(vocab), KEY, vocab)
    assert max(mine) >= vocab and len(set(mine)) == vocab
    # another key: new seeds (a chance overlap of 1000 draws from 2**64 is ~1e-14 expected)
    assert len(set(native.seeds(range(vocab), KEY + "!", vocab)) & set(mine)) < 3


# ------------------------------------------------------------------------------------------
# evalrun's null: Binomial(n, int(V*gamma)/V) over first-occurrence contexts
# ------------------------------------------------------------------------------------------
N_NULL, LENGTH, VOCAB, ALPHA = 1000, 150, 1000, 0.02


def _null_runs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20260)
    scheme = _scheme()
    p, n, g = [], [], []
    for seq in rng.integers(0, VOCAB, (N_NULL, LENGTH)):
        det = scheme.detect(seq, KEY, VOCAB)
        p.append(det.p_value)
        n.append(det.num_tokens_scored)
        g.append(det.num_green_tokens)
    return np.array(p), np.array(n), np.array(g)


@pytest.fixture(scope="module")
def null_runs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return _null_runs()


def test_null_fpr_inside_binomial_interval(null_runs) -> None:
    p, n, _ = null_runs
    frac = int(VOCAB * 0.5) / VOCAB
    # the exact test is discrete: its attained size for each n, averaged
    crit = [int(scipy.stats.binom.isf(ALPHA, k, frac)) + 1 for k in n]
    sizes = np.array([scipy.stats.binom.sf(c - 1, k, frac) for c, k in zip(crit, n)])
    assert (sizes <= ALPHA).all() and sizes.mean() > 0.01
    lo, hi = scipy.stats.binom.interval(0.95, N_NULL, sizes.mean())
    assert lo <= int((p <= ALPHA).sum()) <= hi


def test_null_randomised_p_values_are_uniform(null_runs) -> None:
    _, n, g = null_runs
    frac = int(VOCAB * 0.5) / VOCAB
    u = np.random.default_rng(7).random(len(n))
    rand_p = scipy.stats.binom.sf(g, n, frac) + u * scipy.stats.binom.pmf(g, n, frac)
    assert scipy.stats.kstest(rand_p, "uniform").pvalue > 1e-3


def _hash(x: int) -> int:
    return int(mix64(NUMPY, NUMPY.u64([x]))[0])


@pytest.mark.parametrize("spec", ["morphmark", "morphmark:gamma=0.3,prefix_length=3",
                                  "morphmark:prefix_length=2,f_scheme=additive"])
def test_native_detection_equals_the_slow_definition(spec: str) -> None:
    """Position by position from the module docstring: the context value, its seed word, the
    token green iff the top 53 bits of its pair hash fall below ``gamma * 2**53``; repeated
    context values dropped; detect_many, detect and prefix p-values agree."""
    scheme, V, rng = _scheme(spec), 997, np.random.default_rng(5)
    k, word = scheme.prefix_length, _hash(derive_key(KEY) ^ TAG_MORPHMARK)
    texts = [rng.integers(0, V, n) for n in (0, k, k + 1, 60, 120)]
    texts[-1][80:110] = texts[-1][20:50]
    dets = scheme.detect_many(texts, KEY, V)
    for ids, det, pre in zip(texts, dets, scheme.prefix_p_values_many(texts, KEY, V)):
        seen: set[int] = set()
        n = g = 0
        for t in range(k, len(ids)):
            window = [int(x) for x in ids[t - k:t]]
            c = (math.prod(window) if scheme.f_scheme == "time" else sum(window)) % V
            if c in seen:
                continue
            seen.add(c)
            seed = _hash(word ^ (c * GOLDEN % 2**64))
            word_t = _hash(seed ^ (int(ids[t]) * GOLDEN % 2**64))
            n, g = n + 1, g + (word_t >> 11 < round(scheme.gamma * 2**53))
        assert (det.num_tokens_scored, det.num_green_tokens) == (n, g)
        want = scipy.stats.binom.sf(g - 1, n, scheme.gamma) if n else 1.0
        assert det.p_value == pytest.approx(want, rel=1e-9)
        assert det == scheme.detect(ids, KEY, V)
        assert np.array_equal(pre, scheme.prefix_p_values(ids, KEY, V))
        assert len(pre) == len(ids) and (len(ids) <= k or pre[-1] == det.p_value)


def test_repeated_contexts_are_scored_once() -> None:
    scheme = _scheme()
    rng = np.random.default_rng(3)
    block = rng.integers(0, VOCAB, 20)
    seq = np.concatenate([block] * 5)
    det = scheme.detect(seq, KEY, VOCAB)
    assert det.num_tokens_scored == len(set(block.tolist()))
    assert det.extra["positions_with_repeats"] == len(seq) - 1


def test_prefix_p_values_match_detect() -> None:
    rng = np.random.default_rng(0)
    seq = rng.integers(0, 300, 70)
    seq[40:60] = seq[:20]
    for text in ("morphmark", "morphmark:gamma=0.3,prefix_length=2",
                 "morphmark:compat=markllm,f_scheme=additive"):
        scheme = _scheme(text)
        key = HASH_KEY if "compat" in text else KEY
        prefix = scheme.prefix_p_values(seq, key, 300)
        want = [scheme.detect(seq[: i + 1], key, 300).p_value for i in range(len(seq))]
        assert prefix.shape == (70,) and np.allclose(prefix, want, rtol=1e-12, atol=0)
    assert _scheme().prefix_p_values([], KEY, 300).shape == (0,)
    one = _scheme("morphmark:compat=markllm").detect([5], HASH_KEY, 300)
    assert one.num_tokens_scored == 0 and one.p_value == 1.0 and "markllm_score" not in one.extra


# ------------------------------------------------------------------------------------------
# Processor: MarkLLM's reweighting (transcribed from MorphMarkLogitsProcessor, batch of one)
# ------------------------------------------------------------------------------------------
def _markllm_reweight(torch, scores, green, cfg: dict):
    probs = torch.softmax(scores / 1.0, dim=-1)
    p_g = probs[green].sum().item()
    if p_g < cfg["p_0"]:
        r = 0.0
    elif cfg["type"] == "linear":
        r = cfg["k_linear"] * p_g
    elif cfg["type"] == "exp":
        r = np.exp(cfg["k_exp"] * p_g) - 1
    else:
        r = np.log(cfg["k_log"] * p_g + 1)
    beta = r * (1 - p_g)
    w = probs[green]
    probs[green] = probs[green] + w / w.sum() * beta
    w = probs[~green]
    probs[~green] = probs[~green] - w / w.sum() * beta
    probs = torch.clamp(torch.nan_to_num(probs, nan=0), min=0)
    return torch.log(probs / probs.sum(dim=-1, keepdim=True))


@pytest.mark.parametrize("kind", ["exp", "linear", "log"])
def test_processor_matches_markllm_rule(kind: str) -> None:
    torch = pytest.importorskip("torch")
    vocab = 1000
    scheme = _scheme(f"morphmark:compat=markllm,type={kind}")
    cfg = dict(CONFIG, type=kind)
    proc = scheme.logits_processor(HASH_KEY, vocab, temperature=1.0, seed=0)
    gen = torch.Generator().manual_seed(5)
    ids = torch.randint(0, vocab, (6, 4), generator=gen)
    scores = torch.randn(6, vocab, generator=gen, dtype=torch.float64) * 3
    scores[0, :] = -20.0
    scores[0, int(ids[0, -1])] = 0.0  # a peaky row whose green mass is far below p_0 or 1
    out = proc(ids, scores.clone())
    masks = []
    for row in range(6):
        (seed,) = scheme.seeds([int(ids[row, -1])], HASH_KEY, vocab)
        green = torch.zeros(vocab, dtype=torch.bool)
        green[torch.randperm(vocab, generator=torch.Generator().manual_seed(seed))[:500]] = True
        masks.append(green)
        want = _markllm_reweight(torch, scores[row].clone(), green, cfg)
        assert torch.allclose(out[row], want, rtol=1e-9, atol=1e-9, equal_nan=True)
        single = proc(ids[row:row + 1], scores[row:row + 1].clone())
        assert torch.allclose(single[0], out[row], rtol=0, atol=1e-12, equal_nan=True)
    for r in range(6):  # the green mass never falls, and grows wherever P_G >= p_0
        before = float(torch.softmax(scores[r], -1)[masks[r]].sum())
        after = float(out[r].exp()[masks[r]].sum())
        assert after >= before - 1e-12
        if CONFIG["p_0"] <= before < 1 - 1e-9:
            assert after > before + 0.01
    hot = scheme.logits_processor(HASH_KEY, vocab, temperature=0.7, seed=0)(ids, scores.clone())
    assert torch.allclose(hot, out / 0.7, equal_nan=True)
    as_np = proc(ids.numpy(), scores.numpy())
    assert isinstance(as_np, np.ndarray) and np.allclose(as_np, out.numpy(), equal_nan=True)


def test_native_processor_boosts_the_keyed_hash_green_list() -> None:
    """Native rows: MarkLLM's rule on the green list of the slow definition (token v green iff
    its pair hash with the context's seed word falls below gamma)."""
    torch = pytest.importorskip("torch")
    vocab, scheme = 500, _scheme("morphmark:gamma=0.3,type=linear")
    word = _hash(derive_key(KEY) ^ TAG_MORPHMARK)
    ids = torch.tensor([[3, 17], [4, 250], [9, 0]])
    scores = torch.randn(3, vocab, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    out = scheme.logits_processor(KEY, vocab, temperature=1.0, seed=0)(ids, scores.clone())
    for row in range(3):
        seed = _hash(word ^ (int(ids[row, -1]) * GOLDEN % 2**64))
        green = torch.tensor([_hash(seed ^ (v * GOLDEN % 2**64)) >> 11 < round(0.3 * 2**53)
                              for v in range(vocab)])
        want = _markllm_reweight(torch, scores[row].clone(), green, dict(CONFIG, type="linear"))
        assert torch.allclose(out[row], want, rtol=1e-9, atol=1e-9, equal_nan=True)


# ------------------------------------------------------------------------------------------
# Generation with the embedded model (hf provider)
# ------------------------------------------------------------------------------------------
PROMPTS = ["Miss Bennet walked to the village.", "The letter arrived on a Tuesday, and",
           "Mr. Darcy said that", "It was a fine morning when"]


def test_embedded_generation_is_detected_and_reproducible(generate, false_alarms_allowed) -> None:
    spec = "morphmark"
    scheme = _scheme(spec)
    first = generate(spec, KEY, PROMPTS, max_tokens=80, seed=11)
    again = generate(spec, KEY, PROMPTS, max_tokens=80, seed=11)
    assert [g.token_ids for g in first] == [g.token_ids for g in again]
    detected = alarms = 0
    for gen in first:
        assert gen.error is None and len(gen.token_ids) >= 60
        vocab = gen.extra["vocab_size"]
        det = scheme.detect(gen.token_ids, KEY, vocab)
        detected += det.p_value <= 0.02
        alarms += sum(scheme.detect(gen.token_ids, f"a wrong key {i}", vocab).p_value <= 0.02 for i in range(10))
    assert detected >= 3
    assert alarms <= false_alarms_allowed(10 * len(first), 0.02)


# ------------------------------------------------------------------------------------------
# evalrun detect and specs
# ------------------------------------------------------------------------------------------
def test_detect_cli_prints_markllm_score(tmp_path: Path) -> None:
    from evalrun.cli.detect import detect_main

    case = DATA["vocab"]["50257"]["algorithms"]["MorphMark"][6]
    path = tmp_path / "ids.jsonl"
    path.write_text(json.dumps({"id": "a", "token_ids": case["ids"]}) + "\n")
    out, err = io.StringIO(), io.StringIO()
    rc = detect_main(["--watermark", "morphmark:compat=markllm", "--key", HASH_KEY, "--tokens",
                      str(path), "--vocab-size", "50257"], stdout=out, stderr=err)
    assert rc == 0, err.getvalue()
    (row,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert row["markllm_score"] == pytest.approx(case["score"], rel=1e-6)
    assert 0.0 < row["p_value"] < 1.0


def test_defaults_and_canonical_spec() -> None:
    s = _scheme()
    assert (s.gamma, s.type, s.k_exp, s.p_0, s.prefix_length, s.compat) == \
        (0.5, "exp", 1.3, 0.15, 1, "none")
    assert str(s.spec) == (
        "morphmark:compat=none,delta_ewd=1.25,ewd=false,f_scheme=time,gamma=0.5,k_exp=1.3,"
        "k_linear=1.55,k_log=2.15,p_0=0.15,prefix_length=1,type=exp,window_scheme=left,"
        "z_threshold=2.0")
    assert build(parse_spec(str(s.spec))).spec == s.spec
    assert KEY not in repr(s) and KEY not in str(s.logits_processor(KEY, 50, temperature=1.0, seed=0))


@pytest.mark.parametrize("text,param", [
    ("morphmark:gamma=0", "gamma"), ("morphmark:gamma=1", "gamma"), ("morphmark:gamma=nan", "gamma"),
    ("morphmark:gamma=x", "gamma"), ("morphmark:type=cubic", "type"), ("morphmark:p_0=1.5", "p_0"),
    ("morphmark:k_exp=-1", "k_exp"), ("morphmark:ewd=true", "ewd"), ("morphmark:ewd=maybe", "ewd"),
    ("morphmark:prefix_length=0", "prefix_length"), ("morphmark:f_scheme=min", "f_scheme"),
    ("morphmark:window_scheme=self", "window_scheme"), ("morphmark:compat=yes", "compat"),
    ("morphmark:hash_key=3", "hash_key"), ("morphmark:delta=2", "delta"),
])
def test_bad_specs_give_one_line_naming_the_parameter(text: str, param: str) -> None:
    with pytest.raises(SpecError, match=param) as info:
        parse_watermark(text)
    assert "\n" not in str(info.value) and "morphmark" in str(info.value)


@pytest.mark.parametrize("key", ["not-a-number", "7.5", "", "2" * 30])
def test_compat_key_must_be_an_integer(key: str) -> None:
    scheme = _scheme("morphmark:compat=markllm")
    with pytest.raises(SpecError, match="compat") as info:
        scheme.check_key(key)
    assert "\n" not in str(info.value) and (not key or key not in str(info.value))
    with pytest.raises(SpecError):
        scheme.detect([1, 2, 3], key, 10)
    with pytest.raises(SpecError):
        scheme.logits_processor(key, 10, temperature=1.0, seed=0)


def test_native_key_must_not_be_blank() -> None:
    with pytest.raises(SpecError, match="key"):
        _scheme().check_key("   ")
    assert math.isfinite(_scheme().detect([1, 2, 3], "x", 10).p_value)
