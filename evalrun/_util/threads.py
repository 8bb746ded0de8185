"""How long torch's idle OpenMP threads spin before they sleep: short, so jobs share cores.

torch's CPU build runs its parallel regions on GNU OpenMP (libgomp), whose idle threads spin
for ``GOMP_SPINCOUNT`` = 300,000 iterations before sleeping. Alone on a machine
that is free speed; with several jobs on the same cores it is the classic oversubscription
trap: a spinning thread holds a core while the thread it waits for is descheduled. Three
copies of the README's main job on 2 cores took 17–29 minutes each against about 2 alone.

At 2,000 iterations a job alone takes about as long as with the default (153 and 158 s
against 152–154 s), and two or three jobs at once each finish within their fair share (0.93
and 0.95–0.96 of N × the time alone; docs/benchmarks.md, "Several jobs at once"). 20,000, the
setting before 2026-11-29's second measurement, kept three jobs within 1.33 but let two take
1.88. ``OMP_WAIT_POLICY=PASSIVE`` (sleep at once) costs a job alone about 8% in futex
wake-ups.

libgomp reads its settings once, when it is loaded (with ``import torch``), so this must run
before that: ``import evalrun`` calls it. Where torch was imported first, the setting still
reaches the processes the job starts (pytest-xdist workers, the unlearning runs). A setting
the user made is kept.

:func:`map_rows` spreads a decoding step's rows over as many threads as torch uses, for
processors whose per-row kernels release the GIL (Waterfall's legacy shuffles): their
threads block on a queue when idle, so they add no spinning of their own.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, MutableMapping, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: libgomp's spin count evalrun starts torch with, unless the user set one
SPIN_COUNT = "2000"

#: the user's settings that decide OpenMP's waiting; any one of them present: evalrun sets none
USER_SETTINGS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")


def share_cores(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set libgomp's spin count to :data:`SPIN_COUNT` unless the user chose how OpenMP waits.
    Returns whether it set it."""
    if any(name in environ for name in USER_SETTINGS):
        return False
    environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    return True


_POOL: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, size, pool)
_POOL_LOCK = threading.Lock()


def row_workers() -> int:
    """Threads for a step's per-row kernels that release the GIL: torch's intra-op thread
    count where torch is loaded (what ``OMP_NUM_THREADS`` or ``torch.set_num_threads`` chose
    for the model, so the processor uses the cores the forward pass uses and no more), else
    the CPUs this process may run on."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return max(1, int(torch.get_num_threads()))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return max(1, os.cpu_count() or 1)


def _pool(size: int) -> ThreadPoolExecutor:
    """The process's pool of at least ``size`` threads (made once per process, larger when
    more are asked for; a forked child makes its own)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid() or _POOL[1] < size:
            if _POOL is not None and _POOL[0] == os.getpid():
                _POOL[2].shutdown(wait=False)  # torch was given more threads: a larger pool
            _POOL = (os.getpid(), size, ThreadPoolExecutor(size, thread_name_prefix="evalrun-rows"))
        return _POOL[2]


def map_rows(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[fn(x) for x in items]``, split into :func:`row_workers` contiguous chunks run at
    once (the calling thread takes the first) when there are several rows and several
    workers. ``fn`` must release the GIL for this to gain anything (the compiled kernels
    do); results come back in ``items``' order, so nothing depends on the scheduling."""
    workers = min(row_workers(), len(items))
    if workers <= 1:
        return [fn(x) for x in items]
    pool = _pool(workers - 1)
    bounds = [len(items) * k // workers for k in range(workers + 1)]
    chunks = [items[a:b] for a, b in zip(bounds, bounds[1:])]
    rest = [pool.submit(lambda part: [fn(x) for x in part], part) for part in chunks[1:]]
    out = [fn(x) for x in chunks[0]]
    for future in rest:
        out.extend(future.result())
    return out


def map_blocks(fn: Callable[[int, int], object], n: int) -> None:
    """``fn(a, b)`` for ``[0, n)`` cut into one contiguous block of rows per thread
    :func:`map_rows` uses (fewer for fewer rows), all at once: for kernels that take a block
    of rows in one call and write their results in place."""
    if n <= 0:
        return
    blocks = max(1, min(row_workers(), n))
    bounds = [n * k // blocks for k in range(blocks + 1)]
    map_rows(lambda ab: fn(ab[0], ab[1]), list(zip(bounds, bounds[1:])))


def run_together(fn: Callable[[int], R], count: int) -> list[R]:
    """``[fn(0), ..., fn(count - 1)]``, each on a thread of its own, all at once: the calling
    thread runs ``fn(0)``, the pool the others. For kernels whose calls wait for each other
    (one row's chunks meeting at every layer), which a queue of one thread would deadlock;
    the pool is grown to ``count - 1`` threads, none of which waits on the caller."""
    if count <= 1:
        return [fn(0)] if count == 1 else []
    pool = _pool(count - 1)
    rest = [pool.submit(fn, k) for k in range(1, count)]
    out = [fn(0)]
    out.extend(future.result() for future in rest)
    return out
