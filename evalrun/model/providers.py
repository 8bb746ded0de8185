"""Model specs and the registry of provider kinds.

A ``--model`` spec is ``<provider>[:<arg>][?<key>=<value>&...]``: ``vllm:/models/m?max_model_len=2048``,
``embedded?batch_size=8``. ``--model-arg <provider>:<key>=<value>`` sets an option for every model
of that provider; the spec's own options win. What evalrun knows about a provider before
loading any model -- its options, whether it has logits, how to check a spec, what besides
the spec decides its outputs (the revision in cache keys), where its tokenizer lives --
is a :class:`ProviderKind`, registered in :data:`PROVIDERS` (in-tree kinds lazily, third-party
ones through the ``evalrun.providers`` entry-point group). Nothing here imports a back end.

A model has two texts: its *identity* (name, argument and the options that change outputs;
stored, shown, and part of cache keys) and its full spec (identity plus options such as
``batch_size`` that only change how it runs), with which the provider is built.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

from evalrun._util.errors import SpecError
from evalrun._util.hashing import canonical_json, sha256_hex
from evalrun._util.registry import Registry
from evalrun._util.specs import is_none, parse_spec

if TYPE_CHECKING:
    from evalrun.model.generation import Provider


class PackFiles(Protocol):
    """What a provider may read of the pack it serves (the reference solver's file)."""

    @property
    def path(self) -> Path: ...

    @property
    def has_reference(self) -> bool: ...

    @property
    def reference_revision(self) -> str: ...


class RunSettings(Protocol):
    """What a provider may read of the run's options (an API endpoint, the vocabulary of
    token ids produced elsewhere)."""

    @property
    def base_url(self) -> str | None: ...

    @property
    def vocab_size(self) -> int | None: ...


@dataclass(frozen=True)
class ProviderOption:
    """One option a provider takes. ``affects_output`` options are part of the model's
    identity (a different dtype is a different model); the others are not."""

    kind: type
    help: str
    affects_output: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``--model`` spec with its options (as given, strings): made once where the
    user's text enters (:func:`parse_model`: the run options, a command's own model option, an
    attack's model, a spec read back from a store) and passed down, never re-parsed. Equal and
    hashed by its full text."""

    name: str
    arg: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)

    def _text(self, keys: Sequence[str]) -> str:
        base = self.name if self.arg is None else f"{self.name}:{self.arg}"
        if not keys:
            return base
        return base + "?" + "&".join(f"{k}={self.options[k]}" for k in sorted(keys))

    def full(self) -> str:
        """The spec with every option, sorted: what the provider is built from."""
        return self._text(list(self.options))

    def identity(self) -> str:
        """The spec with the options that change outputs only: stored and in cache keys."""
        kind = provider_kind(self.name)
        return self._text([k for k in self.options if k in kind.options and kind.options[k].affects_output])

    def canonical(self) -> str:  # what providers call their spec in messages
        return self.identity()

    def __str__(self) -> str:
        return self.full()

    def __hash__(self) -> int:
        return hash(self.full())

    def typed_options(self) -> dict[str, Any]:
        """Options converted to their declared types (checked by :func:`parse_model`)."""
        kind = provider_kind(self.name)
        return {k: _typed(self, k, v, kind.options[k]) for k, v in self.options.items()}


def _typed(spec: ModelSpec, key: str, value: str, option: ProviderOption) -> Any:
    if option.kind is bool:
        if value.lower() in ("1", "true", "yes"):
            return True
        if value.lower() in ("0", "false", "no"):
            return False
        raise SpecError(f"--model {spec}: {key}={value!r} must be true or false")
    try:
        typed = option.kind(value)
    except ValueError:
        wanted = {int: "an integer", float: "a number"}.get(option.kind, option.kind.__name__)
        raise SpecError(f"--model {spec}: {key}={value!r} must be {wanted}") from None
    if isinstance(typed, float) and not math.isfinite(typed):
        raise SpecError(f"--model {spec}: {key}={value!r} must be a finite number")
    return typed


class ProviderKind(ABC):
    """What evalrun knows about one provider before it loads any model."""

    name: str
    #: whether specs need ``:<arg>`` (a model name or path)
    needs_arg: bool = True
    #: whether it has logits to apply a watermark to
    logits: bool = False
    #: whether its provider scores texts (``next_token_logits``), as the detectors of SWEET,
    #: EWD and Unbiased need
    scores_texts: bool = False
    #: whether its outputs may carry a watermark applied outside evalrun (a replay file, a
    #: server that watermarks on its side): a ``--watermark`` is then detected, not applied
    detects_only: bool = False
    #: options a spec may carry (``?key=value``) or ``--model-arg`` may set
    options: Mapping[str, ProviderOption] = {}
    #: run options (``base_url``, ``concurrency``) the provider is built with
    run_options: frozenset[str] = frozenset()
    example: str = ""

    def check(self, spec: ModelSpec) -> None:
        """Whatever can be known without loading the model (files exist and parse), so a bad
        spec is reported before the store or the progress bar exist."""

    def revision(self, spec: ModelSpec, pack: PackFiles | None, options: RunSettings) -> str:
        """What besides the spec decides the model's outputs (weights, a file, an endpoint),
        folded into cache keys: changing it regenerates instead of reusing. ``pack`` is None
        outside a pack (an embedder's identity)."""
        return ""

    def named_watermarks(self, spec: ModelSpec) -> list[str]:
        """Watermark specs the model's outputs declare (a replay file's lines), canonical."""
        return []

    def tokenizer_dir(self, spec: ModelSpec) -> str | None:
        """A local directory holding the model's tokenizer (to re-tokenize attacked texts),
        or None for models evalrun has no tokenizer for."""
        return None

    @abstractmethod
    def make(self, spec: ModelSpec, **run_options: Any) -> "Provider":
        """Build the provider (may load the model: slow)."""


PROVIDERS: Registry[ProviderKind] = Registry("provider", "evalrun.providers", option="--model")
for _name, _target in (("reference", "reference:KIND"), ("replay", "replay:KIND"),
                       ("openai", "openai_chat:KIND"), ("hf", "hf:HF_KIND"),
                       ("embedded", "hf:EMBEDDED_KIND"), ("vllm", "vllm:KIND")):
    PROVIDERS.register_lazy(_name, f"evalrun.plugins.providers.{_target}")


def provider_kind(name: str) -> ProviderKind:
    kind = PROVIDERS.get(name)
    if not isinstance(kind, ProviderKind):
        raise SpecError(f"--model {name}: registered as {type(kind).__name__}, not a ProviderKind")
    return kind


def parse_model(text: str, model_args: Mapping[str, Mapping[str, str]] | None = None) -> ModelSpec:
    """Syntax, provider name and option names/types of a ``--model`` spec, loading nothing.
    ``model_args`` (from ``--model-arg``) apply where the spec sets no value itself."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError("--model: empty spec")
    base, _, query = text.strip().partition("?")
    parsed = parse_spec(base, what="--model", free_arg=True)
    try:
        kind = provider_kind(parsed.name)
    except SpecError:
        known = ", ".join(PROVIDERS.names())
        raise SpecError(f"--model {text}: unknown provider {parsed.name!r}; known: {known} (e.g. "
                        "openai:gpt-4o-mini, hf:/path/to/model, replay:outputs.jsonl, reference, embedded)") from None
    if kind.needs_arg and not parsed.arg:
        raise SpecError(f"--model {text}: {parsed.name} needs an argument, as in {kind.example or parsed.name + ':<name-or-path>'}")
    options = dict((model_args or {}).get(parsed.name, {}))
    if query:
        for part in query.split("&"):
            key, eq, value = part.partition("=")
            if not eq or not key or value == "":
                raise SpecError(f"--model {text}: expected ?key=value&..., got {part!r}")
            options[key] = value
    unknown = sorted(set(options) - set(kind.options))
    if unknown:
        known = ", ".join(sorted(kind.options)) or "none"
        raise SpecError(f"--model {text}: unknown option(s) {', '.join(unknown)} for {parsed.name}; known: {known}")
    spec = ModelSpec(parsed.name, parsed.arg, options)
    spec.typed_options()
    return spec


def check_model(spec: ModelSpec) -> ModelSpec:
    """Everything about a model spec that can be known without loading the model (a local
    model's directory, a replay file); returns ``spec``."""
    provider_kind(spec.name).check(spec)
    return spec


def check_watermark_support(spec: ModelSpec, watermarks: Sequence[str], *, elsewhere: bool = False) -> str | None:
    """A watermark needs a provider with logits or, where ``elsewhere`` allows it (a run, not
    a strength sweep), one whose outputs were watermarked elsewhere; say so before any model
    is loaded. Returns a note for the second case: the watermark is detected, not applied."""
    marked = [w for w in watermarks if not is_none(w)]
    kind = provider_kind(spec.name)
    if not marked or kind.logits:
        return None
    if kind.detects_only and elsewhere:
        return (f"--model {spec}: evalrun applies no watermark to its outputs; {', '.join(marked)} "
                "will be detected in them as produced elsewhere (detect-only)")
    logit_kinds = [n for n in PROVIDERS.names() if provider_kind(n).logits]
    others = [n for n in PROVIDERS.names() if provider_kind(n).detects_only]
    raise SpecError(f"--model {spec} cannot apply --watermark {marked[0]}: watermarking needs a provider"
                    f" with logits ({', '.join(logit_kinds)}); outputs watermarked elsewhere come through"
                    f" {', '.join(others)}")


def tokenizer_source(spec: ModelSpec, run_tokenizer: str | None) -> str | None:
    """Where a model's tokenizer is: its own directory (local models), else the run's
    ``--tokenizer`` (API and replay models), else None."""
    return provider_kind(spec.name).tokenizer_dir(spec) or run_tokenizer


def make_provider(spec: ModelSpec, **run_options: Any) -> "Provider":
    kind = provider_kind(spec.name)
    return kind.make(spec, **{k: v for k, v in run_options.items() if k in kind.run_options and v is not None})


def model_revision(spec: ModelSpec, pack: PackFiles, options: RunSettings) -> str:
    return provider_kind(spec.name).revision(spec, pack, options)


def model_argument(text: str) -> ModelSpec:
    """The ``type=`` of a command's own model option (``evalrun judge --judge``, ``detect
    --model``, ``distinguish --embedder``, ``watermark-data --model``): the spec parsed where
    the user's text enters, as :mod:`evalrun.run.options` parses a run's."""
    return parse_model(text)


def stored_model(identity: str) -> ModelSpec:
    """The spec of a model a store names (a result's ``model``: its identity), for what reads
    stored results back with their model: the viewer's token evidence, the detection grader
    of schemes that read the model."""
    return parse_model(identity)


# -- fingerprints shared by kinds ----------------------------------------------------------
def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def local_model_digest(path: Path) -> str:
    """Fingerprint of a local model directory: configs and tokenizer in full, weights by
    content when small and by name, size and mtime when large (hashing GBs per run is not
    worth it)."""
    parts: list[Any] = []
    for child in sorted(path.iterdir()):
        if not child.is_file():
            continue
        size = child.stat().st_size
        if size <= 64 * 1024 * 1024:
            parts.append((child.name, file_digest(child)))
        else:
            parts.append((child.name, size, child.stat().st_mtime_ns))
    return sha256_hex(canonical_json(parts))
