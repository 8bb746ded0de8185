"""The hf provider on the shipped embedded model: determinism, seeding, batching, errors and
the watermark plumbing (with a toy scheme defined here, independent of the real schemes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

pytestmark = pytest.mark.numeric  # the embedded model's float32 forward passes
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import evalrun.plugins.providers.hf as hf_module  # noqa: E402
from evalrun._util.errors import EvalrunError, SpecError  # noqa: E402
from evalrun._util.specs import Spec  # noqa: E402
from evalrun.model.embedded import EMBEDDED_NAME, embedded_model_path  # noqa: E402
from evalrun.model.generation import GenerationRequest, GenParams, Prompt  # noqa: E402
from evalrun.model.providers import parse_model  # noqa: E402
from evalrun.plugins.providers.hf import (  # noqa: E402
    EMBEDDED_KIND,
    HF_KIND,
    HFProvider,
    sample_rows,
)
from evalrun.plugins.providers.local_model import render_plain  # noqa: E402
from evalrun.testing.float_drift import float32_bound  # noqa: E402
from evalrun.watermark.base import Detection, WatermarkScheme  # noqa: E402

SECRET = "s3cret-key-for-tests"


def request(i: int = 0, *, temperature: float = 1.0, max_tokens: int = 16, repetition: int = 0,
            watermark: str = "none", key: str | None = None, user: str | None = None,
            system: str | None = None) -> GenerationRequest:
    return GenerationRequest(
        gen_key=f"g{i}-{repetition}", pack="unit", case={"id": f"case{i}"},
        prompt=Prompt(system, user or f"Miss Bennet walked to the village, number {i}."),
        params=GenParams(temperature=temperature, max_tokens=max_tokens, seed=7),
        repetition=repetition, watermark=watermark, key=key)


def run(provider: HFProvider, reqs: Sequence[GenerationRequest]) -> dict:
    got: dict = {}

    def sink(req, gen):
        assert req.gen_key not in got, "sink called twice for one request"
        got[req.gen_key] = gen

    provider.generate(reqs, sink)
    return got


@pytest.fixture(scope="module")
def provider() -> HFProvider:
    return HFProvider(str(embedded_model_path()), spec="embedded", batch_size=4)


class ParityBias(WatermarkScheme):
    """Toy scheme: adds ``delta`` to the logits of tokens whose parity matches the key."""

    spec = Spec(name="parity", params={"delta": "50"})

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, float, int]] = []

    def logits_processor(self, key, vocab_size, *, temperature, seed):
        parity = len(key) % 2
        bias = torch.zeros(vocab_size)
        bias[parity::2] = 50.0
        calls = self.calls

        def process(input_ids, scores):
            calls.append((input_ids.shape[0], input_ids.shape[1], temperature, seed))
            out = scores + bias
            return out / temperature if temperature > 0 else out

        return process

    def detect(self, token_ids, key, vocab_size):
        green = sum(1 for t in token_ids if t % 2 == len(key) % 2)
        return Detection(num_tokens_scored=len(token_ids), score=float(green), p_value=0.5)

    def prefix_p_values(self, token_ids, key, vocab_size):
        return np.full(len(token_ids), 0.5)


def test_greedy_is_deterministic_and_matches_argmax(provider):
    reqs = [request(i, temperature=0.0) for i in range(3)]
    a, b = run(provider, reqs), run(provider, reqs)
    for r in reqs:
        assert a[r.gen_key].error is None
        assert a[r.gen_key].token_ids == b[r.gen_key].token_ids
        assert a[r.gen_key].text == b[r.gen_key].text
    # the first generated token is the argmax of a plain forward pass over the prompt
    tok = provider.tokenizer
    ids = tok(render_plain(reqs[0].prompt), return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = provider.model(input_ids=ids).logits[0, -1]
    assert a[reqs[0].gen_key].token_ids[0] == int(logits.argmax())


def sampling_margins(provider: HFProvider, req: GenerationRequest, token_ids: Sequence[int]) -> np.ndarray:
    """Per sampled token of ``req`` (temperature 1, no watermark), how far its seeded draw
    (``u`` times the row total) fell inside the chosen token's CDF interval, in units of the
    float32 bound of that step's CDF: probabilities move by ``2 d`` relative when logits move
    by ``d``, so a CDF entry moves by at most ``2 d`` times the total. Above 2, another batch
    or CPU (each within the bound) draws the same token."""
    prompt = provider._encode(req.prompt)
    with torch.no_grad():
        logits = provider.model(input_ids=torch.tensor([prompt + list(token_ids)])).logits[0].float()
    gen = torch.Generator().manual_seed(req.sample_seed)
    out = []
    for t, tok in enumerate(token_ids):
        row = logits[len(prompt) - 1 + t]
        cdf = torch.softmax(row, dim=-1).cumsum(dim=-1, dtype=torch.float64)
        x = float(torch.rand(1, generator=gen, dtype=torch.float64)) * float(cdf[-1])
        lo = float(cdf[tok - 1]) if tok else 0.0
        drift = 2 * float32_bound(float(row.abs().max())) * float(cdf[-1])
        out.append(min(x - lo, float(cdf[tok]) - x) / drift)
    return np.array(out)


def test_seeded_sampling_reproducible_across_batching_and_repetitions_differ(provider):
    """A request's tokens do not depend on its batch, draw by draw, except where a draw fell
    within the float32 drift of a CDF edge: a batch's forward pass rounds logits differently
    (docs/reproducibility.md), so there the token may differ and the rest is another text."""
    reqs = [request(i, repetition=rep, max_tokens=20) for i in range(3) for rep in range(2)]
    batched = run(provider, reqs)
    single = run(HFProvider(str(embedded_model_path()), spec="embedded", batch_size=1),
                 list(reversed(reqs)))
    for r in reqs:
        want, got = single[r.gen_key].token_ids, batched[r.gen_key].token_ids
        margins = sampling_margins(provider, r, want)
        assert (margins > 0).all()  # the tokens are this model's draws from those seeds
        for t, (a, b) in enumerate(zip(got, want)):
            if a != b:  # only a draw within the drift of its edge may go the other way
                assert margins[t] <= 2, (r.gen_key, t, margins[t])
                break
        else:
            assert got == want
    for i in range(3):
        assert batched[f"g{i}-0"].token_ids != batched[f"g{i}-1"].token_ids


def test_generation_fields_and_decoding(provider):
    reqs = [request(i, max_tokens=12, system="Write like a novelist." if i else None)
            for i in range(5)]
    got = run(provider, reqs)
    assert len(got) == 5
    expected_hash = __import__("hashlib").sha256(
        (embedded_model_path() / "tokenizer.json").read_bytes()).hexdigest()
    for r in reqs:
        g = got[r.gen_key]
        assert g.error is None and g.text is not None
        assert 0 < g.tokens_out == len(g.token_ids) <= 12
        assert g.text == provider.tokenizer.decode(g.token_ids, skip_special_tokens=True)
        assert g.tokens_in == len(provider.tokenizer(render_plain(r.prompt))["input_ids"])
        assert g.latency_ms is not None and g.latency_ms > 0
        assert g.served_model == EMBEDDED_NAME
        assert g.tokenizer_hash == expected_hash
        assert not set(g.token_ids) & provider.eos_ids
        assert g.extra["vocab_size"] == 8192
        assert g.extra["finish_reason"] in ("stop", "length")


def test_plain_prompt_rendering():
    assert render_plain(Prompt("Sys.", "Hi")) == "Sys.\n\nHi\n\n"
    assert render_plain(Prompt(None, "Hi")) == "Hi\n\n"


def test_zero_max_tokens_gives_empty_text(provider):
    g = run(provider, [request(0, max_tokens=0)])["g0-0"]
    assert g.error is None and g.text == "" and g.token_ids == []


def test_errors_are_stored_per_batch_not_raised(provider, monkeypatch):
    provider_b2 = HFProvider(str(embedded_model_path()), spec="embedded", batch_size=2)
    reqs = [request(0), request(1, watermark="nosuchscheme:x=1", key=SECRET), request(2),
            request(3)]
    got = run(provider_b2, reqs)
    # batch 1 (requests 0 and 1) fails as a whole; batch 2 succeeds
    assert got["g0-0"].text is None and got["g1-0"].text is None
    assert "nosuchscheme" in got["g1-0"].error
    assert SECRET not in got["g1-0"].error
    assert got["g2-0"].error is None and got["g3-0"].error is None
    missing_key = run(provider, [request(0, watermark="nosuchscheme:x=1", key=None)])["g0-0"]
    assert "key" in missing_key.error


def test_watermark_plumbing_with_toy_scheme(provider, monkeypatch):
    scheme = ParityBias()
    seen: list[str] = []

    def fake_parse(text):
        seen.append(text)
        return scheme

    # pick the key so the bias favours the parity the unwatermarked greedy output avoids
    plain = run(provider, [request(0, temperature=0.0, max_tokens=15)])["g0-0"]
    key = SECRET if len(SECRET) % 2 != plain.token_ids[0] % 2 else SECRET + "x"
    monkeypatch.setattr(hf_module, "parse_watermark", fake_parse)
    spec = "parity:delta=50"
    reqs = [request(i, watermark=spec, key=key, temperature=t, max_tokens=15)
            for i, t in enumerate((0.0, 0.7, 1.0))]
    got = run(provider, reqs)
    parity = len(key) % 2
    for r in reqs:
        g = got[r.gen_key]
        assert g.error is None
        assert g.token_ids and all(t % 2 == parity for t in g.token_ids)
        assert key not in json.dumps(g.extra) and key not in repr(g)
    # one processor call per generated token, with the unpadded context and the request's
    # temperature and seed; the provider builds the scheme once per spec
    assert seen == [spec]
    assert {c[0] for c in scheme.calls} == {1}
    assert {(c[2], c[3]) for c in scheme.calls} == {(r.params.temperature, r.sample_seed)
                                                    for r in reqs}
    n_prompt = got["g0-0"].tokens_in
    first = [c for c in scheme.calls if c[3] == reqs[0].sample_seed]
    assert [c[1] for c in first][:3] == [n_prompt, n_prompt + 1, n_prompt + 2]
    assert plain.token_ids[0] != got["g0-0"].token_ids[0]


def test_missing_model_path_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-model-here"
    with pytest.raises(EvalrunError, match="no-model-here"):
        HFProvider(str(missing), spec=f"hf:{missing}")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(EvalrunError, match="never downloads"):
        HFProvider(str(empty), spec=f"hf:{empty}")


def test_kinds_build_providers_from_model_specs():
    p = EMBEDDED_KIND.make(parse_model("embedded?batch_size=2"))
    assert p.spec == "embedded" and p.batch_size == 2 and p.served_model == EMBEDDED_NAME
    p = EMBEDDED_KIND.make(parse_model("embedded", {"embedded": {"batch_size": "3"}}))
    assert p.batch_size == 3  # --model-arg embedded:batch_size=3
    p = EMBEDDED_KIND.make(parse_model(f"embedded:{EMBEDDED_NAME}"))
    assert p.spec == f"embedded:{EMBEDDED_NAME}"
    with pytest.raises(SpecError):
        EMBEDDED_KIND.make(parse_model("embedded:other"))
    path = str(embedded_model_path())
    p = HF_KIND.make(parse_model(f"hf:{path}?device=cpu&batch_size=4"))
    assert p.spec == f"hf:{path}?device=cpu" and p.served_model == EMBEDDED_NAME  # identity: no batch size
    with pytest.raises(SpecError, match=r"unknown option\(s\) colour for hf; known: batch_size, device, dtype"):
        parse_model(f"hf:{path}?colour=red")
    with pytest.raises(SpecError, match="batch_size='two' must be an integer"):
        parse_model(f"hf:{path}?batch_size=two")
    with pytest.raises(SpecError):
        parse_model("hf")


def _tiny_chat_model(root: Path) -> Path:
    """A random 2-layer Llama with a word-level tokenizer and a chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<bos>", "<eos>", "<pad>", "<unk>", "system", "user", "assistant", ":", "hello",
             "world", "Be", "kind.", "Say", "hi."] + [f"w{i}" for i in range(50)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
        unk_token="<unk>")
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} "
                          "{% endfor %}{% if add_generation_prompt %}assistant : {% endif %}")
    fast.save_pretrained(root)
    config = transformers.LlamaConfig(vocab_size=len(words), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=2,
                                      num_key_value_heads=2, max_position_embeddings=128,
                                      bos_token_id=0, eos_token_id=1, pad_token_id=2)
    # weight initialisation reads torch's global generator: seed it without leaking the state
    with torch.random.fork_rng():
        torch.manual_seed(0)
        transformers.LlamaForCausalLM(config).save_pretrained(root)
    return root


def test_chat_template_is_used_when_present(tmp_path):
    path = _tiny_chat_model(tmp_path / "tiny")
    p = HFProvider(str(path), spec=f"hf:{path}", batch_size=2)
    prompt = Prompt("Be kind.", "Say hi.")
    assert p.prompt_text(prompt) == "system : Be kind. user : Say hi. assistant : "
    got = run(p, [request(0, user="Say hi.", system="Be kind.", max_tokens=5),
                  request(1, user="hello world", temperature=0.0, max_tokens=5)])
    assert got["g0-0"].tokens_in == 10  # the templated words only, no extra BOS
    assert all(g.error is None and len(g.token_ids) <= 5 for g in got.values())
    assert p.tokenizer_hash == __import__("hashlib").sha256(
        (path / "tokenizer.json").read_bytes()).hexdigest()


def test_real_kgw_scheme_end_to_end(provider):
    """Generation with the shipped kgw scheme is detected; the same prompts without it are not."""
    from evalrun.watermark import parse_watermark

    spec = "kgw:delta=4,gamma=0.25"
    scheme = parse_watermark(spec)
    marked = run(provider, [request(i, watermark=spec, key=SECRET, max_tokens=60)
                            for i in range(3)])
    plain = run(provider, [request(i, max_tokens=60) for i in range(3)])
    for key in marked:
        g = marked[key]
        assert g.error is None and len(g.token_ids) >= 20
        assert scheme.detect(g.token_ids, SECRET, g.extra["vocab_size"]).p_value < 1e-3
        assert scheme.detect(plain[key].token_ids, SECRET, 8192).p_value > 1e-3


@pytest.mark.parametrize("spec", ["kgw", "unigram", "exp", "its", "binary:skip=0.3",
                                  "kgw:seeding=lefthash", "kgw:seeding=selfhash",
                                  "kgw:context=8", "mixed"])
def test_shared_processors_match_per_row_processors(provider, monkeypatch, spec):
    """One processor call per step for a group of rows gives exactly the tokens of one
    processor per row, greedy and sampled, with the seed-table cache cold or warm; rows whose
    prompt is shorter than the scheme's context, fixed randomness, skipped positions and
    unwatermarked rows are handled beside the shared ones."""
    from evalrun.kernels import vocab_rows
    from evalrun.watermark.engine.seed_tables import seed_tables

    users = [None, None, None, "Yes."]  # a short last prompt: under kgw:context=8's window
    for temperature in (0.0, 1.0):
        if spec == "mixed":
            marks = ["kgw", "none", "kgw:randomness=fixed", "kgw"]
        else:
            marks = [spec] * 4
        keys = {"none": None, "kgw:seeding=lefthash": "15485863",
                "kgw:seeding=selfhash": "15485863"}  # the reference scheme's integer key
        reqs = [request(i, watermark=w, key=keys.get(w, SECRET), user=users[i],
                        temperature=temperature, max_tokens=24) for i, w in enumerate(marks)]
        prompts = [provider._encode(r.prompt) for r in reqs]
        shared = [g.rows for g in provider._groups(reqs, prompts)
                  if g.processor is not None and g.shared]
        expected = {"kgw:context=8": [[0, 1, 2]], "mixed": [[0, 3]]}.get(spec, [[0, 1, 2, 3]])
        assert shared == expected
        seed_tables().clear()
        batched = run(provider, reqs)
        warm = run(provider, reqs)  # every table row now comes from the cache
        # binary hashes only the tree nodes it visits, and with the compiled vocabulary
        # kernel exp, its and kgw's per-seed rows are made from the seed words without tables
        # (kgw's one-token contexts still read their dense mask table)
        tableless = spec.startswith("binary") or (
            vocab_rows.compiled_available() and spec in ("exp", "its", "kgw:context=8"))
        if temperature > 0 and not tableless and spec not in (
                "unigram", "kgw:seeding=lefthash", "kgw:seeding=selfhash"):
            assert seed_tables().stats.hits > 0
        monkeypatch.setattr(provider, "share_processors", False)
        assert not [g for g in provider._groups(reqs, prompts)
                    if g.processor is not None and g.shared]
        per_row = run(provider, reqs)
        monkeypatch.undo()
        for r in reqs:
            assert batched[r.gen_key].error is None
            assert len(batched[r.gen_key].token_ids) > 0
            assert batched[r.gen_key].token_ids == per_row[r.gen_key].token_ids, (spec, r.gen_key)
            assert warm[r.gen_key].token_ids == per_row[r.gen_key].token_ids, (spec, r.gen_key)


def test_sample_rows_is_per_row_reproducible_and_respects_zero_mass():
    scores = torch.randn(5, 300, generator=torch.Generator().manual_seed(1)) * 3
    scores[2] = float("-inf")
    scores[2, 17] = 0.0  # a row that replaces sampling: one token left
    scores[4, 250:] = float("-inf")

    def gens(seeds):
        return [torch.Generator().manual_seed(s) for s in seeds]

    together = sample_rows(scores, gens(range(5))).tolist()
    alone = [int(sample_rows(scores[i:i + 1], gens([i]))[0]) for i in range(5)]
    assert together == alone
    assert together[2] == 17 and together[4] < 250
    # many draws follow the softmax distribution of a row
    g = gens([123])[0]
    row = torch.tensor([[0.0, 1.0, 2.0, float("-inf")]])
    counts = np.bincount([int(sample_rows(row, [g])[0]) for _ in range(4000)], minlength=4)
    expected = torch.softmax(row[0], -1).numpy() * 4000
    assert counts[3] == 0
    assert np.all(np.abs(counts[:3] - expected[:3]) < 5 * np.sqrt(expected[:3]) + 1)
