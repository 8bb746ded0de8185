"""The ``reference`` model: each pack's ideal deterministic solver (``reference.py``).

It proves that a pack's cases and grader agree: every case must reach the pass score.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from evalrun.model.generation import Generation, GenerationRequest, ResultSink
from evalrun.model.providers import ModelSpec, PackFiles, ProviderKind, RunSettings


class ReferenceProvider:
    spec = "reference"
    supports_watermark = False

    def generate(self, requests: Sequence[GenerationRequest], sink: ResultSink) -> None:
        for request in requests:
            if request.solve is None:
                sink(request, Generation(text=None, error=f"pack {request.pack} has no reference.py solver"))
                continue
            start = time.perf_counter()
            try:
                text = request.solve(request.case)
            except Exception as exc:  # a solver bug is this case's error, not the run's
                sink(request, Generation(text=None, error=f"reference solver failed: {type(exc).__name__}: {exc}"))
                continue
            if not isinstance(text, str):
                sink(request, Generation(text=None, error=f"reference solver returned {type(text).__name__}, not str"))
                continue
            sink(request, Generation(text=text, latency_ms=(time.perf_counter() - start) * 1000.0,
                                     extra={"latency_kind": "solver"}))

    def close(self) -> None:
        pass


class ReferenceKind(ProviderKind):
    """The pack's own ideal solver: its code is what decides the output."""

    name = "reference"
    needs_arg = False

    def revision(self, spec: ModelSpec, pack: PackFiles | None, options: RunSettings) -> str:
        return pack.reference_revision if pack is not None else ""

    def make(self, spec: ModelSpec, **_: Any) -> ReferenceProvider:
        return ReferenceProvider()


KIND = ReferenceKind()
