"""SWEET and EWD (MarkLLM's ``watermark/sweet`` and ``watermark/ewd``), the two schemes of
:mod:`evalrun.watermark.schemes.entropy_green`: MarkLLM's scores and intermediates on its own token ids
with the model it ran, the nulls on unwatermarked text, generation with the embedded model,
the model at detection (``evalrun detect --model``, the missing-model error) and spec checks.

Reference values: ``tests/watermark/schemes/data/markllm_reference.json`` (``scripts/markllm_reference.py``,
MarkLLM 112fa74 on a random 2-layer GPT-2 at V=1000 and V=50257, rebuilt here by
``markllm_model.py``).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from evalrun._util.errors import EvalrunError, SpecError
from evalrun.watermark.base import ModelRequired
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes.entropy_green import EntropyGreenScheme

sys.path.insert(0, str(Path(__file__).parent))
from markllm_model import DATA, ReferenceLogits  # noqa: E402

from evalrun.model.providers import parse_model  # noqa: E402
from evalrun.testing.float_drift import assert_clear_of, assert_within, clear_of, float32_bound  # noqa: E402

torch = pytest.importorskip("torch")
KEY = "sweet and ewd test key"
NAMES = {"sweet": "SWEET", "ewd": "EWD"}


def _scheme(text: str) -> EntropyGreenScheme:
    scheme = parse_watermark(text)
    assert isinstance(scheme, EntropyGreenScheme)
    return scheme


@pytest.fixture(scope="module")
def logits() -> dict[int, ReferenceLogits]:
    return {v: ReferenceLogits(v) for v in (1000, 50257)}


def _cases() -> list[tuple[str, int, int, dict]]:
    return [(name, int(v), i, case) for name, algo in NAMES.items()
            for v, block in DATA["vocab"].items() for i, case in enumerate(block["algorithms"][algo])]


# ------------------------------------------------------------------------------------------
# MarkLLM's numbers
# ------------------------------------------------------------------------------------------
def test_reference_covers_both_vocabularies_and_all_kinds() -> None:
    for name in NAMES:
        cases = [c for c in _cases() if c[0] == name]
        assert {v for _, v, _, _ in cases} == {1000, 50257}
        assert {c["kind"] for *_, c in cases} == {"uniform-random", "model-sampled", "repeated-block",
                                                  "watermarked"}
    assert DATA["configs"]["SWEET"]["entropy_threshold"] == 0.9
    # SWEET's entropy filter fires on the reference model: some positions are dropped, some kept
    sweet = [c for c in _cases() if c[0] == "sweet"]
    assert all(0 < c["detail"]["n_scored"] < len(c["ids"]) - 1 for *_, c in sweet)


def _entropy_drift(rows: np.ndarray, bound: float) -> np.ndarray:
    """How far each row's float32 Shannon entropy moves when its logits move by ``bound`` (0:
    not at all). The gradient of ``H(softmax(z))`` is ``-p (log p + H)``, so the logits move it by
    at most ``bound * sum_j p_j |log p_j + H|``; its own float32 evaluation (probabilities
    summing to 1, terms summing to H) by the float32 bound at ``1 + H``."""
    if bound == 0:
        return np.zeros(len(rows))
    z = rows.astype(np.float64)
    logp = z - z.max(axis=1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
    p = np.exp(logp)
    h = -(p * logp).sum(axis=1)
    return bound * (p * np.abs(logp + h[:, None])).sum(axis=1) + float32_bound(1.0) * (1.0 + h)


def _ewd_z_drift(weights: np.ndarray, green: np.ndarray, gamma: float, z: float, weight_bound: float) -> float:
    """How far MarkLLM's weighted z moves when every weight moves by ``weight_bound``, plus its
    float32 sums: ``z = (sum w g - gamma sum w) / sqrt(gamma (1 - gamma) sum w^2)`` has
    ``dz/dw_i = (g_i - gamma) / D - z w_i / sum w^2``."""
    w = np.asarray(weights, dtype=np.float64)
    sq = float((w * w).sum())
    if sq == 0:  # nothing weighed: no z (p = 1) on any machine
        return 0.0
    denom = np.sqrt(gamma * (1 - gamma) * sq)
    gradient = np.abs((np.asarray(green, dtype=np.float64) - gamma) / denom - z * w / sq).sum()
    float32_sums = float32_bound(gamma * w.sum() / denom + abs(z), roundoffs=2 * len(w))
    return weight_bound * gradient + float32_sums


@pytest.mark.parametrize("name,vocab,index,case", _cases(),
                         ids=[f"{n}-V{v}-{i}-{c['kind']}" for n, v, i, c in _cases()])
def test_markllm_score_equals_markllm(name: str, vocab: int, index: int, case: dict, logits) -> None:
    """Bit for bit where this machine's forward pass gives the reference run's logits; elsewhere
    within what the logits' float32 drift (``ReferenceLogits.bound``) moves each number by. SWEET's
    entropy filter is a decision: the reference's entropies must lie clear of the threshold by
    twice that drift, and then its counts and z are exact; EWD's z moves with its weights."""
    algo = NAMES[name]
    scheme = _scheme(f"{name}:compat=markllm")
    key = str(DATA["configs"][algo]["hash_key"])
    ids = np.asarray(case["ids"])
    bound = logits[vocab].bound(case)
    det = scheme.detect(ids, key, vocab, logits=logits[vocab])
    stats = scheme.stats(ids, logits[vocab], vocab)
    want = np.asarray(case["detail"]["entropy"][1:])
    flags, _ = scheme.green_units(ids, key, vocab)
    assert flags[1:].astype(int).tolist() == case["detail"]["green_flags"][1:]
    if name == "sweet":
        drift = _entropy_drift(logits[vocab].rows(ids), bound)
        assert_within(stats[1:], want, drift, "Shannon entropies")
        assert_clear_of(want, scheme.entropy_threshold, 2 * drift, "entropies against SWEET's threshold")
        assert det.extra["positions_with_repeats"] == case["detail"]["n_scored"]
        assert det.extra["green_with_repeats"] == case["detail"]["green"]
        assert det.extra["markllm_score"] == case["score"]
    else:
        assert_within(stats[1:], want, 2 * bound, "spike entropies")  # |d spike| <= 2 |d logit|
        k = scheme.prefix_length  # the reference's arrays carry a -1 sentinel before it
        z_drift = _ewd_z_drift(case["detail"]["weights"][k:], case["detail"]["green_flags"][k:], scheme.gamma,
                               case["score"], 4 * bound)  # a weight is a difference of two spike entropies
        assert_within(det.extra["markllm_score"], case["score"], z_drift, "MarkLLM's weighted z")
        if not clear_of(case["score"], scheme.z_threshold, 2 * z_drift):
            return  # too close to the threshold for its verdict to be compared on another machine
    assert det.extra["markllm_is_watermarked"] == case["is_watermarked"]


def test_markllm_watermarked_texts_are_detected_by_evalrun(logits) -> None:
    """MarkLLM's own watermarked texts: evalrun's null puts most of them under p = 0.05 (the
    texts are 60 tokens long) and none of MarkLLM's random texts under 0.02."""
    for name, algo in NAMES.items():
        scheme = _scheme(f"{name}:compat=markllm")
        key = str(DATA["configs"][algo]["hash_key"])
        for vocab in (1000, 50257):
            cases = DATA["vocab"][str(vocab)]["algorithms"][algo]
            marked = [scheme.detect(c["ids"], key, vocab, logits=logits[vocab]).p_value
                      for c in cases if c["kind"] == "watermarked"]
            random = [scheme.detect(c["ids"], key, vocab, logits=logits[vocab]).p_value
                      for c in cases if c["kind"] == "uniform-random"]
            assert sum(p <= 0.05 for p in marked) >= 2, (name, vocab, marked)
            assert min(random) > 0.02


# ------------------------------------------------------------------------------------------
# nulls on unwatermarked text (native keys; the model reads random token ids)
# ------------------------------------------------------------------------------------------
N_NULL, LENGTH, VOCAB, ALPHA = 400, 80, 1000, 0.02


@pytest.fixture(scope="module")
def null_texts() -> np.ndarray:
    return np.random.default_rng(20261126).integers(0, VOCAB, (N_NULL, LENGTH))


def test_sweet_null_is_the_exact_binomial(null_texts, logits) -> None:
    scheme = _scheme("sweet")
    dets = [scheme.detect(t, KEY, VOCAB, logits=logits[VOCAB]) for t in null_texts]
    n = np.array([d.num_tokens_scored for d in dets])
    g = np.array([d.num_green_tokens for d in dets])
    p = np.array([d.p_value for d in dets])
    frac = scheme.green_probability(VOCAB)
    assert frac == 0.5
    crit = [int(scipy.stats.binom.isf(ALPHA, k, frac)) + 1 for k in n]
    sizes = np.array([scipy.stats.binom.sf(c - 1, k, frac) for c, k in zip(crit, n)])
    lo, hi = scipy.stats.binom.interval(0.95, N_NULL, sizes.mean())
    assert lo <= int((p <= ALPHA).sum()) <= hi
    u = np.random.default_rng(7).random(len(n))
    rand_p = scipy.stats.binom.sf(g, n, frac) + u * scipy.stats.binom.pmf(g, n, frac)
    assert scipy.stats.kstest(rand_p, "uniform").pvalue > 1e-3


def test_ewd_null_fpr_inside_binomial_interval(null_texts, logits) -> None:
    scheme = _scheme("ewd")
    p = np.array([scheme.detect(t, KEY, VOCAB, logits=logits[VOCAB]).p_value for t in null_texts])
    lo, hi = scipy.stats.binom.interval(0.95, N_NULL, ALPHA)
    assert lo <= int((p <= ALPHA).sum()) <= hi
    assert scipy.stats.kstest(p, "uniform").pvalue > 1e-3


@pytest.mark.parametrize("name", list(NAMES))
def test_prefix_p_values_match_detect_of_each_prefix(name: str, logits) -> None:
    scheme = _scheme(name)
    seq = np.random.default_rng(5).integers(0, VOCAB, 40)
    prefixes = scheme.prefix_p_values(seq, KEY, VOCAB, logits=logits[VOCAB])
    assert prefixes.shape == (40,)
    # a prefix's own forward pass gives its rows to float32 rounding, not bit for bit
    rows = logits[VOCAB].rows(seq)
    bound = float32_bound(np.abs(rows).max())
    if name == "sweet":  # counts: equal where no entropy lies within the drift of the filter
        drift = _entropy_drift(rows, bound)
        assert_clear_of(scheme.stats(seq, logits[VOCAB], VOCAB)[1:], scheme.entropy_threshold, 2 * drift, "entropies")
    for i in (0, 1, 7, 20, 39):
        det = scheme.detect(seq[: i + 1], KEY, VOCAB, logits=logits[VOCAB])
        if name == "sweet":
            assert prefixes[i] == det.p_value
            continue
        _, spike, green, first = scheme.inputs(seq[: i + 1], KEY, VOCAB, logits[VOCAB])
        k = scheme.prefix_length
        units = first[k:]
        z_drift = _ewd_z_drift(scheme._weights(spike, i + 1)[units], green[k:][units],
                               scheme.green_probability(VOCAB), det.z_score, 4 * bound)
        assert_within(prefixes[i], det.p_value, z_drift / np.sqrt(2 * np.pi), f"p of the prefix of {i + 1}")


def test_repeated_contexts_are_scored_once(logits) -> None:
    block = np.random.default_rng(3).integers(0, VOCAB, 15)
    seq = np.concatenate([block] * 4)
    for name in NAMES:
        det = _scheme(name).detect(seq, KEY, VOCAB, logits=logits[VOCAB])
        assert det.num_tokens_scored <= len(set(zip(block[:-1].tolist(), block[1:].tolist()))) + 1


# ------------------------------------------------------------------------------------------
# generation
# ------------------------------------------------------------------------------------------
def test_sweet_processor_biases_only_uncertain_rows() -> None:
    scheme = _scheme("sweet:delta=3")
    proc = scheme.logits_processor(KEY, 64, temperature=1.0, seed=0)
    scores = torch.zeros((2, 64))
    scores[1, 5] = 30.0  # a near-certain row: entropy ~0, below the threshold
    ids = torch.tensor([[1, 2], [1, 2]])
    out = proc(ids, scores.clone())
    green = torch.from_numpy(scheme.green_rows(ids.numpy(), KEY, 64))
    assert torch.equal(out[0], green[0].float() * 3.0)
    assert torch.equal(out[1], scores[1])
    ewd = _scheme("ewd:delta=3").logits_processor(KEY, 64, temperature=2.0, seed=0)
    out = ewd(ids, scores.clone())
    assert torch.equal(out[1], (scores[1] + green[1].float() * 3.0) / 2.0)


def test_native_green_lists_are_native_kgw_green_lists() -> None:
    """Same key, same gamma: SWEET's and EWD's native green tokens are kgw's."""
    kgw = parse_watermark("kgw:gamma=0.5,delta=2,repeats=count")
    assert kgw is not None
    seq = np.random.default_rng(9).integers(0, VOCAB, 60)
    green, _ = _scheme("ewd").green_units(seq, KEY, VOCAB)
    for end in (2, 10, 33, 60):
        det = kgw.detect(seq[:end], KEY, VOCAB)
        assert det.num_tokens_scored == end - 1 and det.num_green_tokens == int(green[:end].sum())
    # generation's green rows agree with detection's flags, position by position
    for t in (1, 10, 59):
        rows = _scheme("sweet").green_rows(seq[None, :t], KEY, VOCAB)
        assert bool(rows[0, seq[t]]) == bool(green[t])


def test_compat_generation_lists_are_the_detectors() -> None:
    """compat=markllm: the processor's green rows are the lists detection checks against."""
    key = str(DATA["configs"]["SWEET"]["hash_key"])
    seq = np.random.default_rng(4).integers(0, VOCAB, 40)
    for spec in ("sweet:compat=markllm", "ewd:compat=markllm,prefix_length=2"):
        scheme = _scheme(spec)
        green, _ = scheme.green_units(seq, key, VOCAB)
        for t in range(scheme.prefix_length, 40, 7):
            assert bool(scheme.green_rows(seq[None, :t], key, VOCAB)[0, seq[t]]) == bool(green[t])


def test_compat_contexts_sharing_a_green_list_are_one_unit() -> None:
    """torch keeps 32 seed bits: under a key divisible by 2**32 every context draws the same
    list, so the exact null may count one unit only."""
    seq = np.arange(1, 41)
    scheme = _scheme("sweet:compat=markllm")
    _, first = scheme.green_units(seq, str(2**32), VOCAB)
    assert int(first.sum()) == 1
    _, first = scheme.green_units(seq, "15485863", VOCAB)
    assert int(first.sum()) == 39


def test_ewd_markllm_score_of_an_unweighted_text_is_none(logits) -> None:
    det = _scheme("ewd:compat=markllm").detect([3, 4], "15485863", VOCAB, logits=logits[VOCAB])
    assert det.extra["markllm_score"] is None and det.extra["markllm_is_watermarked"] is False
    assert det.p_value == 1.0
    json.dumps(det.as_json(), allow_nan=False)


PROMPTS = ["Miss Bennet walked to the village.", "The letter arrived on a Tuesday, and",
           "Mr. Darcy said that", "It was a fine morning when"]


@pytest.mark.parametrize("name", list(NAMES))
def test_embedded_generation_is_detected_and_reproducible(name: str, provider, generate,
                                                         false_alarms_allowed) -> None:
    from evalrun.model.token_logits import ModelLogits

    first, again = (generate(name, KEY, PROMPTS, max_tokens=80, seed=11) for _ in range(2))
    assert [g.token_ids for g in first] == [g.token_ids for g in again]
    model = ModelLogits("embedded", provider)
    scheme = _scheme(name)
    detected = false_alarms = 0
    for gen in first:
        assert gen.error is None and len(gen.token_ids) >= 60
        vocab = gen.extra["vocab_size"]
        detected += scheme.detect(gen.token_ids, KEY, vocab, logits=model).p_value <= 0.02
        false_alarms += sum(scheme.detect(gen.token_ids, f"wrong key {i}", vocab, logits=model).p_value <= 0.02
                            for i in range(5))
    assert detected >= 3
    assert false_alarms <= false_alarms_allowed(5 * len(first), 0.02)  # 0.4 expected


# ------------------------------------------------------------------------------------------
# the model at detection, evalrun detect, specs
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(NAMES))
def test_detection_without_the_model_names_the_scheme(name: str) -> None:
    scheme = _scheme(name)
    assert scheme.needs_model
    with pytest.raises(ModelRequired, match=rf"--watermark {name}:.*needs the model.*--model SPEC"):
        scheme.detect([1, 2, 3, 4], KEY, VOCAB)
    with pytest.raises(ModelRequired):
        scheme.prefix_p_values([1, 2, 3, 4], KEY, VOCAB)


def test_logits_of_another_width_are_refused(logits) -> None:
    with pytest.raises(ModelRequired, match=r"logits of shape \(3, 1000\).*expected \(3, 2000\)"):
        _scheme("ewd").detect([1, 2, 3, 4], KEY, 2000, logits=logits[1000])


def test_detect_cli_reads_the_model_and_prints_markllm_score(tmp_path: Path, logits, monkeypatch) -> None:
    from evalrun.cli import detect as detect_module
    from evalrun.cli.detect import detect_main
    from evalrun.model import token_logits

    ids = [5, 17, 300, 2048, 9, 11, 4000, 7, 7, 8, 100, 101, 102, 4, 5, 6]
    path = tmp_path / "ids.jsonl"
    path.write_text(json.dumps({"id": "a", "token_ids": ids}) + "\n")
    for name in ("sweet", "ewd", "unbiased"):  # every scheme whose detector reads the model
        out, err = io.StringIO(), io.StringIO()
        assert detect_main(["--watermark", name, "--key", KEY, "--tokens", str(path), "--model", "embedded"],
                           out, err) == 0, err.getvalue()
        record = json.loads(out.getvalue())
        scheme = parse_watermark(name)
        assert scheme is not None
        want = scheme.detect(ids, KEY, 8192, logits=token_logits.model_logits(parse_model("embedded")))
        assert record["id"] == "a" and record["p_value"] == want.p_value  # vocab from the model: 8192
        assert KEY not in out.getvalue() + err.getvalue()
    # compat mode at V=1000 with the reference model stands in for --model
    case = DATA["vocab"]["1000"]["algorithms"]["EWD"][6]
    path.write_text(json.dumps({"token_ids": case["ids"]}) + "\n")
    monkeypatch.setitem(token_logits._LOADED, "reference-1000", logits[1000])
    monkeypatch.setattr(detect_module, "model_argument", lambda text: type("S", (), {"identity": lambda self: text})())
    out = io.StringIO()
    assert detect_main(["--watermark", "ewd:compat=markllm", "--key", "15485863", "--tokens", str(path),
                        "--model", "reference-1000"], out, err) == 0, err.getvalue()
    k = DATA["configs"]["EWD"]["prefix_length"]
    z_drift = _ewd_z_drift(case["detail"]["weights"][k:], case["detail"]["green_flags"][k:],
                           DATA["configs"]["EWD"]["gamma"], case["score"], 4 * logits[1000].bound(case))
    assert_within(json.loads(out.getvalue())["markllm_score"], case["score"], z_drift, "MarkLLM's weighted z")


def test_detect_cli_without_model_is_one_line(tmp_path: Path) -> None:
    from evalrun.cli.detect import detect_main

    path = tmp_path / "ids.jsonl"
    path.write_text(json.dumps({"token_ids": [1, 2, 3]}) + "\n")
    out, err = io.StringIO(), io.StringIO()
    assert detect_main(["--watermark", "ewd", "--key", KEY, "--tokens", str(path), "--vocab-size", "1000"],
                       out, err) == 2
    assert err.getvalue().count("\n") == 1 and "--model SPEC" in err.getvalue() and "ewd:" in err.getvalue()
    err = io.StringIO()  # a model whose logits kgw does not read: its tokenizer and width are still the defaults
    assert detect_main(["--watermark", "kgw", "--key", KEY, "--tokens", str(path), "--model", "embedded"],
                       out, err) == 0, err.getvalue()
    err = io.StringIO()  # an API model gives no logits: refused before any client is built
    assert detect_main(["--watermark", "sweet", "--key", KEY, "--tokens", str(path), "--model", "openai:gpt-4o"],
                       out, err) == 2
    assert err.getvalue().count("\n") == 1 and "--model openai:gpt-4o: gives no next-token logits" in err.getvalue()


@pytest.mark.parametrize("spec,param", [
    ("sweet:gamma=1.5", "gamma"), ("ewd:gamma=0", "gamma"), ("sweet:wat=1", "wat"),
    ("sweet:entropy_threshold=-1", "entropy_threshold"), ("ewd:prefix_length=0", "prefix_length"),
    ("ewd:delta=nan", "delta"), ("sweet:compat=marklm", "compat"), ("ewd:entropy_threshold=1", "entropy_threshold"),
])
def test_bad_specs_are_one_line_naming_the_parameter(spec: str, param: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_watermark(spec)
    message = str(info.value)
    assert "\n" not in message and param in message and spec.split(":")[0] in message


def test_compat_key_must_be_an_integer() -> None:
    with pytest.raises(EvalrunError, match="hash_key") as info:
        _scheme("sweet:compat=markllm").check_key("not-a-number")
    assert "not-a-number" not in str(info.value)
