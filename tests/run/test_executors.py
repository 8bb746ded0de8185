"""Executors: every stage's model calls go through the run's executor (one registered by a
test here, recording what it is asked), and Ray chunks are whole provider batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pytest

from evalrun.model.providers import ModelSpec
from evalrun.run.executors import EXECUTORS, Emit, LocalExecutor, ProviderFactory, Task
from evalrun.run.ray_executor import chunk_size


class Recording(LocalExecutor):
    """The in-process executor, noting each call's model, task and number of inputs."""

    calls: list[tuple[str | None, str, int]] = []

    def map(self, model: ModelSpec | None, task: Task, inputs: Sequence[Any], sink: Emit,
            make_provider: ProviderFactory) -> None:
        name = getattr(getattr(task, "func", task), "__name__", "?")
        Recording.calls.append((None if model is None else str(model), name, len(inputs)))
        super().map(model, task, inputs, sink, make_provider)


@pytest.fixture
def recording():
    EXECUTORS.register("recording", Recording)
    Recording.calls = []
    try:
        yield Recording.calls
    finally:
        EXECUTORS._objects.pop("recording")


def test_generations_attacks_and_judges_all_go_through_the_executor(pytester: pytest.Pytester, make_pack,
                                                                    recording, embedded_model_loaded) -> None:
    make_pack(root=pytester.path / "packs")  # 4 cases, reference solver
    result = pytester.runpytest("packs", "--evalrun-executor", "recording", "--evalrun-attack", "none",
                                "--evalrun-attack", "swap:p=0.5", "--evalrun-attack", "paraphrase:embedded",
                                "--evalrun-judge", "perplexity:embedded", "--evalrun-max-tokens", "4")
    assert result.ret in (0, 1), result.stdout.str()[-2000:]
    assert recording[0] == ("reference", "generation_task", 4)
    assert sorted(recording[1:3], key=repr) == [("embedded", "model_attack_task", 4), (None, "text_attack_task", 4)]
    assert recording[3:] == [("embedded", "score_task", 1)]  # 12 questions: one fixed chunk of them


@pytest.mark.parametrize(("inputs", "actors", "batch", "size"), [
    (100, 2, 1, 13), (100, 2, 16, 16), (3, 2, 16, 16), (8, 2, 2, 2), (40, 2, 3, 6), (1, 4, 1, 1)])
def test_ray_chunks_are_whole_provider_batches(inputs: int, actors: int, batch: int, size: int) -> None:
    assert chunk_size(inputs, actors, batch) == size


@pytest.mark.parametrize("executor, xdist, executor_workers", [("local", "3", "2"), ("ray", None, "3")])
def test_workers_sizes_the_executors_own_workers_or_else_xdist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               executor: str, xdist: str | None,
                                                               executor_workers: str) -> None:
    """``evalrun run --workers N``: N pytest-xdist grading processes with the local executor,
    N Ray actors per model with ``--executor ray`` (and then no xdist: one process writes)."""
    from evalrun.cli.main import build_parser
    from evalrun.cli.run import _pytest_args, _run_values

    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["run", "--pack", "watermark_robustness", "--model", "reference",
                                      "--executor", executor, "--workers", "3", "--out", str(tmp_path / "r.db")])
    out = _pytest_args(args, _run_values(args, None), "run-id", [])
    assert (out[out.index("-n") + 1] if "-n" in out else None) == xdist
    assert out[out.index("--evalrun-executor-workers") + 1] == executor_workers
