"""``--executor ray``: a stage's calls spread over Ray actors, answers stored by this process.

Each of ``--workers`` actors builds the model's provider once (model loaded once per actor)
and answers chunks of a stage's inputs; chunks go out round-robin and each chunk's answers go
to the stage's sink as the chunk comes back. A chunk is a whole number of the provider's
batches (``batch_size``) taken in the stage's order, so a local model batches exactly the
rows it batches in-process: a batch's composition changes floating-point sums, and so now and
then a token. The actors of the last model used are kept for the next call (a multi-step
attack, or a judge that is the generating model) and replaced when another model is asked
for; :meth:`RayExecutor.close` ends them. Work that needs no model (text attacks) runs on the
actors there are, without their provider, or on actors built without one.

``--ray-address`` joins a running cluster (``ray start --head`` on one node, ``ray start
--address HEAD:6379`` on the others); without it a local Ray instance is started. GPUs are Ray
resources: each actor holding a model asks for ``EVALRUN_RAY_GPUS_PER_ACTOR`` of them
(default 0); more than the cluster has is refused up front, since Ray would wait for ever to
place the actors.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping, Sequence

from evalrun._util.errors import EvalrunError
from evalrun.model.providers import ModelSpec, make_provider
from evalrun.run.executors import Emit, Executor, ProviderFactory, Task

#: chunks per actor: small enough to stream results, large enough to batch on each actor
CHUNKS_PER_ACTOR = 4
ENV_GPUS = "EVALRUN_RAY_GPUS_PER_ACTOR"


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EvalrunError('--executor ray needs Ray: pip install "evalrun[ray]"') from None
    return ray


class _Worker:
    """One provider (or none), built once in the actor's process; runs tasks on chunks."""

    def __init__(self, model: ModelSpec | None, provider_options: Mapping[str, Any]) -> None:
        self.provider = make_provider(model, **provider_options) if model is not None else None

    def batch_size(self) -> int:
        return max(1, int(getattr(self.provider, "batch_size", 1) or 1))

    def run(self, task: Task, indexed: list[tuple[int, Any]], with_provider: bool) -> list[tuple[int, Any]]:
        out: list[tuple[int, Any]] = []
        index = {id(value): i for i, value in indexed}
        task(self.provider if with_provider else None, [value for _, value in indexed],
             lambda value, answer: out.append((index[id(value)], answer)))
        return out

    def close(self) -> None:
        if self.provider is not None:
            self.provider.close()


def gpus_per_actor() -> float:
    """``EVALRUN_RAY_GPUS_PER_ACTOR``: the share of a GPU each actor holding a model asks for."""
    text = os.environ.get(ENV_GPUS, "").strip() or "0"
    try:
        gpus = float(text)
    except ValueError:
        gpus = -1.0
    if not (0 <= gpus < math.inf):
        raise EvalrunError(f"{ENV_GPUS}={text!r}: expected a number of GPUs >= 0 (e.g. 1 or 0.5)")
    return gpus


def chunk_size(inputs: int, actors: int, batch: int) -> int:
    """Inputs per chunk: about :data:`CHUNKS_PER_ACTOR` chunks per actor, rounded up to whole
    provider batches."""
    size = max(1, math.ceil(inputs / (actors * CHUNKS_PER_ACTOR)))
    return math.ceil(size / batch) * batch


class RayExecutor(Executor):
    """Calls spread over Ray actors; answers reach the sink here as each chunk returns."""

    #: ``--workers`` sizes the actor pool, not pytest-xdist
    runs_workers = True

    def __init__(self, *, ray_address: str | None = None, workers: int = 2,
                 provider_options: Mapping[str, Any] | None = None, **_: Any) -> None:
        self.address = ray_address
        self.actors = max(1, int(workers))
        self.provider_options = {k: v for k, v in (provider_options or {}).items() if v is not None}
        self._model: ModelSpec | None = None
        self._pool: list[Any] = []

    def _ray(self) -> Any:
        ray = _import_ray()
        if not ray.is_initialized():
            if self.address:
                ray.init(address=self.address, log_to_driver=False)
            else:
                ray.init(num_cpus=max(self.actors, os.cpu_count() or 1), log_to_driver=False,
                         include_dashboard=False)
        return ray

    def _workers(self, ray: Any, model: ModelSpec | None) -> list[Any]:
        if self._pool and (self._model == model or model is None):
            return self._pool
        self.close()
        gpus = gpus_per_actor() if model is not None else 0.0
        if gpus:
            # an actor Ray cannot place waits for ever: say so instead
            have = float(ray.cluster_resources().get("GPU", 0))
            if gpus * self.actors > have:
                raise EvalrunError(
                    f"--executor ray: {self.actors} actors x {ENV_GPUS}={gpus:g} ask for "
                    f"{gpus * self.actors:g} GPUs; the Ray cluster has {have:g} (lower --workers "
                    f"or {ENV_GPUS})")
        worker = ray.remote(num_cpus=1, num_gpus=gpus)(_Worker)
        self._pool = [worker.remote(model, self.provider_options) for _ in range(self.actors)]
        self._model = model
        return self._pool

    def map(self, model: ModelSpec | None, task: Task, inputs: Sequence[Any], sink: Emit,
            make_provider: ProviderFactory) -> None:
        if not inputs:
            return
        ray = self._ray()
        what = model or "text attacks"
        try:
            workers = self._workers(ray, model)
            batch = ray.get(workers[0].batch_size.remote()) if model is not None else 1
        except EvalrunError:
            self.close()
            raise
        except Exception as exc:  # an actor that could not build its provider
            self.close()
            raise EvalrunError(f"--executor ray: {what}: {getattr(exc, 'cause', None) or exc}") from None
        size = chunk_size(len(inputs), len(workers), batch)
        indexed = list(enumerate(inputs))
        pending = {workers[n % len(workers)].run.remote(task, indexed[start:start + size], model is not None): None
                   for n, start in enumerate(range(0, len(indexed), size))}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    del pending[ref]
                    try:
                        answers = ray.get(ref)
                    except Exception as exc:  # a task that raised, or an actor that died
                        raise EvalrunError(f"--executor ray: {what}: {getattr(exc, 'cause', None) or exc}") from None
                    for i, answer in answers:
                        sink(inputs[i], answer)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if not self._pool:
            return
        ray = _import_ray()
        for actor in self._pool:
            try:
                ray.get(actor.close.remote())
            except Exception:  # noqa: BLE001 - a dead actor has nothing left to close
                pass
            ray.kill(actor)
        self._pool, self._model = [], None
