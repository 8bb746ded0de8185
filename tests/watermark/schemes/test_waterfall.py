"""Waterfall (``waterfall:k_p=...,kappa=...``): reference values, hand-computed cases, the
null distribution, the processor, the hf provider and ``evalrun detect``.

Reference values: ``data/waterfall_reference.json`` was written by
``scripts/waterfall_reference_values.py`` with the reference package (PyPI ``waterfall``
0.3.4, numpy 2.4) in a separate environment; these tests only read the JSON.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from evalrun._util.errors import SpecError
from evalrun._util.specs import parse_spec
from evalrun.testing.portable_inputs import uniform_scores
from evalrun.watermark.engine.seed_tables import seed_tables
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes.waterfall import (
    Waterfall,
    build,
    max_freq,
    parse_owner_id,
    permutation,
    perturbation,
    unit_phi,
    verify_owners,
)

DATA = json.loads((Path(__file__).parent / "data" / "waterfall_reference.json").read_text())
ROOT2 = math.sqrt(2) / 2


def _spec(case: dict, k_p: int) -> str:
    text = f"waterfall:k_p={k_p},n_gram={case['n_gram']}"
    if case["N"] != case["vocab_size"]:
        text += f",vocab={case['N']}"
    return text


# ------------------------------------------------------------------------------------------
# Reference values
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", DATA["q_scores"], ids=lambda c: c["name"])
def test_q_scores_match_the_reference(case: dict) -> None:
    """``detect().score`` and ``verify_owners`` equal the reference's q-score (|d| <= 1e-5;
    in practice ~1e-8, the reference rounds through complex64)."""
    ref = np.asarray(case["q"])  # [owner, k_p]
    for j, k_p in enumerate(case["k_p"]):
        scheme = parse_watermark(_spec(case, k_p))
        got = scheme.verify_owners(case["token_ids"], case["owners"], case["vocab_size"])
        assert np.abs(got - ref[:, j]).max() <= 1e-5
        for owner, expected in zip(case["owners"], ref[:, j]):
            det = scheme.detect(case["token_ids"], str(owner), case["vocab_size"])
            assert abs(det.score - expected) <= 1e-5


def test_reference_cases_cover_the_edge_rules() -> None:
    names = {c["name"] for c in DATA["q_scores"]}
    assert {"stop-at-N", "identity-context", "ngram3-V8192", "odd-N-101", "too-short"} <= names
    stop = next(c for c in DATA["q_scores"] if c["name"] == "stop-at-N")
    det = parse_watermark(_spec(stop, 1)).detect(stop["token_ids"], "7", 8192)
    # the first token >= N = 8000 after position 0 stops the scan (uniform ids over 8192
    # contain one long before the planted 8050 at position 150)
    ids = np.asarray(stop["token_ids"])
    first = 1 + int(np.flatnonzero(ids[1:] >= 8000)[0])
    assert 1 < first <= 150 and ids[0] >= 8000
    assert det.num_tokens_scored == first - 1
    assert det.extra["num_tokens_ignored"] == len(ids) - first
    short = next(c for c in DATA["q_scores"] if c["name"] == "too-short")
    det = parse_watermark("waterfall").detect(short["token_ids"], "7", 8192)
    assert (det.num_tokens_scored, det.score, det.p_value) == (0, 0.0, 1.0) == (0, *short["q"][0], 1.0)


@pytest.mark.parametrize("case", DATA["perturbations"], ids=lambda c: f"N{c['N']}-{c['owner']}")
def test_processor_matches_the_reference_bit_for_bit(case: dict) -> None:
    """The reference ``PerturbationProcessor`` on the same ids and float32 scores (integer
    draws, the same bits on every CPU): the first call (prompt only) leaves the scores alone,
    the next adds ``phi[perm]`` to the first N columns; identical bytes (sha256), including a
    previous token >= N (identity). Exact across machines: float32 additions of ``phi`` cast
    to float32, whose float64 cosines are libm's on every path measured (NumPy's float64
    ``cos`` has no AVX-512 variant; a last-bit difference would also have to cross a float32
    rounding boundary to show)."""
    torch = pytest.importorskip("torch")
    n, width = case["N"], case["width"]
    spec = f"waterfall:k_p={case['k_p']},kappa={case['kappa']},n_gram={case['n_gram']}"
    if width != n:
        spec += f",vocab={n}"
    proc = parse_watermark(spec).logits_processor(str(case["owner"]), width, temperature=1.0,
                                                  seed=0)
    gen = torch.Generator().manual_seed(case["torch_seed"])
    prompt = torch.randint(0, n, (3, 5), generator=gen)
    first = torch.randint(0, n, (3, case["n_gram"] - 1), generator=gen)
    if width > n:
        first[2, -1] = n + 10
    scores0 = uniform_scores((3, width), gen)
    scores = uniform_scores((3, width), gen)
    assert prompt.tolist() == case["prompt"] and first.tolist() == case["generated"]
    assert torch.equal(proc(prompt, scores0), scores0)
    out = proc(torch.cat([prompt, first], dim=1), scores)
    for b, row in enumerate(case["rows"]):
        got = out[b].numpy().astype(np.float32)
        assert hashlib.sha256(got.tobytes()).hexdigest() == row["sha256"]
        assert got[:8].tolist() == row["head"]
        assert {k: float(got[int(k)]) for k in row["at"]} == row["at"]


# ------------------------------------------------------------------------------------------
# Hand-computed (V = 8)
# ------------------------------------------------------------------------------------------
#: numpy's legacy ``RandomState((7, p)).permutation(8)``, printed once with numpy 2.4
PERMS_7 = {0: [1, 7, 5, 6, 4, 3, 2, 0], 1: [6, 7, 2, 3, 5, 0, 1, 4],
           3: [5, 3, 1, 6, 7, 4, 2, 0], 5: [6, 3, 0, 2, 1, 7, 5, 4]}


def test_permutations_are_numpy_legacy_tuple_seeded() -> None:
    for prev, perm in PERMS_7.items():
        assert permutation(7, (prev,), 8).tolist() == perm
    assert permutation(7, (8,), 8).tolist() == list(range(8))  # previous token >= N: identity
    assert permutation(7, (3,), 8).dtype == np.uint8  # numpy.min_scalar_type(N)
    got = permutation(12345, (17, 4), 50257)
    assert got.dtype == np.uint16
    assert np.array_equal(got, np.random.RandomState((12345, 17, 4)).permutation(50257))


def test_hand_computed_score_and_null() -> None:
    """Text 3 0 1 1 5 3 0 under owner 7, N = 8: pairs (3,0) (0,1) (1,1) (1,5) (5,3) (3,0)
    have indices 5 7 7 0 2 5 (repeats count), so the cosine score (k_p=1) is
    (-r + r + r + 1 + 0 - r) / 6 = 1/6 with r = sqrt(2)/2, and the sine score (k_p=4:
    frequency 4 - max_freq(8) = 1) is (-r - r - r + 0 + 1 - r) / 6 = (1 - 2 sqrt 2) / 6."""
    text = [3, 0, 1, 1, 5, 3, 0]
    idx = [PERMS_7[p][t] for p, t in zip(text[:-1], text[1:])]
    assert idx == [5, 7, 7, 0, 2, 5]
    cos = parse_watermark("waterfall:k_p=1").detect(text, "7", 8)
    assert cos.num_tokens_scored == 6
    assert cos.score == pytest.approx(1 / 6, abs=1e-15)
    sin = parse_watermark("waterfall:k_p=4").detect(text, "7", 8)
    assert sin.score == pytest.approx((1 - 2 * math.sqrt(2)) / 6, abs=1e-15)
    # Var S = sum_c [1/2 sum_t m^2 - (M^2 - sum_t m^2) / (2 (N-1))]: context 3 {0: 2},
    # 0 {1: 1}, 1 {1: 1, 5: 1}, 5 {3: 1} -> 1/2 (4 + 1 + 2 + 1) - 2 / 14 = 27/7
    z = 1.0 / math.sqrt(27 / 7)
    assert cos.z_score == pytest.approx(z, rel=1e-12)
    assert cos.p_value == pytest.approx(stats.norm.sf(z), rel=1e-12)
    with pytest.raises(ValueError, match="k_p=7"):
        parse_watermark("waterfall:k_p=7").detect(text, "7", 8)  # 2 * max_freq(8) = 6


@pytest.mark.parametrize("workers", [1, 4])
def test_processor_rows_drawn_on_threads(workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step's rows, drawn on ``workers`` threads at once (evalrun._util.threads.map_rows),
    are each row's ``phi[RandomState((owner, previous token)).permutation(N)]`` added in
    float32, in the rows' order, whatever the threads' scheduling; a previous token seen in
    two rows gives both the same row."""
    torch = pytest.importorskip("torch")
    from evalrun._util import threads

    monkeypatch.setattr(threads, "row_workers", lambda: workers)
    seed_tables().clear()
    n, owner = 50_257, 42
    proc = parse_watermark("waterfall").logits_processor(str(owner), n, temperature=1.0, seed=0)
    prev = [5, 77, 50_000, 5, 1234, 9, 31_337, 2]
    gen = torch.Generator().manual_seed(3)
    prompt = torch.randint(0, n, (len(prev), 4), generator=gen)
    scores = uniform_scores((len(prev), n), gen)
    proc(prompt, scores)  # the prompt: left alone, the generation starts
    out = proc(torch.cat([prompt, torch.tensor(prev)[:, None]], dim=1), scores)
    phi = perturbation(n, 1, 2.0)
    for b, p in enumerate(prev):
        row = phi[np.random.RandomState((owner, p)).permutation(n)].astype(np.float32)
        want = scores[b].numpy() + row
        assert np.array_equal(out[b].numpy().view(np.uint32), want.view(np.uint32))


def test_hand_computed_processor() -> None:
    """Owner 7, N = 8, kappa = 2: after previous token 0 the logits gain
    2 cos(2 pi perm_0[t] / 8), perm_0 = 1 7 5 6 4 3 2 0."""
    torch = pytest.importorskip("torch")
    proc = parse_watermark("waterfall:kappa=2").logits_processor("7", 8, temperature=1.0, seed=0)
    zeros = torch.zeros(1, 8)
    assert torch.equal(proc(torch.tensor([[3]]), zeros), zeros)  # first generated token
    out = proc(torch.tensor([[3, 0]]), torch.zeros(1, 8))
    s = math.sqrt(2)
    assert out[0].tolist() == pytest.approx([s, s, -s, 0, -2, -s, 0, 2], abs=1e-6)
    # temperature first, then the perturbation (kappa is not divided by it); numpy scores too
    proc = parse_watermark("waterfall:kappa=2").logits_processor("7", 8, temperature=0.5, seed=0)
    base = np.arange(8, dtype=np.float32)[None, :]
    proc(np.array([[3]]), base)
    out = proc(np.array([[3, 0]]), base)
    assert out.dtype == np.float32 and base[0, 1] == 1.0  # the input is not modified
    assert out[0].tolist() == pytest.approx((2 * np.arange(8) + [s, s, -s, 0, -2, -s, 0, 2]).tolist(),
                                            abs=1e-6)
    # a shorter input starts a new generation
    assert np.array_equal(proc(np.array([[5]]), base), base / 0.5)


def test_phi_is_the_reference_fourier_family() -> None:
    for n in (8, 9, 101, 8192, 50257):
        top = max_freq(n)
        assert top == (n // 2 - 1 if n % 2 == 0 else n // 2)
        grid = np.arange(n)
        assert np.allclose(unit_phi(n, 1), np.cos(2 * np.pi * grid / n), atol=1e-12)
        assert np.allclose(unit_phi(n, top), np.cos(2 * np.pi * top * grid / n), atol=1e-9)
        assert np.allclose(unit_phi(n, top + 1), np.sin(2 * np.pi * grid / n), atol=1e-12)
        assert np.allclose(unit_phi(n, 2 * top), np.sin(2 * np.pi * top * grid / n), atol=1e-9)
        for k in (1, top, top + 1, 2 * top):  # mean 0, mean square 1/2: the null's moments
            assert abs(unit_phi(n, k).mean()) < 1e-12 and unit_phi(n, k).var() == pytest.approx(0.5)
    assert np.array_equal(perturbation(8192, 3, 6.0), 6.0 * unit_phi(8192, 3))


# ------------------------------------------------------------------------------------------
# Keys and specs
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key,value", [("7", 7), (" 12345 ", 12345), ("0", 0),
                                       ("+3", 3), (str(2**32 - 1), 2**32 - 1)])
def test_owner_ids(key: str, value: int) -> None:
    assert parse_owner_id(key) == value
    parse_watermark("waterfall").check_key(key)


@pytest.mark.parametrize("key", ["", "  ", "-1", "1.5", "0x10", "owner-seven-secret",
                                 str(2**32), "99999999999999999999"])
def test_bad_keys_name_the_option_and_are_not_echoed(key: str) -> None:
    with pytest.raises(SpecError, match="--key") as err:
        parse_watermark("waterfall").check_key(key)
    if key.strip():
        assert key.strip() not in str(err.value)


def test_specs() -> None:
    scheme = parse_watermark("waterfall")
    assert isinstance(scheme, Waterfall)
    assert scheme.spec.canonical() == "waterfall:k_p=1,kappa=2.0,n_gram=2"
    assert (scheme.k_p, scheme.kappa, scheme.n_gram, scheme.vocab) == (1, 2.0, 2, None)
    assert scheme.shared_context == 1
    assert parse_watermark("waterfall:kappa=6,k_p=3,n_gram=3,vocab=32000").spec.canonical() \
        == "waterfall:k_p=3,kappa=6.0,n_gram=3,vocab=32000"
    for bad in ("waterfall:gamma=0.5", "waterfall:kappa=-1", "waterfall:kappa=nan",
                "waterfall:k_p=0", "waterfall:k_p=x", "waterfall:n_gram=1", "waterfall:n_gram=9",
                "waterfall:vocab=2"):
        with pytest.raises(SpecError, match="--watermark"):
            parse_watermark(bad)
    assert isinstance(build(parse_spec("waterfall:k_p=2")), Waterfall)
    with pytest.raises(ValueError, match="vocab=9000 exceeds"):
        parse_watermark("waterfall:vocab=9000").detect([1, 2, 3], "7", 8192)
    with pytest.raises(ValueError, match=r"\[0, 8192\)"):
        parse_watermark("waterfall").detect([1, 8192], "7", 8192)


# ------------------------------------------------------------------------------------------
# Prefixes, several owners, several texts, the cache
# ------------------------------------------------------------------------------------------
def _zipf(seed: int, n: int, vocab: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return rng.permutation(vocab)[np.minimum(rng.zipf(1.3, n), vocab) - 1].tolist()


def test_prefix_p_values_score_every_prefix() -> None:
    scheme = parse_watermark("waterfall:n_gram=3")
    text = _zipf(1, 40, 1000)
    got = scheme.prefix_p_values(text, "7", 1000)
    assert got.shape == (40,) and got[0] == got[1] == 1.0
    for i in range(2, 40):
        assert got[i] == pytest.approx(scheme.detect(text[: i + 1], "7", 1000).p_value, rel=1e-12)
    # after the reference's stop (a token >= vocab) the p-value keeps its last value
    stopped = parse_watermark("waterfall:vocab=900").prefix_p_values(
        [5, 6, 7, 950, 8, 9], "7", 1000)
    assert stopped[0] == 1.0 and stopped[3:].tolist() == [stopped[2]] * 3
    assert stopped[2] == parse_watermark("waterfall:vocab=900").detect(
        [5, 6, 7], "7", 1000).p_value


def test_verify_owners_is_detect_per_owner_and_per_text() -> None:
    scheme = parse_watermark("waterfall:k_p=5")
    texts = [_zipf(s, 80 + 10 * s, 4096) for s in range(4)] + [[3], []]
    owners = [0, 1, 7, 12345]
    scores, pvals = scheme.verify_owners(texts, owners, 4096, p_values=True)
    assert scores.shape == pvals.shape == (6, 4)
    for i, text in enumerate(texts):
        one = scheme.verify_owners(text, owners, 4096)
        assert one.shape == (4,) and np.allclose(one, scores[i], atol=1e-15)
        for k, owner in enumerate(owners):
            det = scheme.detect(text, str(owner), 4096)
            assert det.score == pytest.approx(scores[i, k], abs=1e-15)
            assert det.p_value == pytest.approx(pvals[i, k], rel=1e-12)
    assert (scores[4:] == 0).all() and (pvals[4:] == 1).all()
    array = scheme.verify_owners(np.array([texts[0][:50], texts[1][:50]]), owners, 4096)
    assert array.shape == (2, 4)
    assert np.array_equal(verify_owners(texts[:2], owners, 4096, k_p=5), scores[:2])


def test_permutations_come_from_the_seed_table_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    scheme = parse_watermark("waterfall")
    text = _zipf(3, 200, 8192)
    seed_tables().clear()
    first = scheme.detect(text, "7", 8192)
    misses = seed_tables().stats.misses
    assert misses == len(set(text[:-1]))  # one permutation per distinct context
    again = scheme.detect(text, "7", 8192)
    assert seed_tables().stats.misses == misses and seed_tables().stats.hits >= misses
    assert again == first
    # a zero budget keeps nothing and changes nothing
    from evalrun.watermark.engine import seed_tables as st

    monkeypatch.setattr(st, "_CACHE", st.SeedTableCache(0))
    assert scheme.detect(text, "7", 8192) == first


# ------------------------------------------------------------------------------------------
# The null distribution
# ------------------------------------------------------------------------------------------
def test_normal_null_against_simulation() -> None:
    """Under H0 the indices are i.i.d. uniform, the score a mean of n terms
    cos(2 pi k U / N) (mean 0, variance 1/2). The normal tail is accurate near the centre and
    conservative in the tail (the terms' excess kurtosis is -3/2). Measured with 2e6 draws
    per n (k_p = 1, N = 8192), simulated P[z >= z_alpha] for alpha = 0.05 / 0.01 / 0.001:
    n=5: 0.0506 / 0.0080 / 0.000014; n=10: 0.0505 / 0.0090 / 0.00055;
    n=20: 0.0500 / 0.0094 / 0.00078; n=50: 0.0500 / 0.0099 / 0.00091; n=100: 0.0499 /
    0.0097 / 0.0010. Checked here with fewer draws."""
    rng = np.random.default_rng(0)
    n_bins = 8192
    f = unit_phi(n_bins, 1)
    for n in (10, 20, 50):
        reps = 200_000
        s = np.zeros(reps)
        for _ in range(n):
            s += f[rng.integers(0, n_bins, reps)]
        z = s / math.sqrt(n / 2)
        for alpha in (0.05, 0.01, 0.001):
            tail = (z >= stats.norm.isf(alpha)).mean()
            se = math.sqrt(alpha / reps)
            if alpha == 0.05:
                assert abs(tail - alpha) < 4 * se + 0.002
            else:
                assert tail <= alpha + 4 * se  # conservative


def test_null_variance_accounts_for_repeated_pairs() -> None:
    """Over many wrong owner ids (fresh permutations), S has mean 0 and the variance of the
    formula, which counts a repeated (context, token) pair's m^2 and the without-replacement
    covariance within a context; p-values are roughly uniform."""
    n_bins = 256
    text = [5, 9] * 12 + _zipf(4, 30, n_bins) + [5, 9, 5, 7, 5, 8, 5, 9]
    scheme = parse_watermark("waterfall:k_p=3")
    owners = list(range(1000, 4000))
    scores, pvals = scheme.verify_owners(text, owners, n_bins, p_values=True)
    m = len(text) - 1
    sums = scores * m
    det = scheme.detect(text, "1000", n_bins)
    sd = abs(det.score * m / det.z_score)  # sqrt(Var S) from the detector
    naive = math.sqrt(m / 2)
    assert sd > 1.5 * naive  # the repeats matter
    assert abs(sums.mean()) < 4 * sd / math.sqrt(len(owners))
    assert sums.std() == pytest.approx(sd, rel=0.06)
    assert 0.03 < (pvals < 0.05).mean() < 0.07
    assert 0.45 < (pvals < 0.5).mean() < 0.55


# ------------------------------------------------------------------------------------------
# Generation with the embedded model (hf provider) and ``evalrun detect``
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def provider():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from evalrun.model.embedded import embedded_model_path
    from evalrun.plugins.providers.hf import HFProvider

    return HFProvider(str(embedded_model_path()), spec="embedded", batch_size=4)


def _requests(specs_keys, prompts, *, temperature: float, max_tokens: int):
    from evalrun.model.generation import GenerationRequest, GenParams, Prompt

    return [GenerationRequest(gen_key=f"g{i}", pack="unit", case={"id": f"c{i}"},
                              prompt=Prompt(None, prompt),
                              params=GenParams(temperature=temperature, max_tokens=max_tokens,
                                               seed=11),
                              repetition=0, watermark=spec, key=key)
            for i, ((spec, key), prompt) in enumerate(zip(specs_keys, prompts))]


def _generate(provider, reqs) -> dict:
    got: dict = {}
    provider.generate(reqs, lambda req, gen: got.__setitem__(req.gen_key, gen))
    return got


def test_greedy_generation_matches_the_reference(provider, monkeypatch) -> None:
    """Greedy decoding of the embedded model with the reference's processor (recorded) gives
    the same 40 tokens as the hf provider with ``waterfall``, with the processor shared by the
    rows of a batch and with one processor per row."""
    from evalrun.plugins.providers.hf import shared_context

    cases = DATA["generation"]
    assert shared_context(parse_watermark("waterfall")) == 1
    prompt_ids = {c["prompt"]: c["prompt_ids"] for c in cases}
    monkeypatch.setattr(provider, "_encode", lambda prompt: list(prompt_ids[prompt.user]))
    reqs = _requests([(f"waterfall:kappa={c['kappa']},k_p={c['k_p']}", str(c["owner"]))
                      for c in cases], [c["prompt"] for c in cases], temperature=0.0,
                     max_tokens=40)
    groups = provider._groups(reqs, [prompt_ids[r.prompt.user] for r in reqs])
    assert sorted(g.rows for g in groups if g.shared and g.processor) == [[0, 1], [2, 3]]
    for share in (True, False):
        monkeypatch.setattr(provider, "share_processors", share)
        got = _generate(provider, reqs)
        for i, case in enumerate(cases):
            assert got[f"g{i}"].error is None
            assert got[f"g{i}"].token_ids == case["token_ids"], (share, i)


def test_sampled_generation_is_detected_with_the_right_owner_only(provider, monkeypatch,
                                                                  false_alarms_allowed) -> None:
    """Two sampled generations (40 tokens, kappa 4) under owner 7: owner 7 scores highest of
    ids 0..31 with p < 1e-6; no wrong id reaches p < 1e-4. Shared and per-row processors give
    the same tokens."""
    spec = "waterfall:kappa=4"
    reqs = _requests([(spec, "7")] * 2, ["Miss Bennet walked to the village.",
                                         "The letter arrived on a Tuesday, and"],
                     temperature=1.0, max_tokens=40)
    got = _generate(provider, reqs)
    monkeypatch.setattr(provider, "share_processors", False)
    assert {k: g.token_ids for k, g in _generate(provider, reqs).items()} == \
        {k: g.token_ids for k, g in got.items()}
    scheme = parse_watermark(spec)
    owners = list(range(32))
    for gen in got.values():
        assert gen.error is None and len(gen.token_ids) >= 30
        scores, pvals = scheme.verify_owners(gen.token_ids, owners, gen.extra["vocab_size"],
                                             p_values=True)
        assert int(np.argmax(scores)) == 7 and pvals[7] < 1e-6
        wrong = np.delete(pvals, 7)
        assert (wrong <= 1e-4).sum() <= false_alarms_allowed(len(wrong), 1e-4), wrong.min()


def test_detect_cli_prints_the_reference_q_score(tmp_path: Path) -> None:
    from evalrun.cli.detect import detect_main

    case = next(c for c in DATA["q_scores"] if c["name"] == "zipf-V50257-n200")
    path = tmp_path / "ids.jsonl"
    path.write_text(json.dumps({"id": "a", "token_ids": case["token_ids"]}) + "\n")
    for k, owner in enumerate(case["owners"]):
        out, err = io.StringIO(), io.StringIO()
        rc = detect_main(["--watermark", "waterfall:k_p=1", "--key", str(owner), "--tokens",
                          str(path), "--vocab-size", "50257"], stdout=out, stderr=err)
        # an owner id is an integer: guessable, and said so in the one line on stderr
        assert rc == 0 and err.getvalue().startswith("evalrun: warning: the watermark key (--key) is easy to guess")
        assert err.getvalue().count("\n") == 1
        (row,) = [json.loads(line) for line in out.getvalue().splitlines()]
        assert row["id"] == "a" and row["num_tokens_scored"] == 199
        assert abs(row["score"] - case["q"][k][0]) <= 1e-5
        assert 0.0 <= row["p_value"] <= 1.0 and "z_score" in row
    out, err = io.StringIO(), io.StringIO()
    rc = detect_main(["--watermark", "waterfall", "--key", "seven", "--tokens", str(path),
                      "--vocab-size", "50257"], stdout=out, stderr=err)
    assert rc == 2 and "--key" in err.getvalue() and "seven" not in err.getvalue()
