"""Fixtures shared by the watermark tests."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import pytest
import scipy.stats


@pytest.fixture(scope="module")
def provider() -> Iterator[Any]:
    """The embedded model behind the hf provider (batches of 4), for the schemes' generation
    tests; one torch thread while it runs (a tiny model: more threads only contend)."""
    import torch

    from evalrun.model.embedded import embedded_model_path
    from evalrun.plugins.providers.hf import HFProvider

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield HFProvider(str(embedded_model_path()), spec="embedded", batch_size=4)
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def generate(provider: Any) -> Callable[..., list[Any]]:
    """``generate(spec, key, prompts, max_tokens=, seed=)``: one generation per prompt (at
    temperature 1, each its own case) through :func:`provider`, in prompt order."""
    from evalrun.model.generation import GenerationRequest, GenParams, Prompt

    def run(spec: str, key: str | None, prompts: Sequence[str], *, max_tokens: int, seed: int) -> list[Any]:
        reqs = [GenerationRequest(gen_key=f"g{i}", pack="unit", case={"id": f"c{i}"},
                                  prompt=Prompt(None, text),
                                  params=GenParams(temperature=1.0, max_tokens=max_tokens, seed=seed),
                                  repetition=0, watermark=spec, key=key)
                for i, text in enumerate(prompts)]
        got: dict[str, Any] = {}
        provider.generate(reqs, lambda req, gen: got.__setitem__(req.gen_key, gen))
        return [got[f"g{i}"] for i in range(len(prompts))]

    return run


@pytest.fixture(scope="session")
def false_alarms_allowed() -> Callable[[int, float], int]:
    """``allowed(n, alpha)``: the most of ``n`` unwatermarked detections at level ``alpha`` that
    may come out positive before a test calls the detector miscalibrated (a calibrated one
    exceeds it with probability under 1e-4). Texts sampled from the embedded model are fixed
    on one machine but may be drawn differently on another CPU (docs/reproducibility.md),
    where each check is then a fresh draw: a test demanding no false alarm at all would fail
    by chance there."""
    def allowed(n: int, alpha: float) -> int:
        return int(scipy.stats.binom.isf(1e-4, n, alpha))

    return allowed
