"""evalrun: deterministic evaluation of LLM text watermarks and rule-following.

The names below are the pack author's and plugin author's API. They load on first use, so
``import evalrun`` stays cheap (no torch, no numpy).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evalrun._util import legacy
from evalrun._util.version import __version__

#: public name -> the module that defines it
_API = {
    "Grade": "evalrun.pack.grade",
    "GradeContext": "evalrun.pack.grade",
    "Judgement": "evalrun.pack.grade",
    "EvalrunError": "evalrun._util.errors",
    "Registry": "evalrun._util.registry",
    "text_attack": "evalrun.attacks.base",
    "ATTACKS": "evalrun.attacks.base",
    "SCHEMES": "evalrun.watermark.registry",
    "PROVIDERS": "evalrun.model.providers",
    "JUDGES": "evalrun.judges",
    "AGGREGATES": "evalrun.metrics.aggregates",
}

__all__ = ["AGGREGATES", "ATTACKS", "JUDGES", "PROVIDERS", "SCHEMES", "EvalrunError", "Grade",
           "GradeContext", "Judgement", "Registry", "__version__", "text_attack"]

legacy.install()

if TYPE_CHECKING:
    from evalrun._util.errors import EvalrunError
    from evalrun._util.registry import Registry
    from evalrun.attacks.base import ATTACKS, text_attack
    from evalrun.judges import JUDGES
    from evalrun.metrics.aggregates import AGGREGATES
    from evalrun.model.providers import PROVIDERS
    from evalrun.pack.grade import Grade, GradeContext, Judgement
    from evalrun.watermark.registry import SCHEMES


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'evalrun' has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value
    return value
