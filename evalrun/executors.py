"""Where a run's unique generations execute: ``--executor local`` (this process, the default)
or ``--executor ray`` (Ray actors, ``pip install "evalrun[ray]"``).

Whatever the executor, results come back to the one process that writes the store, through
the generation phase's ``sink``: SQLite keeps a single writer and resume works unchanged.
Every generation is a function of its request alone (the sample seed is derived from the
request), so spreading requests over actors changes where they run, never what they return.

Ray: each of ``--ray-actors`` actors builds the model's provider once (model loaded once per
actor) and answers chunks of requests; chunks go out round-robin and are stored as they come
back. ``--ray-address`` joins a running cluster (``ray start --head`` on one node, ``ray start
--address HEAD:6379`` on the others); without it a local Ray instance is started. GPUs are Ray
resources: each actor asks for ``EVALRUN_RAY_GPUS_PER_ACTOR`` of them (default 0).
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from typing import Any, Callable, Mapping, Sequence

from evalrun.errors import EvalrunError
from evalrun.generation import Generation, GenerationRequest
from evalrun.registry import Registry

Sink = Callable[[GenerationRequest, Generation], None]
ProviderFactory = Callable[[str], Any]

#: chunks per actor: small enough to stream results, large enough to batch on each actor
CHUNKS_PER_ACTOR = 4
ENV_GPUS = "EVALRUN_RAY_GPUS_PER_ACTOR"


class Executor(ABC):
    """Runs one model's generation requests, calling ``sink`` in this process for each."""

    @abstractmethod
    def generate(self, model: str, requests: Sequence[GenerationRequest], sink: Sink,
                 make_provider: ProviderFactory) -> None: ...


EXECUTORS: Registry[Callable[..., Executor]] = Registry("executor", "evalrun.executors",
                                                         option="--executor")


@EXECUTORS.register("local")
class LocalExecutor(Executor):
    """The provider in this process (its own batching and API concurrency apply)."""

    def __init__(self, **_: Any) -> None:
        pass

    def generate(self, model: str, requests: Sequence[GenerationRequest], sink: Sink,
                 make_provider: ProviderFactory) -> None:
        provider = make_provider(model)
        try:
            provider.generate(list(requests), sink)
        finally:
            provider.close()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EvalrunError('--executor ray needs Ray: pip install "evalrun[ray]"') from None
    return ray


class _ProviderActor:
    """One provider, built once in the actor's process; answers lists of requests."""

    def __init__(self, model: str, provider_options: Mapping[str, Any]) -> None:
        from evalrun.providers import make_provider

        self.provider = make_provider(model, **provider_options)

    def generate(self, indexed: list[tuple[int, GenerationRequest]]) -> list[tuple[int, Generation]]:
        out: list[tuple[int, Generation]] = []
        index = {id(req): i for i, req in indexed}
        self.provider.generate([req for _, req in indexed],
                               lambda req, gen: out.append((index[id(req)], gen)))
        return out

    def close(self) -> None:
        self.provider.close()


@EXECUTORS.register("ray")
class RayExecutor(Executor):
    """Requests spread over Ray actors; results stored here as each chunk returns."""

    def __init__(self, *, ray_address: str | None = None, ray_actors: int = 2,
                 provider_options: Mapping[str, Any] | None = None, **_: Any) -> None:
        self.address = ray_address
        self.actors = max(1, int(ray_actors))
        self.provider_options = {k: v for k, v in (provider_options or {}).items() if v is not None}

    def _ray(self) -> Any:
        ray = _import_ray()
        if not ray.is_initialized():
            if self.address:
                ray.init(address=self.address, log_to_driver=False)
            else:
                ray.init(num_cpus=max(self.actors, os.cpu_count() or 1), log_to_driver=False,
                         include_dashboard=False)
        return ray

    def generate(self, model: str, requests: Sequence[GenerationRequest], sink: Sink,
                 make_provider: ProviderFactory) -> None:
        if not requests:
            return
        ray = self._ray()
        gpus = float(os.environ.get(ENV_GPUS, "0") or 0)
        actor_cls = ray.remote(num_cpus=1, num_gpus=gpus)(_ProviderActor)
        actors = [actor_cls.remote(model, self.provider_options) for _ in range(self.actors)]
        size = max(1, math.ceil(len(requests) / (self.actors * CHUNKS_PER_ACTOR)))
        indexed = list(enumerate(requests))
        pending = {}
        for n, start in enumerate(range(0, len(indexed), size)):
            ref = actors[n % len(actors)].generate.remote(indexed[start: start + size])
            pending[ref] = None
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    del pending[ref]
                    try:
                        results = ray.get(ref)
                    except Exception as exc:  # an actor that could not build its provider
                        cause = getattr(exc, "cause", None) or exc
                        raise EvalrunError(f"--executor ray: {model}: {cause}") from None
                    for i, gen in results:
                        sink(requests[i], gen)
        finally:
            for actor in actors:
                try:
                    ray.get(actor.close.remote())
                except Exception:  # noqa: BLE001 - a dead actor has nothing left to close
                    pass
                ray.kill(actor)


def make_executor(name: str, **options: Any) -> Executor:
    """The registered executor ``name`` built with the run's options."""
    return EXECUTORS.get(name)(**options)
