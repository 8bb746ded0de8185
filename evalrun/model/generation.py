"""Types that flow from the run plan through providers into the store.

Providers (in ``evalrun.plugins.providers``) implement :class:`Provider`; the core never
imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from evalrun._util.hashing import stable_int


@dataclass(frozen=True)
class Prompt:
    """A single-turn chat prompt: optional system message plus one user message."""

    system: str | None
    user: str

    def messages(self) -> list[dict[str, str]]:
        out = []
        if self.system:
            out.append({"role": "system", "content": self.system})
        out.append({"role": "user", "content": self.user})
        return out

    def as_json(self) -> dict[str, Any]:
        return {"system": self.system, "user": self.user}


@dataclass(frozen=True)
class GenParams:
    """Sampling parameters; part of the cache key (params_json)."""

    temperature: float = 0.0
    max_tokens: int = 512
    seed: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}


@dataclass(frozen=True)
class GenerationRequest:
    """One model call. ``gen_key`` identifies it in the store (shared by all attacks).

    ``solve`` is the pack's reference solver when it has one; only the reference provider
    uses it. ``watermark`` is the canonical watermark spec (``"none"`` for no watermark);
    ``key`` the secret watermark key, which never reaches the store.
    """

    gen_key: str
    pack: str
    case: Mapping[str, Any]
    prompt: Prompt
    params: GenParams
    repetition: int
    watermark: str = "none"
    key: str | None = field(default=None, repr=False)
    solve: Callable[[Mapping[str, Any]], str] | None = field(default=None, repr=False)

    @property
    def case_id(self) -> str:
        return str(self.case["id"])

    @property
    def sample_seed(self) -> int:
        """Per-repetition seed so repetitions are distinct yet reproducible generations."""
        return stable_int(self.params.seed, self.repetition, self.pack, self.case_id)


@dataclass
class Generation:
    """What a provider returns for one request; ``error`` set means the call finally failed."""

    text: str | None
    token_ids: list[int] | None = None
    latency_ms: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    served_model: str | None = None
    retries: int = 0
    tokenizer_hash: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


ResultSink = Callable[[GenerationRequest, Generation], None]

#: the extra fields of an output that carries a watermark evalrun did not apply (a replay
#: file's, an API server's): the run detects it only, and the report says so
WATERMARKED_ELSEWHERE: Mapping[str, str] = {"watermark_origin": "outside evalrun"}


class Provider(Protocol):
    """A model behind one interface. ``generate`` must call ``sink`` once per request, as
    soon as that request's result is known, so finished work is stored before the rest."""

    spec: str
    supports_watermark: bool

    def generate(self, requests: Sequence[GenerationRequest], sink: ResultSink) -> None: ...

    def close(self) -> None: ...

