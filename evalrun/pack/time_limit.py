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


class RaisedInterrupt(Exception):
    """A pack's code raised KeyboardInterrupt itself, with no Ctrl-C or SIGTERM behind it: an
    error of that item, as ``sys.exit`` is, not the end of the run."""


def call_with_limit(fn: Callable[..., T], seconds: float | None, *args: Any) -> T:
    """``fn(*args)``, stopped after ``seconds`` (None or 0: no limit). A KeyboardInterrupt
    that no signal caused (the code raised it) comes out as :class:`RaisedInterrupt`; Ctrl-C
    and SIGTERM still stop the run. Both need the main thread; elsewhere the call runs as it
    is."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    _count_stops()
    seen = _stops_seen()
    previous = None
    if seconds:
        def stop(signum: int, frame: Any) -> None:
            raise TimeLimitExceeded(f"timed out after {seconds:g} s")

        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args)
    except KeyboardInterrupt:
        if _stops_seen() != seen:
            raise
        raise RaisedInterrupt("raised KeyboardInterrupt (no Ctrl-C or SIGTERM was sent)") from None
    finally:
        if seconds:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


#: the signals that stop a run (evalrun's run turns SIGTERM into KeyboardInterrupt as Ctrl-C is)
_STOPS = (signal.SIGINT, signal.SIGTERM)


def _stops_seen() -> int:
    """How many stop signals the installed counting handlers have seen: a KeyboardInterrupt
    with no new one behind it was raised by the code itself. The count lives on the handler, not
    in this module, so that a second import of the module (an in-process pytest run drops the
    modules it imported) reads the handler the first one installed."""
    return sum(getattr(signal.getsignal(sig), "stops_seen", [0])[0] for sig in _STOPS)


def _count_stops() -> None:
    """Wrap the handlers of :data:`_STOPS` (once; again after someone replaces them) so that
    each arrival is counted before the handler runs. The wrapper calls the handler it wraps, so
    what a signal does is unchanged; SIG_DFL and SIG_IGN are left as they are."""
    for sig in _STOPS:
        handler = signal.getsignal(sig)
        if callable(handler) and not getattr(handler, "counts_stops", False):
            signal.signal(sig, _counting(handler))


def _counting(handler: Callable[[int, Any], Any]) -> Callable[[int, Any], Any]:
    seen = [0]

    def counted(signum: int, frame: Any) -> None:
        seen[0] += 1
        handler(signum, frame)

    counted.counts_stops = True  # type: ignore[attr-defined]
    counted.stops_seen = seen  # type: ignore[attr-defined]
    return counted
