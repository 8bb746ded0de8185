"""Model providers behind one interface (:class:`evalrun.generation.Provider`).

``make_provider`` turns a ``--model`` spec into a provider, importing heavy back ends
(transformers, vllm, openai) only when their spec is used.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from evalrun.errors import SpecError
from evalrun.generation import Provider
from evalrun.specs import Spec, parse_spec


@dataclass(frozen=True)
class ProviderEntry:
    module: str
    factory: str
    needs_arg: bool
    #: run options (from the CLI or pytest) this provider takes; others are not passed
    options: frozenset[str] = frozenset()
    #: whether it has logits to apply a watermark to
    watermarks: bool = False
    #: ``"module:function"`` that checks a spec can be served (files exist, parse) without
    #: loading a model, so a bad spec is reported before the store or progress bar exist
    check: str | None = None


_LOCAL_CHECK = "evalrun.plugins.providers.local_model:check_local_model"

PROVIDERS: dict[str, ProviderEntry] = {
    "reference": ProviderEntry("evalrun.plugins.providers.reference", "make_reference_provider", False),
    "replay": ProviderEntry("evalrun.plugins.providers.replay", "make_replay_provider", True,
                            check="evalrun.plugins.providers.replay:check_replay"),
    "openai": ProviderEntry("evalrun.plugins.providers.openai_chat", "make_openai_provider", True,
                            frozenset({"base_url", "concurrency"})),
    "hf": ProviderEntry("evalrun.plugins.providers.hf", "make_hf_provider", True, watermarks=True,
                        check=_LOCAL_CHECK),
    # watermarks through vLLM V1 logits processors (plugins/providers/vllm_watermark.py)
    "vllm": ProviderEntry("evalrun.plugins.providers.vllm", "make_vllm_provider", True, watermarks=True,
                          check=_LOCAL_CHECK),
    "embedded": ProviderEntry("evalrun.plugins.providers.hf", "make_embedded_provider", False, watermarks=True,
                              check=_LOCAL_CHECK),
}


def parse_model(text: str) -> Spec:
    """Syntax and name check of a ``--model`` spec, without loading anything."""
    spec = parse_spec(text, what="--model", free_arg=True)
    entry = PROVIDERS.get(spec.name)
    if entry is None:
        raise SpecError(
            f"--model {text}: unknown provider {spec.name!r}; known: {', '.join(sorted(PROVIDERS))}"
            " (e.g. openai:gpt-4o-mini, hf:/path/to/model, replay:outputs.jsonl, reference, embedded)"
        )
    if entry.needs_arg and spec.arg is None:
        raise SpecError(f"--model {text}: {spec.name} needs an argument, as in {spec.name}:<name-or-path>")
    return spec


def check_model(text: str) -> Spec:
    """Everything about a ``--model`` spec that can be known without loading the model."""
    spec = parse_model(text)
    entry = PROVIDERS[spec.name]
    if entry.check is not None:
        module, _, func = entry.check.partition(":")
        getattr(importlib.import_module(module), func)(spec)
    return spec


def check_watermark_support(model: str, watermarks: list[str] | tuple[str, ...]) -> None:
    """A watermark needs a provider with logits; say so before any model is loaded."""
    marked = [w for w in watermarks if w != "none"]
    spec = parse_model(model)
    if marked and not PROVIDERS[spec.name].watermarks:
        raise SpecError(
            f"--model {model} cannot apply --watermark {marked[0]}: watermarking needs a provider with"
            " logits (hf:<path>, vllm:<path>, embedded)"
        )


def make_provider(text: str, **options: Any) -> Provider:
    spec = parse_model(text)
    entry = PROVIDERS[spec.name]
    module = importlib.import_module(entry.module)
    factory: Callable[..., Provider] = getattr(module, entry.factory)
    return factory(spec, **{k: v for k, v in options.items() if k in entry.options and v is not None})
