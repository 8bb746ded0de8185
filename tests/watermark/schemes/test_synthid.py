"""SynthID-Text (``synthid``) against transformers' own classes, computed in the tests:
``SynthIDTextWatermarkLogitsProcessor`` (generation scores, ``compute_g_values``,
``compute_context_repetition_mask``, ``compute_eos_token_mask``) and
``SynthIDTextWatermarkDetector`` (the masks it combines), with google-deepmind/synthid-text's
mean and weighted-mean scores (``detector_mean.py``) written out below; then the nulls, the
hf provider on the embedded model, the vLLM adapter, ``evalrun detect`` and spec checks."""

from __future__ import annotations

import io
import json
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers.generation.logits_process import (  # noqa: E402
    SynthIDTextWatermarkLogitsProcessor as RefProcessor,
)
from transformers.generation.watermarking import SynthIDTextWatermarkDetector  # noqa: E402

from evalrun._util.errors import SpecError  # noqa: E402
from evalrun.testing.portable_inputs import uniform_scores  # noqa: E402
from evalrun.watermark.registry import parse_watermark  # noqa: E402
from evalrun.watermark.schemes.synthid import (  # noqa: E402
    SynthID,
    lattice_weights,
    sampling_table,
    weighted_tail_exact,
)

#: transformers' example keys (9 layers)
KEYS9 = [654, 400, 836, 123, 340, 443, 597, 160, 57]
KEY9 = ",".join(map(str, KEYS9))
CPU = torch.device("cpu")

#: (ngram_len, keys, vocab, context_history_size, skip_first_ngram_calls, table size, seed)
CONFIGS = [
    (5, KEYS9, 40, 1024, False, 2**16, 0),
    (2, [1, 2, 3], 5, 4, False, 2**16, 0),  # tiny vocabulary: contexts repeat all the time
    (3, [-5, 2**62, 7, 8], 7, 3, True, 1000, 77),  # signed mod of a non power of two table
    (4, [11], 300, 0, True, 2**10, 2**40 + 3),  # no history: nothing is ever repeated
]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The tensors here are small: on a loaded two-core machine torch's intra-op threads only
    wait for each other (measured: 20 s instead of 0.7 s for the sampled generation test)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _spec(ngram_len, history, skip, size, seed, extra="") -> str:
    return (f"synthid:ngram_len={ngram_len},context_history_size={history},"
            f"skip_first_ngram_calls={str(skip).lower()},sampling_table_size={size},"
            f"sampling_table_seed={seed}{extra}")


def _reference(ngram_len, keys, history, skip, size, seed) -> RefProcessor:
    return RefProcessor(ngram_len=ngram_len, keys=keys, sampling_table_size=size,
                        sampling_table_seed=seed, context_history_size=history, device=CPU,
                        skip_first_ngram_calls=skip)


def _deepmind_scores(g: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """detector_mean.py's mean_score and weighted_mean_score (default weights), numpy."""
    g = g.astype(np.float64)
    mask = mask.astype(np.float64)
    depth = g.shape[-1]
    count = np.where(mask.sum(axis=1) > 0, mask.sum(axis=1), np.nan)  # no scored n-gram: nan
    mean = (g * mask[:, :, None]).sum(axis=(1, 2)) / (depth * count)
    w = np.linspace(10, 1, depth)
    w = w * (depth / w.sum())
    weighted = (g * w[None, None, :] * mask[:, :, None]).sum(axis=(1, 2)) / (depth * count)
    return mean, weighted


# ------------------------------------------------------------------------------------------
# generation: scores equal to transformers' processor
# ------------------------------------------------------------------------------------------
def test_sampling_table_is_torch_randint() -> None:
    for size, seed in [(2**16, 0), (1000, 77), (17, 2**40 + 3), (64, -3)]:
        want = torch.randint(0, 2, (size,), generator=torch.Generator().manual_seed(seed))
        assert np.array_equal(sampling_table(size, seed), want.numpy())


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"n{c[0]}-d{len(c[1])}-v{c[2]}")
@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_processor_scores_equal_transformers_bit_for_bit(config, temperature, dtype) -> None:
    """Same ids and logits each step: our scores are torch.equal to the reference's applied to
    the temperature-scaled logits (transformers runs its watermark after the temperature
    warper; greedy decoding has no warper). Repeated contexts, skipped first calls and
    watermarked rows all occur."""
    ngram_len, keys, vocab, history, skip, size, seed = config
    gen = torch.Generator().manual_seed(len(keys) + vocab)
    ref = _reference(ngram_len, keys, history, skip, size, seed)
    ours = parse_watermark(_spec(ngram_len, history, skip, size, seed)).logits_processor(
        ",".join(map(str, keys)), vocab, temperature=temperature, seed=0)
    ids = torch.randint(0, vocab, (3, 4), generator=gen)
    changed = unchanged = 0
    for _ in range(30):
        logits = (torch.randn(3, vocab, generator=gen) * 3).to(dtype)
        want = ref(ids, logits / temperature if temperature else logits)
        got = ours(ids, logits.clone())
        assert got.dtype == dtype and torch.equal(got, want)
        scaled = logits / temperature if temperature else logits
        same = (got == scaled).all(dim=1)
        changed += int((~same).sum())
        unchanged += int(same.sum())
        ids = torch.cat([ids, torch.randint(0, vocab, (3, 1), generator=gen)], dim=1)
    assert changed > 0
    if vocab <= 7 or skip:  # repeated contexts or skipped first calls
        assert unchanged > 0


def test_processor_state_follows_the_ids_not_the_calls() -> None:
    """Calling twice at one step (vLLM re-runs processors on partial prefills), skipping
    calls, or rewinding gives the scores of one call per step."""
    vocab, spec = 6, _spec(2, 8, False, 2**16, 0)
    gen = torch.Generator().manual_seed(5)
    ids = torch.randint(0, vocab, (1, 40), generator=gen)
    logits = [torch.randn(1, vocab, generator=gen) for _ in range(37)]
    ref = _reference(2, [3, 9], 8, False, 2**16, 0)
    want = [ref(ids[:, :3 + k], logits[k]) for k in range(37)]
    twice = parse_watermark(spec).logits_processor("3,9", vocab, temperature=1.0, seed=0)
    sparse = parse_watermark(spec).logits_processor("3,9", vocab, temperature=1.0, seed=0)
    for k in range(37):
        twice(ids[:, :3 + k], logits[k])
        assert torch.equal(twice(ids[:, :3 + k], logits[k]), want[k])
        if k == 0 or k % 3 == 2:
            assert torch.equal(sparse(ids[:, :3 + k], logits[k]), want[k])
    # a different continuation after a rewind is scored from its own history
    other = ids.clone()
    other[0, 10:] = (other[0, 10:] + 1) % vocab
    ref2 = _reference(2, [3, 9], 8, False, 2**16, 0)
    want2 = [ref2(other[:, :3 + k], logits[k]) for k in range(37)]
    for k in (5, 20, 36):
        assert torch.equal(twice(other[:, :3 + k], logits[k]), want2[k])
    with pytest.raises(ValueError, match="row"):
        twice(torch.cat([ids, ids])[:, :10], torch.cat([logits[0], logits[0]]))
    with pytest.raises(ValueError, match="prompt"):
        twice(ids[:, :2], logits[0])


def test_numpy_scores_and_bad_temperature() -> None:
    proc = parse_watermark("synthid").logits_processor(KEY9, 50, temperature=1.0, seed=0)
    ref = _reference(5, KEYS9, 1024, False, 2**16, 0)
    ids = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(1))
    logits = torch.randn(2, 50, generator=torch.Generator().manual_seed(2))
    got = proc(ids.numpy(), logits.numpy().copy())
    assert isinstance(got, np.ndarray) and np.array_equal(got, ref(ids, logits).numpy())
    with pytest.raises(ValueError, match="temperature"):
        parse_watermark("synthid").logits_processor(KEY9, 50, temperature=-1.0, seed=0)


# ------------------------------------------------------------------------------------------
# detection: g-values, masks and scores equal to the reference
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"n{c[0]}-d{len(c[1])}-v{c[2]}")
def test_detection_scores_equal_the_reference(config) -> None:
    ngram_len, keys, vocab, history, skip, size, seed = config
    ref = _reference(ngram_len, keys, history, skip, size, seed)
    ids = torch.randint(0, vocab, (6, 70), generator=torch.Generator().manual_seed(vocab))
    g = ref.compute_g_values(ids).numpy()
    mask = ref.compute_context_repetition_mask(ids).numpy()
    mean, weighted = _deepmind_scores(g, mask)
    key = ",".join(map(str, keys))
    for score, want in (("mean", mean), ("weighted_mean", weighted)):
        scheme = parse_watermark(_spec(ngram_len, history, skip, size, seed, f",score={score}"))
        for b in range(len(ids)):
            ours_g, ours_mask = scheme.g_values_and_mask(ids[b].tolist(), key, vocab)
            assert np.array_equal(ours_g, g[b]) and np.array_equal(ours_mask, mask[b])
            det = scheme.detect(ids[b].tolist(), key, vocab)
            assert det.num_tokens_scored == int(mask[b].sum())
            if det.num_tokens_scored:
                assert abs(det.score - want[b]) <= 1e-9
                assert abs(det.extra["mean_score"] - mean[b]) <= 1e-9
                assert abs(det.extra["weighted_mean_score"] - weighted[b]) <= 1e-9
            else:
                assert det.score == 0.0 and det.p_value == 1.0
    if vocab <= 7:  # the small vocabularies exercise the repetition mask
        assert not mask.all()


def test_eos_mask_is_the_reference_detectors() -> None:
    """``eos_token_id``: the masks SynthIDTextWatermarkDetector combines before its Bayesian
    module (a stand-in module hands them back)."""
    ref = _reference(3, [5, 6, 7], 16, False, 2**16, 0)
    detector = SynthIDTextWatermarkDetector(lambda g, m: (g, m), ref,
                                            types.SimpleNamespace(eos_token_id=2))
    ids = torch.randint(0, 9, (8, 40), generator=torch.Generator().manual_seed(4))
    ids[3, 3:] = 2
    ids[4, 0] = 2
    g, combined = detector(ids)
    scheme = parse_watermark("synthid:ngram_len=3,context_history_size=16,eos_token_id=2")
    mean, _ = _deepmind_scores(g.numpy(), combined.numpy())
    for b in range(len(ids)):
        ours_g, ours_mask = scheme.g_values_and_mask(ids[b].tolist(), "5,6,7", 9)
        assert np.array_equal(ours_g, g[b].numpy())
        assert np.array_equal(ours_mask, combined[b].numpy().astype(bool))
        det = scheme.detect(ids[b].tolist(), "5,6,7", 9)
        if det.num_tokens_scored:
            assert abs(det.score - mean[b]) <= 1e-9
    assert combined[3].sum() == 1 and combined[4].sum() == 0  # n-grams ending before the EOS


def test_prefix_p_values_match_detect_and_short_texts() -> None:
    ids = np.random.default_rng(2).integers(0, 30, 60)
    for score in ("mean", "weighted_mean"):
        scheme = parse_watermark(f"synthid:ngram_len=3,score={score}")
        prefix = scheme.prefix_p_values(ids, KEY9, 30)
        want = [scheme.detect(ids[: i + 1], KEY9, 30).p_value for i in range(len(ids))]
        assert prefix.shape == (60,) and np.allclose(prefix, want, rtol=1e-12, atol=0)
        assert (prefix[:2] == 1.0).all()
        assert scheme.prefix_p_values([], KEY9, 30).shape == (0,)
        short = scheme.detect([1, 2], KEY9, 30)
        assert (short.num_tokens_scored, short.p_value, short.score) == (0, 1.0, 0.0)
    with pytest.raises(ValueError, match="token ids"):
        scheme.detect([1, 30], KEY9, 30)


# ------------------------------------------------------------------------------------------
# nulls
# ------------------------------------------------------------------------------------------
def test_mean_null_is_the_binomial_and_p_values_are_uniform() -> None:
    """Unwatermarked random ids: each detection's p-value is the Binomial(n*depth, q) tail of
    its count of ones, and the randomised p-values (uniform exactly when that null holds)
    pass a KS test over 200 sequences, for one, three and nine layers."""
    rng = np.random.default_rng(20240611)
    for keys in ("77", "5,6,7", KEY9):
        scheme = parse_watermark("synthid:score=mean")
        depth, q = len(keys.split(",")), scheme.null_q
        randomised = []
        for _ in range(200):
            ids = rng.integers(0, 8192, 64)
            det = scheme.detect(ids, keys, 8192)
            n = det.num_tokens_scored
            ones = round(det.score * n * depth)
            assert n == 60 and det.p_value == pytest.approx(
                scipy.stats.binom.sf(ones - 1, n * depth, q), rel=1e-9)
            randomised.append(scipy.stats.binom.sf(ones, n * depth, q)
                              + rng.random() * scipy.stats.binom.pmf(ones, n * depth, q))
        assert scipy.stats.kstest(randomised, "uniform").pvalue > 0.01, keys


def test_weighted_mean_p_values_are_uniform_on_random_ids() -> None:
    rng = np.random.default_rng(7)
    scheme = parse_watermark("synthid:score=weighted_mean")
    p = [scheme.detect(rng.integers(0, 8192, 64), KEY9, 8192).p_value for _ in range(200)]
    assert scipy.stats.kstest(p, "uniform").pvalue > 0.01
    assert scheme.detect(rng.integers(0, 8192, 64), KEY9, 8192).extra["null"] == "normal"


def test_weighted_tail_exact_is_the_enumerated_distribution() -> None:
    q, depth, n = 0.4, 3, 2
    a = lattice_weights(depth)
    assert a.tolist() == [20, 11, 2]
    bits = np.array(np.meshgrid(*[[0, 1]] * (depth * n))).reshape(depth * n, -1).T
    totals = (bits.reshape(-1, n, depth) @ a).sum(axis=1)
    probs = np.prod(np.where(bits == 1, q, 1 - q), axis=1)
    t = np.arange(0, 70)
    want = [(probs * (totals >= x)).sum() for x in t]
    assert np.allclose(weighted_tail_exact(n, depth, q, t), want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("depth,n,at_002", [(3, 60, 0.01), (9, 20, 0.01), (30, 5, 0.01),
                                            (2, 40, 0.025)])
def test_weighted_mean_normal_tail_accuracy(depth: int, n: int, at_002: float) -> None:
    """The bounds the module docstring states: the normal tail against the exact lattice
    tail, at p = 0.02 and (conservative) at p <= 1e-3."""
    scheme = SynthID(score="weighted_mean")
    a = lattice_weights(depth)
    t = np.arange(n * int(a.sum()) + 1)
    exact = weighted_tail_exact(n, depth, scheme.null_q, t)
    normal = scheme._p_values(np.full(len(t), n), np.zeros(len(t)), t.astype(float), depth)
    for target in (0.02, 1e-3, 1e-4, 1e-6):
        i = int(np.flatnonzero(exact <= target)[0])
        ratio = normal[i] / exact[i]
        if target == 0.02:
            assert abs(ratio - 1) <= at_002, ratio
        else:
            assert 1.0 <= ratio <= 10.0, (target, ratio)


# ------------------------------------------------------------------------------------------
# through the hf provider (embedded model) and the vLLM adapter
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def provider():
    from evalrun.model.embedded import embedded_model_path
    from evalrun.plugins.providers.hf import HFProvider

    return HFProvider(str(embedded_model_path()), spec="embedded", batch_size=4)


def _request(i: int, *, spec: str, key: str | None, temperature: float, max_tokens: int):
    from evalrun.model.generation import GenerationRequest, GenParams, Prompt

    return GenerationRequest(
        gen_key=f"s{i}", pack="unit", case={"id": f"c{i}"},
        prompt=Prompt(None, f"It was a truth universally acknowledged, said Emma {i}."),
        params=GenParams(temperature=temperature, max_tokens=max_tokens, seed=11),
        repetition=0, watermark=spec, key=key)


def _generate(provider, reqs) -> dict:
    got: dict = {}
    provider.generate(reqs, lambda r, g: got.__setitem__(r.gen_key, g))
    return got


def test_hf_provider_gives_each_row_its_own_processor(provider) -> None:
    from evalrun.plugins.providers.hf import shared_context

    assert shared_context(parse_watermark("synthid")) is None
    reqs = [_request(i, spec="synthid", key=KEY9, temperature=1.0, max_tokens=4)
            for i in range(3)]
    groups = provider._groups(reqs, [provider._encode(r.prompt) for r in reqs])
    assert [g.rows for g in groups] == [[0], [1], [2]] and not any(g.shared for g in groups)
    assert len({id(g.processor) for g in groups}) == 3


def test_hf_greedy_generation_equals_transformers_generate(provider) -> None:
    """Greedy decoding through our provider gives the tokens of ``model.generate`` with
    transformers' ``SynthIDTextWatermarkingConfig`` (which changes them)."""
    req = _request(0, spec="synthid", key=KEY9, temperature=0.0, max_tokens=24)
    ours = _generate(provider, [req])["s0"].token_ids
    prompt = torch.tensor([provider._encode(req.prompt)])
    config = transformers.SynthIDTextWatermarkingConfig(keys=KEYS9, ngram_len=5)
    kwargs = dict(attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=24)
    with torch.inference_mode():
        ref = provider.model.generate(prompt, watermarking_config=config, **kwargs)
        plain = provider.model.generate(prompt, **kwargs)
    assert ours == ref[0, prompt.shape[1]:].tolist()
    assert ours != plain[0, prompt.shape[1]:].tolist()


def test_hf_sampled_generation_is_detected_with_its_keys_only(provider, false_alarms_allowed) -> None:
    other = "1,2,3,4,5,6,7,8,9"
    marked = _generate(provider, [_request(i, spec="synthid", key=KEY9, temperature=1.0,
                                           max_tokens=64) for i in range(3)])
    plain = _generate(provider, [_request(i, spec="none", key=None, temperature=1.0,
                                          max_tokens=64) for i in range(3)])
    for score in ("mean", "weighted_mean"):
        scheme = parse_watermark(f"synthid:score={score}")
        alarms = []
        for gen in marked.values():
            assert gen.error is None and len(gen.token_ids) >= 40
            vocab = gen.extra["vocab_size"]
            assert scheme.detect(gen.token_ids, KEY9, vocab).p_value < 1e-4
            alarms.append(scheme.detect(gen.token_ids, other, vocab).p_value <= 1e-3)
        alarms += [scheme.detect(gen.token_ids, KEY9, gen.extra["vocab_size"]).p_value <= 1e-3
                   for gen in plain.values()]
        assert sum(alarms) <= false_alarms_allowed(len(alarms), 1e-3), (score, alarms)


@dataclass
class _Update:  # stands in for vllm's BatchUpdate
    batch_size: int
    removed: list = field(default_factory=list)
    added: list = field(default_factory=list)
    moved: list = field(default_factory=list)


def test_vllm_adapter_runs_one_processor_per_request() -> None:
    """Two synthid requests in vLLM's persistent batch: each row gets its own processor's
    scores, equal to a transformers processor fed that request alone, across a swap, a
    repeated apply (partial prefill) and a preemption that re-adds a request."""
    from evalrun.plugins.providers.vllm_watermark import (
        EvalrunWatermarkLogitsProcessor,
        vllm_temperature,
        watermark_extra_args,
    )

    vocab, spec = 12, "synthid:ngram_len=2,context_history_size=6"
    config = types.SimpleNamespace(model_config=types.SimpleNamespace(get_vocab_size=lambda: vocab))
    adapter = EvalrunWatermarkLogitsProcessor(config, CPU, False)

    def params(seed: int) -> Any:
        return types.SimpleNamespace(temperature=vllm_temperature(0.8),
                                     extra_args=watermark_extra_args(spec, "4,5,6", 0.8, seed))

    p_a, p_b = params(1), params(2)
    prompts, outputs = {"a": [1, 2, 3], "b": [4, 5]}, {"a": [], "b": []}
    refs = {r: _reference(2, [4, 5, 6], 6, False, 2**16, 0) for r in "ab"}
    adapter.update_state(_Update(2, added=[(0, p_a, prompts["a"], outputs["a"]),
                                           (1, p_b, prompts["b"], outputs["b"])]))
    where = {"a": 0, "b": 1}
    gen = torch.Generator().manual_seed(9)
    for step in range(24):
        logits = torch.randn(2, vocab, generator=gen)
        if step == 3:  # a partial-prefill style second pass over the same rows
            adapter.apply(logits.clone())
        got = adapter.apply(logits.clone())
        for r, row in where.items():
            context = torch.tensor([prompts[r] + outputs[r]])
            want = refs[r](context, logits[row:row + 1] / 0.8)
            assert torch.equal(got[row], want[0]), (step, r)
            outputs[r].append(int(torch.argmax(got[row])) if step % 2 else (step * 5 + row) % vocab)
        if step == 8:
            adapter.update_state(_Update(2, moved=[(0, 1, types.SimpleNamespace(name="SWAP"))]))
            where = {"a": 1, "b": 0}
        if step == 15:  # preempted, then resumed with its output so far
            adapter.update_state(_Update(1, removed=[1]))
            adapter.update_state(_Update(2, added=[(1, p_a, prompts["a"], outputs["a"])]))


# ------------------------------------------------------------------------------------------
# evalrun detect, specs and keys
# ------------------------------------------------------------------------------------------
def test_evalrun_detect_prints_score_and_p_value(tmp_path: Path) -> None:
    from evalrun.cli.detect import detect_main

    vocab = 64
    proc = parse_watermark("synthid").logits_processor("11,22,33", vocab, temperature=1.0,
                                                       seed=0)
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(0, vocab, (1, 3), generator=gen)
    for _ in range(150):
        scores = proc(ids, uniform_scores((1, vocab), gen))  # the same draws on any CPU
        ids = torch.cat([ids, torch.multinomial(torch.softmax(scores, -1), 1, generator=gen)], 1)
    plain = np.random.default_rng(1).integers(0, vocab, 150).tolist()
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "wm", "token_ids": ids[0, 3:].tolist()}) + "\n"
                    + json.dumps({"token_ids": plain}) + "\n")
    out, err = io.StringIO(), io.StringIO()
    rc = detect_main(["--watermark", "synthid:score=mean", "--key", "11,22,33", "--tokens",
                      str(path), "--vocab-size", str(vocab)], stdout=out, stderr=err)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    # SynthID's keys are short integer lists: guessable, and said so in the one line on stderr
    assert rc == 0 and err.getvalue().startswith("evalrun: warning: the watermark key (--key) is easy to guess")
    assert err.getvalue().count("\n") == 1 and "11,22,33" not in err.getvalue()
    assert rows[0]["id"] == "wm" and rows[0]["p_value"] < 1e-6 and rows[0]["score"] > 0.55
    assert rows[1]["p_value"] > 1e-3
    assert {"num_tokens_scored", "score", "p_value"} <= set(rows[0])
    assert "11,22,33" not in out.getvalue()
    out, err = io.StringIO(), io.StringIO()
    rc = detect_main(["--watermark", "synthid", "--key", "11,x9x,33", "--tokens", str(path),
                      "--vocab-size", str(vocab)], stdout=out, stderr=err)
    assert rc == 2 and "--key" in err.getvalue() and "x9x" not in err.getvalue()


def test_defaults_and_canonical_spec() -> None:
    s = parse_watermark("synthid")
    assert isinstance(s, SynthID)
    assert (s.ngram_len, s.sampling_table_size, s.sampling_table_seed, s.context_history_size,
            s.skip_first_ngram_calls, s.depth, s.score) == (5, 2**16, 0, 1024, False, None, "mean")
    assert str(s.spec) == ("synthid:context_history_size=1024,ngram_len=5,sampling_table_seed=0,"
                           "sampling_table_size=65536,score=mean,skip_first_ngram_calls=false")
    full = parse_watermark("synthid:depth=9,score=weighted_mean,skip_first_ngram_calls=1,"
                           "eos_token_id=1")
    assert parse_watermark(str(full.spec)).spec == full.spec
    assert (full.depth, full.eos_token_id, full.skip_first_ngram_calls) == (9, 1, True)


@pytest.mark.parametrize("text,key", [
    ("synthid:score=median", "score"), ("synthid:ngram_len=1", "ngram_len"),
    ("synthid:ngram_len=x", "ngram_len"), ("synthid:sampling_table_size=16777217",
                                           "sampling_table_size"),
    ("synthid:context_history_size=-1", "context_history_size"), ("synthid:depth=0", "depth"),
    ("synthid:skip_first_ngram_calls=maybe", "skip_first_ngram_calls"),
    ("synthid:keys=1", "keys"), ("synthid:eos_token_id=-2", "eos_token_id"),
])
def test_bad_specs_name_the_key(text: str, key: str) -> None:
    with pytest.raises(SpecError, match=key):
        parse_watermark(text)


@pytest.mark.parametrize("key,why", [
    ("", "non-empty"), ("  ", "integer keys"), ("1,,2", "item 2"), ("7,secret9,8", "item 2"),
    ("1.5", "item 1"), ("1_000", "item 1"), ("3,9223372036854775808", "int64"), ("4,5,4", "item 3 gives the same g-values layer as item 1 (equal keys)"),
    ("4,5,65540", "modulo sampling_table_size=65536"),
])
def test_bad_keys_name_key_and_never_echo_it(key: str, why: str) -> None:
    scheme = parse_watermark("synthid")
    with pytest.raises(SpecError, match="--key") as info:
        scheme.check_key(key)
    assert why in str(info.value)
    for part in key.split(","):
        if len(part.strip()) > 2:
            assert part.strip() not in str(info.value)
    with pytest.raises(SpecError, match="--key"):
        scheme.detect([1, 2, 3, 4, 5], key, 10)
    with pytest.raises(SpecError, match="--key"):
        scheme.logits_processor(key, 10, temperature=1.0, seed=0)


def test_depth_must_match_the_key_count() -> None:
    scheme = parse_watermark("synthid:depth=3")
    scheme.check_key("1,2,3")
    with pytest.raises(SpecError, match="depth=3") as info:
        scheme.check_key("1001,2002")
    assert "1001" not in str(info.value)
    assert parse_watermark("synthid").detect(list(range(10)), " -1, 2 ,3", 10).extra["depth"] == 3
