"""A time limit on a pack's own code (its grader), so that one looping grader cannot hang a
run: past the limit the call is stopped with :class:`TimeLimitExceeded` and the item is a
``GRADER_ERROR`` saying so; the run goes on.

The limit is a ``SIGALRM`` timer, so it holds where graders run: on the main thread of the
process (pytest's items, ``regrade``, ``tune``). Elsewhere the call runs without one. Python
code is stopped between two of its instructions; a single long call into C (one huge regular
expression match) is stopped when it returns.
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

#: the default per-item limit of a grader (``--grader-timeout``), seconds
DEFAULT_GRADER_TIMEOUT = 60.0


class TimeLimitExceeded(BaseException):
    """Raised inside a call that ran past its limit. A BaseException, so that a grader's own
    ``except Exception`` cannot swallow it."""


def call_with_limit(fn: Callable[..., T], seconds: float | None, *args: Any) -> T:
    """``fn(*args)``, stopped after ``seconds`` (None or 0: no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        return fn(*args)

    def stop(signum: int, frame: Any) -> None:
        raise TimeLimitExceeded(f"timed out after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
