"""evalrun starts torch's OpenMP threads with a short spin, unless the user chose otherwise;
map_rows spreads a step's rows over as many threads as torch uses."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evalrun._util import threads
from evalrun._util.threads import SPIN_COUNT, USER_SETTINGS, share_cores


def test_sets_the_spin_count_when_the_user_set_nothing() -> None:
    environ: dict[str, str] = {"PATH": "/bin"}
    assert share_cores(environ) is True
    assert environ == {"PATH": "/bin", "GOMP_SPINCOUNT": SPIN_COUNT}


@pytest.mark.parametrize("name", USER_SETTINGS)
def test_keeps_what_the_user_chose(name: str) -> None:
    environ = {name: "ACTIVE" if name == "OMP_WAIT_POLICY" else "300000"}
    assert share_cores(environ) is False
    assert environ == {name: environ[name]}


def _environment_seen_by_torch(extra: dict[str, str]) -> str:
    """GOMP_SPINCOUNT as a fresh ``import evalrun`` leaves it, and whether torch was still
    unloaded then (libgomp reads the variable when torch loads it)."""
    env = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS} | extra
    code = ("import sys, os, evalrun; "
            "print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_evalrun_sets_it_before_torch_loads() -> None:
    assert _environment_seen_by_torch({}) == f"{SPIN_COUNT} False"
    assert _environment_seen_by_torch({"GOMP_SPINCOUNT": "7"}) == "7 False"
    assert _environment_seen_by_torch({"OMP_WAIT_POLICY": "PASSIVE"}) == "None False"


# ---- map_rows: a step's rows on torch's threads ----------------------------------------------
def test_map_rows_keeps_order_and_runs_on_several_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    monkeypatch.setattr(threads, "row_workers", lambda: 3)
    seen: dict[int, str] = {}

    def work(x: int) -> int:
        time.sleep(0.01)  # releases the GIL, as the kernels do
        seen[x] = threading.current_thread().name
        return x * x

    assert threads.map_rows(work, list(range(10))) == [x * x for x in range(10)]
    assert len(set(seen.values())) == 3  # the calling thread and two of the pool's
    assert seen[0] == threading.current_thread().name  # the first chunk runs in the caller


def test_map_rows_runs_inline_with_one_worker_or_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    names: list[str] = []

    def work(x: int) -> int:
        names.append(threading.current_thread().name)
        return -x

    monkeypatch.setattr(threads, "row_workers", lambda: 1)
    assert threads.map_rows(work, [1, 2, 3]) == [-1, -2, -3]
    monkeypatch.setattr(threads, "row_workers", lambda: 4)
    assert threads.map_rows(work, [5]) == [-5]
    assert threads.map_rows(work, []) == []
    assert set(names) == {threading.current_thread().name}


@pytest.mark.parametrize(("workers", "n"), [(1, 5), (2, 5), (3, 2), (4, 9), (2, 0)])
def test_map_blocks_covers_the_rows_once_in_one_block_per_worker(
        monkeypatch: pytest.MonkeyPatch, workers: int, n: int) -> None:
    import threading
    import time

    monkeypatch.setattr(threads, "row_workers", lambda: workers)
    blocks: list[tuple[int, int, str]] = []

    def block(a: int, b: int) -> None:
        time.sleep(0.01)
        blocks.append((a, b, threading.current_thread().name))

    threads.map_blocks(block, n)
    spans = sorted((a, b) for a, b, _ in blocks)
    assert [i for a, b in spans for i in range(a, b)] == list(range(n))
    assert len(blocks) == (min(workers, n) if n else 0)
    assert all(b > a for a, b in spans)
    assert len({name for _, _, name in blocks}) == len(blocks)  # each on a thread of its own


def test_map_rows_raises_what_a_row_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "row_workers", lambda: 2)

    def work(x: int) -> int:
        if x == 7:
            raise ValueError("row 7")
        return x

    with pytest.raises(ValueError, match="row 7"):
        threads.map_rows(work, list(range(10)))


def test_row_workers_follow_torch_threads() -> None:
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        assert threads.row_workers() == 3
    finally:
        torch.set_num_threads(before)


def test_map_rows_grows_its_pool_when_torch_gets_more_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    def names(workers: int) -> set[str]:
        monkeypatch.setattr(threads, "row_workers", lambda: workers)
        seen: set[str] = set()

        def work(x: int) -> int:
            time.sleep(0.01)
            seen.add(threading.current_thread().name)
            return x

        assert threads.map_rows(work, list(range(8))) == list(range(8))
        return seen

    assert len(names(2)) == 2
    assert len(names(4)) == 4


@pytest.mark.parametrize("count", [0, 1, 2, 4])
def test_run_together_runs_each_call_on_a_thread_of_its_own_at_once(count: int) -> None:
    """Calls that wait for each other complete: every call is on its own thread and they
    overlap (a barrier of ``count`` parties would time out otherwise), results in order."""
    import threading

    barrier = threading.Barrier(count) if count else None
    seen: list[int] = []

    def call(k: int) -> int:
        assert barrier is not None
        barrier.wait(timeout=10)
        seen.append(threading.get_ident())
        return k * k

    assert threads.run_together(call, count) == [k * k for k in range(count)]
    assert len(set(seen)) == count
    if count:
        assert seen.count(threading.get_ident()) == 1  # the caller took one
