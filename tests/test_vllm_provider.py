"""The vllm provider: a clear error without vllm, and its request plumbing against a stand-in
``vllm`` module (the real engine is exercised where vllm is installed)."""

from __future__ import annotations

import dataclasses
import sys
import types
from dataclasses import dataclass

import pytest

from evalrun.errors import EvalrunError, SpecError
from evalrun.generation import GenerationRequest, GenParams, Prompt
from evalrun.plugins.providers.vllm import VLLMProvider, make_vllm_provider
from evalrun.specs import parse_spec


def request(i: int, *, watermark: str = "none", temperature: float = 1.0) -> GenerationRequest:
    return GenerationRequest(
        gen_key=f"g{i}", pack="unit", case={"id": f"c{i}"}, prompt=Prompt("Sys.", f"hi {i}"),
        params=GenParams(temperature=temperature, max_tokens=5, seed=3), repetition=i,
        watermark=watermark, key=None if watermark == "none" else "k")


def test_missing_vllm_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(EvalrunError, match=r"vllm is not installed; install evalrun\[vllm\]"):
        VLLMProvider("/models/m", spec="vllm:/models/m")
    with pytest.raises(EvalrunError, match="vllm is not installed"):
        make_vllm_provider(parse_spec("vllm:/models/m", free_arg=True))


def test_factory_rejects_bad_specs(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(SpecError):
        make_vllm_provider(parse_spec("vllm", free_arg=True))
    with pytest.raises(SpecError, match="unknown option"):
        make_vllm_provider(parse_spec("vllm:m", free_arg=True), colour="red")


class FakeTokenizer:
    eos_token_id = 99
    chat_template = None

    def __call__(self, text, add_special_tokens=True):
        ids = [ord(c) % 90 for c in text]
        return {"input_ids": ([0] if add_special_tokens else []) + ids}

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(f"t{i}" for i in ids)

    def get_vocab(self):
        return {"a": 0, "b": 1}


@dataclass
class FakeSamplingParams:
    temperature: float
    max_tokens: int
    seed: int
    extra_args: dict | None = None


class FakeLLM:
    instances: list["FakeLLM"] = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list = []
        FakeLLM.instances.append(self)

    def get_tokenizer(self):
        return FakeTokenizer()

    def generate(self, prompts, params, use_tqdm=False):
        self.calls.append((prompts, params))
        if any(p.temperature < 0 for p in params):
            raise ValueError("negative temperature")
        completion = types.SimpleNamespace
        return [types.SimpleNamespace(outputs=[completion(
            token_ids=[p.seed % 7, 5, 99], finish_reason="stop")]) for p in params]


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.instances.clear()
    return module


def test_generation_plumbing_with_stand_in_engine(fake_vllm):
    p = make_vllm_provider(parse_spec("vllm:org/model", free_arg=True), batch_size=2)
    assert FakeLLM.instances[0].kwargs["model"] == "org/model"
    reqs = [request(i) for i in range(3)] + [request(3, temperature=-1.0)]
    got = {}
    p.generate(reqs, lambda r, g: got.setdefault(r.gen_key, g))
    assert len(got) == 4
    for r in reqs[:2]:
        g = got[r.gen_key]
        assert g.token_ids == [r.sample_seed % 7, 5]  # EOS stripped
        assert g.text == p.tokenizer.decode(g.token_ids)
        assert g.tokens_out == 2 and g.tokens_in == len("Sys.\n\nhi 0\n\n") + 1
        assert g.extra["finish_reason"] == "stop" and g.latency_ms > 0
        assert g.extra["latency_kind"] == "batch share" and g.extra["batch_size"] == 2
    # each request carries its own seed and parameters, prompts go in as token ids
    prompts, params = FakeLLM.instances[0].calls[0]
    assert [sp.seed for sp in params] == [reqs[0].sample_seed, reqs[1].sample_seed]
    assert all("prompt_token_ids" in pr for pr in prompts)
    # a failing chunk stores its error on each of its requests; the others are unaffected
    assert got["g2"].error and got["g3"].error and "negative temperature" in got["g3"].error
    assert got["g0"].error is None


def test_watermarked_requests_carry_their_processor_arguments(fake_vllm):
    from evalrun.plugins.providers.vllm_watermark import (EXTRA_ARGS_KEY,
                                                          EvalrunWatermarkLogitsProcessor)

    p = VLLMProvider("org/model", spec="vllm:org/model")
    assert p.supports_watermark is True
    assert FakeLLM.instances[0].kwargs["logits_processors"] == [EvalrunWatermarkLogitsProcessor]
    reqs = [request(0, watermark="kgw:delta=2", temperature=0.7),
            request(1, watermark="exp", temperature=0.0), request(2, temperature=0.7)]
    got = {}
    p.generate(reqs, lambda r, g: got.setdefault(r.gen_key, g))
    assert all(g.error is None for g in got.values())
    _, params = FakeLLM.instances[0].calls[0]
    # vLLM samples the processor's scores at temperature 1 (0 stays greedy); the real one rides along
    assert [sp.temperature for sp in params] == [1.0, 0.0, 0.7]
    assert params[0].extra_args == {EXTRA_ARGS_KEY: {
        "spec": "kgw:delta=2", "key": "k", "temperature": 0.7, "seed": reqs[0].sample_seed}}
    assert params[1].extra_args[EXTRA_ARGS_KEY]["temperature"] == 0.0
    assert params[2].extra_args is None


def test_watermark_errors_are_clear(fake_vllm):
    p = VLLMProvider("org/model", spec="vllm:org/model")
    with pytest.raises(SpecError, match="--watermark"):
        p.generate([request(0, watermark="nosuchscheme")], lambda r, g: None)
    keyless = dataclasses.replace(request(0, watermark="kgw:delta=2"), key=None)
    with pytest.raises(EvalrunError, match="no watermark key"):
        p.generate([keyless], lambda r, g: None)


def test_missing_local_path(fake_vllm, tmp_path):
    with pytest.raises(EvalrunError, match="no such model directory"):
        VLLMProvider(str(tmp_path / "nope"), spec="vllm:x")
