"""Stop signals against KeyboardInterrupts a grader raises itself, across a second import of
the module (an in-process pytest run drops the modules it imported, and the next imports them
anew while the first import's signal handlers are still installed)."""

from __future__ import annotations

import importlib
import os
import signal
import sys

import pytest

import evalrun.pack
from evalrun.pack import time_limit


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def _raises() -> None:
    raise KeyboardInterrupt


def test_a_real_ctrl_c_stops_and_a_raised_one_is_the_items_error() -> None:
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            time_limit.call_with_limit(_ctrl_c, None)
        with pytest.raises(time_limit.RaisedInterrupt):
            time_limit.call_with_limit(_raises, None)
        # a second module object (sys.modules emptied of it, as pytester does) finds the
        # handlers the first one wrapped, and their count
        del sys.modules[time_limit.__name__]
        again = importlib.import_module(time_limit.__name__)
        assert again is not time_limit
        with pytest.raises(KeyboardInterrupt):
            again.call_with_limit(_ctrl_c, None)
        with pytest.raises(again.RaisedInterrupt):
            again.call_with_limit(_raises, None)
    finally:
        sys.modules[time_limit.__name__] = time_limit
        evalrun.pack.time_limit = time_limit  # the package's attribute as it was
        signal.signal(signal.SIGINT, before)
