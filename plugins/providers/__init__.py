"""Model providers behind one interface (:class:`evalrun.generation.Provider`).

``make_provider`` turns a ``--model`` spec into a provider, importing heavy back ends
(transformers, vllm, openai) only when their spec is used.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from evalrun.errors import SpecError
from evalrun.generation import Provider
from evalrun.specs import Spec, parse_spec

#: provider name -> (module, factory function name, needs an argument)
PROVIDERS: dict[str, tuple[str, str, bool]] = {
    "reference": ("evalrun.plugins.providers.reference", "make_reference_provider", False),
    "replay": ("evalrun.plugins.providers.replay", "make_replay_provider", True),
    "openai": ("evalrun.plugins.providers.openai_chat", "make_openai_provider", True),
    "hf": ("evalrun.plugins.providers.hf", "make_hf_provider", True),
    "vllm": ("evalrun.plugins.providers.vllm", "make_vllm_provider", True),
    "embedded": ("evalrun.plugins.providers.hf", "make_embedded_provider", False),
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
    if entry[2] and spec.arg is None:
        raise SpecError(f"--model {text}: {spec.name} needs an argument, as in {spec.name}:<name-or-path>")
    return spec


def make_provider(text: str, **options: Any) -> Provider:
    spec = parse_model(text)
    module_name, factory_name, _ = PROVIDERS[spec.name]
    module = importlib.import_module(module_name)
    factory: Callable[..., Provider] = getattr(module, factory_name)
    return factory(spec, **options)
