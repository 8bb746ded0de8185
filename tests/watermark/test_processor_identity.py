"""Today's logits processors against verbatim copies of the processors before the vocabulary
kernels (``pinned_processors.py``): same inputs, same tokens and same processed scores, bit
for bit, at a small vocabulary and at Llama 3's (128,256), over several decoding steps (so
that seed memos, tables, histories and the processors' own state are exercised as in a
provider's loop), with and without the compiled kernel of :mod:`evalrun.kernels.vocab_rows`.

The inputs are the worst cases the fast paths must survive besides ordinary logits: nearly
flat rows (a random model's, where the keyed noise decides), peaked rows (a trained model's,
where the logits do), rows with -inf entries, padded score widths, temperatures other than 1,
and rows whose histories are too short to be watermarked.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from evalrun.kernels import vocab_rows  # noqa: E402
from evalrun.watermark.registry import parse_watermark  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import pinned_processors as pinned  # noqa: E402

KEY = "identity-key"
SYNTHID_KEYS = "654,400,836,123,340,443,597,160,57,29"
LARGE_V = 128_256


def _bits(x: Any) -> np.ndarray:
    """The bytes of an output (torch or numpy; floats compared bit for bit, -0.0 and NaN
    payloads included)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().contiguous().numpy()
    a = np.ascontiguousarray(np.asarray(x))
    return a.view(np.uint8)


def _float64_scores(rng: np.random.Generator, batch: int, vocab: int) -> Any:
    """float64 ``peaked`` scores with each row's largest at 0: the row's logsumexp is then
    the log of its sum of exps, near 1, whose last bits show how the sum was ordered
    (rounded to float32, or shifted by a large maximum, they would hardly ever show)."""
    x = _scores(rng, batch, vocab, vocab, "peaked").double() * (1.0 + 1e-9)
    return x - x.max(dim=1, keepdim=True).values


def _scores(rng: np.random.Generator, batch: int, width: int, vocab: int, kind: str) -> Any:
    """float32 scores [batch, width]: ``flat`` (a random model's), ``peaked`` (a trained one's:
    a few tokens far above the rest), ``masked`` (peaked, with -inf entries and a row of
    ties)."""
    x = rng.normal(size=(batch, width)).astype(np.float32)
    if kind == "flat":
        x *= np.float32(0.05)
    else:
        x *= np.float32(3.0)
        top = rng.integers(0, min(vocab, width), size=(batch, 5))
        np.put_along_axis(x, top, np.float32(25.0) + rng.random((batch, 5)).astype(np.float32), axis=1)
    if kind == "masked":
        x[:, rng.integers(0, min(vocab, width), size=vocab // 3)] = -np.inf
        x[0, :] = np.float32(1.5)  # every token tied
    if width > vocab:
        x[:, vocab:] = np.float32(-7.0)
    return torch.from_numpy(x)


def _run(spec: str, key: str, pinned_class: type, vocab: int, *, width: int | None = None,
         batch: int = 3, steps: int = 3, kind: str = "flat", temperature: float = 1.0,
         prompt: int = 6, call: str = "call") -> None:
    """Decode ``steps`` steps with today's processor and the pinned one side by side, asserting
    the same output at every step; the tokens fed back are the old processor's choice (or
    random ids where it only reshapes scores)."""
    width = width or vocab
    scheme = parse_watermark(spec)
    new = scheme.logits_processor(key, vocab, temperature=temperature, seed=7)
    old = scheme.logits_processor(key, vocab, temperature=temperature, seed=7)
    assert isinstance(old, pinned_class.__mro__[1])
    old.__class__ = pinned_class
    rng = np.random.default_rng(abs(hash((spec, vocab, width, kind, temperature, call))) % 2**32)
    ids = torch.from_numpy(rng.integers(0, vocab, size=(batch, prompt)))
    for _ in range(steps):
        scores = _scores(rng, batch, width, vocab, kind)
        if call == "onehot":  # today's choose against the pinned one-hot scores' token
            got_scores, got_tokens = new.choose(ids.clone(), scores.clone(), reuse=True)
            want = old(ids.clone(), scores.clone())
            if temperature == 0:
                assert got_tokens is None and np.array_equal(_bits(got_scores), _bits(want))
                picked = want.argmax(dim=-1).numpy()
            else:
                assert got_scores is None
                picked = want.argmax(dim=-1).numpy()
                assert np.array_equal(got_tokens, picked)
                assert bool((want[np.arange(batch), picked] == 0).all())
                assert bool(torch.isinf(want).sum(dim=-1).eq(width - 1).all())
        elif call == "choose":
            got_scores, got_tokens = new.choose(ids.clone(), scores.clone(), reuse=True)
            want_scores, want_tokens = old.choose(ids.clone(), scores.clone(), reuse=True)
            assert (got_tokens is None) == (want_tokens is None)
            if want_tokens is not None:
                assert np.array_equal(got_tokens, want_tokens), (got_tokens, want_tokens)
            assert (got_scores is None) == (want_scores is None)
            if want_scores is not None:
                assert np.array_equal(_bits(got_scores), _bits(want_scores))
            picked = want_tokens
        else:
            try:
                got = new(ids.clone(), scores.clone())
            except ValueError as exc:  # then the old processor refused these inputs too
                with pytest.raises(ValueError, match=str(exc)):
                    old(ids.clone(), scores.clone())
                return
            want = old(ids.clone(), scores.clone())
            assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(_bits(got), _bits(want)), spec
            picked = want.argmax(dim=-1).numpy()
        if picked is None or (np.asarray(picked) < 0).any():
            picked = rng.integers(0, vocab, size=batch)
        ids = torch.cat([ids, torch.as_tensor(np.asarray(picked) % vocab).reshape(-1, 1)], dim=1)


KERNEL = [pytest.param(True, id="kernel"), pytest.param(False, id="numpy")]


@pytest.fixture(params=KERNEL)
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Runs a test with the compiled vocabulary kernel and again with its numpy twins (the
    paths an install without a C compiler takes)."""
    if request.param and not vocab_rows.compiled_available():
        pytest.skip("the compiled vocabulary kernel was not built with this install")
    if not request.param:
        monkeypatch.setattr(vocab_rows, "_compiled", None)
    return bool(request.param)


NATIVE = ["kgw", "kgw:context=2,gamma=0.5,delta=1.5,skip=0.2", "kgw:randomness=minhash,context=3",
          "exp", "exp:context=2,skip=0.3", "its", "its:context=3", "binary", "binary:context=2"]


@pytest.mark.parametrize("spec", NATIVE)
@pytest.mark.parametrize("kind", ["flat", "peaked", "masked"])
def test_native_samplers_small_vocab(spec: str, kind: str, kernel: bool) -> None:
    for call in ("choose", "call"):
        for temperature in (1.0, 0.7):
            _run(spec, KEY, pinned.PinnedWatermarkProcessor, 1000, kind=kind, call=call,
                 temperature=temperature)
    _run(spec, KEY, pinned.PinnedWatermarkProcessor, 1000, width=1003, kind=kind, call="choose")


@pytest.mark.parametrize("spec", ["kgw", "kgw:gamma=0.5,skip=0.2", "exp", "its", "binary"])
def test_native_samplers_llama3_vocab(spec: str, kernel: bool) -> None:
    for kind in ("flat", "peaked"):
        _run(spec, KEY, pinned.PinnedWatermarkProcessor, LARGE_V, batch=4, steps=2, kind=kind,
             call="choose", temperature=0.8 if kind == "peaked" else 1.0)


def test_greedy_green_list_is_unchanged(kernel: bool) -> None:
    _run("kgw", KEY, pinned.PinnedWatermarkProcessor, 1000, temperature=0.0, call="choose")


CHOOSERS = [("pf", KEY, pinned.PinnedPermuteFlip), ("pf:ngram=2", KEY, pinned.PinnedPermuteFlip),
            ("pf:compat=markllm,ngram=3", "12345", pinned.PinnedPermuteFlip),
            ("exp_gumbel", KEY, pinned.PinnedExpGumbel),
            ("exp_gumbel:prefix_length=3,temperature=1.3", KEY, pinned.PinnedExpGumbel)]


@pytest.mark.parametrize(("spec", "key", "cls"), CHOOSERS)
@pytest.mark.parametrize("kind", ["flat", "peaked", "masked"])
def test_choosers_small_vocab(spec: str, key: str, cls: type, kind: str, kernel: bool) -> None:
    for temperature in (1.0, 0.7):
        for prompt in (1, 6):
            for call in ("call", "onehot"):
                _run(spec, key, cls, 1000, kind=kind, temperature=temperature, prompt=prompt,
                     call=call)
    _run(spec, key, cls, 1000, width=1011, kind=kind)
    _run(spec, key, cls, 1000, width=1011, kind=kind, call="onehot")
    if spec.startswith("pf"):
        _run(spec, key, cls, 1000, kind=kind, temperature=0.0, call="onehot")


@pytest.mark.parametrize(("spec", "key", "cls"), [c for c in CHOOSERS if "markllm" not in c[0]])
def test_choosers_llama3_vocab(spec: str, key: str, cls: type, kernel: bool) -> None:
    for kind in ("flat", "peaked"):
        _run(spec, key, cls, LARGE_V, batch=4, steps=2, kind=kind,
             call="onehot" if kind == "flat" else "call")


# ---- through the hf provider ---------------------------------------------------------------
PINNED_CLASS = {"WatermarkProcessor": pinned.PinnedWatermarkProcessor,
                "DiPmarkLogitsProcessor": pinned.PinnedDiPmark,
                "PermuteFlipLogitsProcessor": pinned.PinnedPermuteFlip,
                "ExpGumbelLogitsProcessor": pinned.PinnedExpGumbel,
                "MorphMarkLogitsProcessor": pinned.PinnedMorphMark,
                "GreenBiasProcessor": pinned.PinnedGreenBias,
                "WaterfallLogitsProcessor": pinned.PinnedWaterfall,
                "SynthIDLogitsProcessor": pinned.PinnedSynthID,
                "KGWCompatLogitsProcessor": pinned.PinnedKGWCompat}
PROVIDER_SPECS = [("kgw:context=2", KEY), ("exp", KEY), ("its", KEY), ("binary", KEY),
                  ("pf:ngram=2", KEY), ("exp_gumbel", KEY), ("dipmark", KEY), ("unbiased", KEY),
                  ("morphmark", KEY), ("sweet", KEY), ("ewd", KEY), ("waterfall", "42"),
                  ("synthid", SYNTHID_KEYS), ("kgw:seeding=lefthash,context=2", "15485863")]


@pytest.fixture(scope="module")
def provider() -> Any:
    from evalrun.model.embedded import embedded_model_path
    from evalrun.plugins.providers.hf import HFProvider

    return HFProvider(str(embedded_model_path()), spec="embedded", batch_size=4)


def _generate(provider: Any, spec: str, key: str, temperature: float) -> list[list[int]]:
    from evalrun.model.generation import GenerationRequest, GenParams, Prompt

    reqs = [GenerationRequest(
        gen_key=f"g{i}", pack="unit", case={"id": f"c{i}"},
        prompt=Prompt(None, f"Miss Bennet walked to the village, number {i}."),
        params=GenParams(temperature=temperature, max_tokens=12, seed=5), repetition=0,
        watermark=spec, key=key) for i in range(4)]
    got: dict[str, list[int]] = {}
    provider.generate(reqs, lambda req, gen: got.__setitem__(req.gen_key, gen.token_ids))
    return [got[f"g{i}"] for i in range(4)]


@pytest.mark.parametrize(("spec", "key"), PROVIDER_SPECS)
def test_provider_generates_the_same_tokens(provider: Any, spec: str, key: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded model's generations through the hf provider (shared processor calls, the
    provider's own sampler, ``choose`` where a processor offers it) are the tokens the
    pinned processors give."""
    from evalrun.watermark.engine.seed_tables import seed_tables

    for temperature in (1.0, 0.0):
        seed_tables().clear()
        new = _generate(provider, spec, key, temperature)
        make = type(provider)._processor

        def pinned_processor(self: Any, request: Any, _make: Callable = make) -> Any:
            proc = _make(self, request)
            if proc is not None:
                proc.__class__ = PINNED_CLASS[type(proc).__name__]
            return proc

        with monkeypatch.context() as m:
            m.setattr(type(provider), "_processor", pinned_processor)
            seed_tables().clear()
            old = _generate(provider, spec, key, temperature)
        assert new == old
        assert sum(len(t) for t in new) > 20


MODIFIERS = [("sweet", KEY, pinned.PinnedGreenBias), ("sweet:entropy_threshold=3.0,prefix_length=3,delta=1.7", KEY,
                                                     pinned.PinnedGreenBias),
             ("ewd", KEY, pinned.PinnedGreenBias), ("ewd:gamma=0.25,prefix_length=2", KEY, pinned.PinnedGreenBias),
             ("sweet:compat=markllm", "15485863", pinned.PinnedGreenBias),
             ("morphmark", KEY, pinned.PinnedMorphMark),
             ("morphmark:type=linear,prefix_length=2,gamma=0.25", KEY, pinned.PinnedMorphMark),
             ("morphmark:type=log,p_0=0.6,f_scheme=additive,prefix_length=3", KEY, pinned.PinnedMorphMark),
             ("morphmark:compat=markllm", "15485863", pinned.PinnedMorphMark),
             ("dipmark", KEY, pinned.PinnedDiPmark),
             ("dipmark:alpha=0.3,prefix_length=2,ignore_history_generation=1", KEY, pinned.PinnedDiPmark),
             ("dipmark:prefix_length=0", KEY, pinned.PinnedDiPmark),
             ("dipmark:compat=markllm", "12345", pinned.PinnedDiPmark),
             ("unbiased", KEY, pinned.PinnedDiPmark),
             ("unbiased:prefix_length=2", KEY, pinned.PinnedDiPmark),
             ("unbiased:compat=markllm", "12345", pinned.PinnedDiPmark),
             ("waterfall", "42", pinned.PinnedWaterfall),
             ("waterfall:n_gram=3,kappa=1.5,k_p=2", "7", pinned.PinnedWaterfall),
             ("synthid", SYNTHID_KEYS, pinned.PinnedSynthID),
             ("synthid:ngram_len=2,sampling_table_size=1000,context_history_size=2", "5,9,13",
              pinned.PinnedSynthID)]


@pytest.mark.parametrize(("spec", "key", "cls"), MODIFIERS)
@pytest.mark.parametrize("kind", ["flat", "peaked", "masked"])
def test_modifiers_small_vocab(spec: str, key: str, cls: type, kind: str, kernel: bool) -> None:
    for temperature in (1.0, 0.7, 0.0):
        for prompt in (1, 6):
            _run(spec, key, cls, 1000, kind=kind, temperature=temperature, prompt=prompt)
    _run(spec, key, cls, 1000, width=1011, kind=kind)
    _run(spec, key, cls, 1000, width=990, kind=kind)  # scores narrower than the vocabulary


@pytest.mark.parametrize(("spec", "key", "cls"), [c for c in MODIFIERS if "markllm" not in c[0]])
def test_modifiers_llama3_vocab(spec: str, key: str, cls: type, kernel: bool) -> None:
    for kind in ("flat", "peaked"):
        _run(spec, key, cls, LARGE_V, batch=4, steps=2, kind=kind)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_synthid_one_row_llama3_vocab(threads: int, kernel: bool) -> None:
    """A generation of one row, as the hf provider calls SynthID's processor: torch sums a
    long row on its threads in chunks, which the fused tournament must follow."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _run("synthid", SYNTHID_KEYS, pinned.PinnedSynthID, LARGE_V, batch=1, steps=3, kind="flat")
        _run("synthid", SYNTHID_KEYS, pinned.PinnedSynthID, LARGE_V, batch=1, steps=2, kind="peaked",
             temperature=0.7)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("vocab", [1000, LARGE_V])
def test_synthid_rows_of_several_generations_at_once(vocab: int, threads: int, kernel: bool) -> None:
    """``call_rows`` (the hf provider's one call for the one-row generations of a step)
    against the pinned processor called once per generation, bit for bit, over several
    steps: prompts of different lengths, temperatures 1, 0.7 and 0 side by side, rows whose
    context repeats (left unwatermarked) beside watermarked ones, and a row whose step is
    skipped."""
    from evalrun.watermark.schemes.synthid import SynthIDLogitsProcessor

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        specs = ["synthid", "synthid", "synthid", "synthid:skip_first_ngram_calls=true", "synthid"]
        temps = [1.0, 0.7, 0.0, 1.0, 1.0]
        rng = np.random.default_rng(vocab + threads)
        new = [parse_watermark(s).logits_processor(SYNTHID_KEYS, vocab, temperature=t, seed=7)
               for s, t in zip(specs, temps)]
        old = [parse_watermark(s).logits_processor(SYNTHID_KEYS, vocab, temperature=t, seed=7)
               for s, t in zip(specs, temps)]
        for proc in old:
            proc.__class__ = pinned.PinnedSynthID
        ids = [rng.integers(0, vocab, size=n).tolist() for n in (6, 3, 9, 1, 6)]
        ids[4] = list(ids[0])  # the same context as row 0
        for step in range(4):
            scores = _scores(rng, len(ids), vocab, vocab, "flat" if step % 2 else "peaked")
            contexts = [torch.tensor([row], dtype=torch.long) for row in ids]
            got = SynthIDLogitsProcessor.call_rows(new, contexts, scores.clone())
            want = [proc(c.clone(), scores[k:k + 1].clone()) for k, (proc, c) in
                    enumerate(zip(old, contexts))]
            assert np.array_equal(_bits(got), _bits(torch.cat(want))), step
            for k, row in enumerate(ids):  # the next tokens: row 4 repeats row 0's contexts
                row.append(int(rng.integers(0, vocab)) if k != 4 else ids[0][-1])
    finally:
        torch.set_num_threads(before)


def test_synthid_rows_at_once_when_the_kernel_cannot_sum_as_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch whose sums the kernel does not follow: ``call_rows`` sums each row with torch,
    one row at a time, and still gives the pinned processor's bits (without the kernel:
    one call per processor, as always)."""
    monkeypatch.setattr(vocab_rows, "torch_sum_order", lambda rows: None)
    test_synthid_rows_of_several_generations_at_once(LARGE_V, 2, vocab_rows.compiled_available())


#: per-generation processors (Unbiased's default processor is shared by the rows of a batch,
#: which the provider calls once a step anyway)
ROWS_TOGETHER = [("synthid", SYNTHID_KEYS, "SynthIDLogitsProcessor"),
                 ("dipmark", KEY, "DiPmarkLogitsProcessor"),
                 ("unbiased:ignore_history_generation=0", KEY, "DiPmarkLogitsProcessor")]


@pytest.mark.parametrize(("spec", "key", "name"), ROWS_TOGETHER)
def test_provider_calls_call_rows_once_a_step_for_all_generations(
        provider: Any, monkeypatch: pytest.MonkeyPatch, spec: str, key: str, name: str) -> None:
    """The hf provider gives the one-row generations of a processor class that offers
    ``call_rows`` to it together, and the tokens are those of one processor call per
    generation."""
    from evalrun.watermark.schemes import dipmark, synthid

    cls = {"SynthIDLogitsProcessor": synthid.SynthIDLogitsProcessor,
           "DiPmarkLogitsProcessor": dipmark.DiPmarkLogitsProcessor}[name]
    calls: list[int] = []
    real = cls.call_rows.__func__  # type: ignore[attr-defined]

    def spy(owner: type, processors: Any, contexts: Any, scores: Any) -> Any:
        calls.append(len(processors))
        return real(owner, processors, contexts, scores)

    with monkeypatch.context() as m:
        m.setattr(cls, "call_rows", classmethod(spy))
        together = _generate(provider, spec, key, 1.0)
    assert calls and max(calls) == 4
    with monkeypatch.context() as m:
        m.setattr(cls, "call_rows", None)
        one_by_one = _generate(provider, spec, key, 1.0)
    assert together == one_by_one


DIP_ROWS = [("dipmark", KEY), ("dipmark:prefix_length=0", KEY), ("dipmark:compat=markllm", "12345"),
            ("unbiased", KEY), ("unbiased:compat=markllm", "12345")]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("vocab", [1000, LARGE_V])
@pytest.mark.parametrize(("spec", "key"), DIP_ROWS)
def test_dipmark_rows_of_several_generations_at_once(spec: str, key: str, vocab: int, threads: int,
                                                     kernel: bool) -> None:
    """DiPmark's (and Unbiased's) ``call_rows`` against the pinned processor called once per
    generation, bit for bit, over several steps: one block of rows per thread, prompts of
    different lengths (contexts of different lengths with ``prefix_length=0``; rows still
    short of ``prefix_length`` left alone), temperatures 1, 0.7 and 0 side by side, and a
    row whose context repeats (left unwatermarked by the generation's history). Float64
    scores at every other step: rounded to float32, a last-bit change in a row's logsumexp
    would hardly ever show."""
    from evalrun.watermark.schemes.dipmark import DiPmarkLogitsProcessor

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        temps = [1.0, 0.7, 0.0, 1.0, 1.0]
        scheme = parse_watermark(spec)
        new = [scheme.logits_processor(key, vocab, temperature=t, seed=7) for t in temps]
        old = [scheme.logits_processor(key, vocab, temperature=t, seed=7) for t in temps]
        for proc in old:
            proc.__class__ = pinned.PinnedDiPmark
        rng = np.random.default_rng(vocab * 10 + threads)
        ids = [rng.integers(0, vocab, size=n).tolist() for n in (6, 3, 9, 1, 6)]
        ids[4] = list(ids[0])  # the same contexts as row 0's, each one new to its own history
        for step in range(4):
            scores = _scores(rng, len(ids), vocab, vocab, "flat" if step % 2 else "peaked")
            if step % 2 == 0:
                scores = _float64_scores(rng, len(ids), vocab)
            contexts = [torch.tensor([row], dtype=torch.long) for row in ids]
            got = DiPmarkLogitsProcessor.call_rows(new, contexts, scores.clone())
            want = [proc(c.clone(), scores[k:k + 1].clone()) for k, (proc, c) in
                    enumerate(zip(old, contexts))]
            assert np.array_equal(_bits(got), _bits(torch.cat(want))), step
            for k, row in enumerate(ids):  # row 1 repeats its last token: a context seen before
                row.append(int(rng.integers(0, vocab)) if k != 1 or step % 2 else row[-1])
    finally:
        torch.set_num_threads(before)


def test_dipmark_rows_after_torch_threads_change() -> None:
    """A pool thread that ran torch code at 3 threads keeps a team of 3; at 2 threads again a
    long row's logsumexp must still be summed in 2 chunks, as one call per generation sums
    it (:func:`_float64_scores`)."""
    before = torch.get_num_threads()
    try:
        for threads in (3, 2, 1, 2):
            torch.set_num_threads(threads)
            _dip_rows_once(threads)
    finally:
        torch.set_num_threads(before)


def _dip_rows_once(threads: int) -> None:
    from evalrun.watermark.schemes.dipmark import DiPmarkLogitsProcessor

    rng = np.random.default_rng(threads)
    new = [parse_watermark("dipmark").logits_processor(KEY, LARGE_V, temperature=1.0, seed=7)
           for _ in range(4)]
    old = [parse_watermark("dipmark").logits_processor(KEY, LARGE_V, temperature=1.0, seed=7)
           for _ in range(4)]
    for proc in old:
        proc.__class__ = pinned.PinnedDiPmark
    contexts = [torch.from_numpy(rng.integers(0, LARGE_V, size=(1, 6))) for _ in range(4)]
    scores = _float64_scores(rng, 4, LARGE_V)
    got = DiPmarkLogitsProcessor.call_rows(new, contexts, scores.clone())
    want = torch.cat([p(c, scores[k:k + 1].clone()) for k, (p, c) in enumerate(zip(old, contexts))])
    assert np.array_equal(_bits(got), _bits(want)), threads


def test_dipmark_rows_of_different_reweightings_go_one_by_one() -> None:
    """Generations of different alphas (or keyings) in one ``call_rows``: one call per
    processor, each with its own arithmetic."""
    from evalrun.watermark.schemes.dipmark import DiPmarkLogitsProcessor

    specs = [("dipmark", KEY), ("dipmark:alpha=0.3", KEY), ("unbiased", KEY), ("dipmark:compat=markllm", "12345")]
    rng = np.random.default_rng(3)
    new = [parse_watermark(s).logits_processor(k, 1000, temperature=1.0, seed=7) for s, k in specs]
    old = [parse_watermark(s).logits_processor(k, 1000, temperature=1.0, seed=7) for s, k in specs]
    for proc in old:
        proc.__class__ = pinned.PinnedDiPmark
    contexts = [torch.from_numpy(rng.integers(0, 1000, size=(1, 7))) for _ in specs]
    scores = _scores(rng, len(specs), 1000, 1000, "peaked")
    got = DiPmarkLogitsProcessor.call_rows(new, contexts, scores.clone())
    want = torch.cat([p(c, scores[k:k + 1].clone()) for k, (p, c) in enumerate(zip(old, contexts))])
    assert np.array_equal(_bits(got), _bits(want))
    assert not torch.equal(got[0], got[1])  # alpha 0.45 and 0.3 reweight the same way apart


COMPAT_KGW = ["kgw:seeding=lefthash", "kgw:seeding=lefthash,context=2,gamma=0.5,delta=1.5",
              "kgw:seeding=selfhash"]


@pytest.mark.parametrize("spec", COMPAT_KGW)
@pytest.mark.parametrize("kind", ["flat", "peaked", "masked"])
def test_reference_kgw(spec: str, kind: str, kernel: bool) -> None:
    for call in ("call", "choose"):
        _run(spec, "15485863", pinned.PinnedKGWCompat, 1000, kind=kind, temperature=0.8, call=call)
    _run(spec, "15485863", pinned.PinnedKGWCompat, 1000, width=1011, kind=kind, call="choose")
    if "selfhash" not in spec:
        _run(spec, "15485863", pinned.PinnedKGWCompat, LARGE_V, batch=4, steps=2, kind=kind,
             call="choose")
