"""Test helpers that ship with evalrun, for its own tests, its benchmarks and users' CI.

:mod:`evalrun.testing.chat_server` is a local OpenAI-compatible chat-completions server with
scripted replies and fault injection, so the ``openai:`` provider can be exercised over real
HTTP without network access. Names are imported lazily, so that
``python -m evalrun.testing.chat_server`` runs the module only once.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalrun.testing.chat_server import (
        ChatServer,
        Fault,
        FaultPlan,
        FaultRule,
        RequestRecord,
        echo_responder,
    )

__all__ = ["ChatServer", "Fault", "FaultPlan", "FaultRule", "RequestRecord", "echo_responder"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("evalrun.testing.chat_server"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
