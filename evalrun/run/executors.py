"""Where a run's model calls execute: ``--executor local`` (this process, the default) or
``--executor ray`` (Ray actors, :mod:`evalrun.run.ray_executor`, ``pip install "evalrun[ray]"``).

One primitive serves every stage: :meth:`Executor.map` runs a :data:`Task` over a stage's
unique calls (generations, attack rewrites, text attacks, judge questions) with the named
model's provider, and hands each answer to the stage's ``sink`` in this process. Whatever the
executor, results come back to the one process that writes the store: SQLite keeps a single
writer and resume works unchanged. Every call is a function of its input alone (generation
seeds come from the request, text attacks from :func:`~evalrun.run.stages.transform.attack_seed`,
attack and judge calls are greedy with seed 0), so spreading calls over processes changes
where they run, never what they return.

Executors register in :data:`EXECUTORS` (third-party ones through the ``evalrun.executors``
entry-point group) under the name ``--executor`` gives; a stage never asks which one it has.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Sequence

from evalrun._util.registry import Registry
from evalrun.model.generation import Generation, GenerationRequest, Provider
from evalrun.model.providers import ModelSpec

Sink = Callable[[GenerationRequest, Generation], None]
#: builds a model's provider from its spec
ProviderFactory = Callable[[ModelSpec], Provider]
#: ``emit(input, output)``: one input's answer, called as soon as it is known
Emit = Callable[[Any, Any], None]
#: ``task(provider, inputs, emit)``: the work of a stage on some of its inputs, with the
#: model's provider (None for work that needs no model), calling ``emit`` once per input.
#: Tasks travel to other processes: a module-level function or a ``functools.partial`` of
#: one with picklable arguments, and every input a distinct object.
Task = Callable[[Any, list[Any], Emit], None]


def generation_task(provider: Provider, requests: list[GenerationRequest], emit: Emit) -> None:
    """Generations by the provider (its own batching and API concurrency apply)."""
    provider.generate(list(requests), emit)


class Executor(ABC):
    """Runs a stage's calls and calls the stage's ``sink`` in this process for each answer.
    Use it as a context manager: :meth:`close` releases what it holds between calls."""

    #: whether the executor runs workers of its own (built with ``workers=N``): ``evalrun run
    #: --workers N`` then sizes them; otherwise it means N pytest-xdist grading processes
    runs_workers: ClassVar[bool] = False

    @abstractmethod
    def map(self, model: ModelSpec | None, task: Task, inputs: Sequence[Any], sink: Emit,
            make_provider: ProviderFactory) -> None:
        """Run ``task`` over ``inputs`` with ``model``'s provider (built by ``make_provider`` in
        this process, or once per worker elsewhere); ``sink(input, output)`` for each input."""

    def generate(self, model: ModelSpec, requests: Sequence[GenerationRequest], sink: Sink,
                 make_provider: ProviderFactory) -> None:
        """One model's generation requests."""
        self.map(model, generation_task, requests, sink, make_provider)

    def close(self) -> None:
        """Release workers kept between calls (none by default)."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


EXECUTORS: Registry[type[Executor]] = Registry("executor", "evalrun.executors",
                                              option="--executor")


@EXECUTORS.register("local")
class LocalExecutor(Executor):
    """The provider in this process, built for each call and closed after it."""

    def __init__(self, **_: Any) -> None:
        pass

    def map(self, model: ModelSpec | None, task: Task, inputs: Sequence[Any], sink: Emit,
            make_provider: ProviderFactory) -> None:
        provider = make_provider(model) if model is not None else None
        try:
            task(provider, list(inputs), sink)
        finally:
            if provider is not None:
                provider.close()


EXECUTORS.register_lazy("ray", "evalrun.run.ray_executor:RayExecutor")


def make_executor(name: str, **options: Any) -> Executor:
    """The registered executor ``name`` built with the run's options."""
    return EXECUTORS.get(name)(**options)
