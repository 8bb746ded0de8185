"""evalrun: deterministic evaluation of LLM text watermarks and rule-following.

Two APIs, both loaded on first use so that ``import evalrun`` stays cheap (no torch, no numpy):

* the researcher's, for notebooks and scripts (docs/python-api.md): :func:`run`,
  :func:`open`, :func:`detect`, :func:`detect_many`, :func:`watermark`, and the classes they
  return (:class:`Run`, :class:`Store`, :class:`Table`, :class:`Watermark`, :class:`Detection`);
* the pack author's and plugin author's: ``Grade``, ``GradeContext``, the registries, ...

``evalrun.run`` and ``evalrun.watermark`` are also the names of sub-packages, and Python binds
a sub-package over its parent's attribute of the same name when it is imported. So those two
attributes hold a :class:`_CallablePackage`: called, it is the API function; otherwise it is
the package (``evalrun.run.options``, ``monkeypatch.setattr("evalrun.watermark...", ...)``).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

#: sub-package name -> (module, function) of the API function the name also stands for
_CALLABLE = {"run": ("evalrun.api.running", "run"), "watermark": ("evalrun.api.detecting", "watermark")}


class _CallablePackage:
    """A sub-package that is also an API function: calls go to the function, attributes to the
    package (read, set and deleted)."""

    def __init__(self, package: types.ModuleType, function: tuple[str, str]) -> None:
        object.__setattr__(self, "_package", package)
        object.__setattr__(self, "_function", function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module, name = object.__getattribute__(self, "_function")
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_package"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_package"), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(object.__getattribute__(self, "_package"), name)

    def __dir__(self) -> list[str]:
        return dir(object.__getattribute__(self, "_package"))

    def __repr__(self) -> str:
        module, name = object.__getattribute__(self, "_function")
        return f"<function evalrun.{name} ({module}.{name}), also the package {self._package.__name__}>"

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        module, name = object.__getattribute__(self, "_function")
        return getattr(importlib.import_module(module), name).__doc__


class _Facade(types.ModuleType):
    """The ``evalrun`` module: a sub-package bound over one of :data:`_CALLABLE`'s names keeps
    the API function callable."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _CALLABLE and isinstance(value, types.ModuleType):
            value = _CallablePackage(value, _CALLABLE[name])
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade

from evalrun._util import legacy  # noqa: E402 - after the facade's class: legacy imports sub-packages
from evalrun._util.threads import share_cores  # noqa: E402
from evalrun._util.version import __version__  # noqa: E402

#: public name -> (module, attribute) that defines it
_API = {
    "Grade": ("evalrun.pack.grade", "Grade"),
    "GradeContext": ("evalrun.pack.grade", "GradeContext"),
    "Judgement": ("evalrun.pack.grade", "Judgement"),
    "EvalrunError": ("evalrun._util.errors", "EvalrunError"),
    "Registry": ("evalrun._util.registry", "Registry"),
    "text_attack": ("evalrun.attacks.base", "text_attack"),
    "ATTACKS": ("evalrun.attacks.base", "ATTACKS"),
    "SCHEMES": ("evalrun.watermark.registry", "SCHEMES"),
    "PROVIDERS": ("evalrun.model.providers", "PROVIDERS"),
    "JUDGES": ("evalrun.judges", "JUDGES"),
    "AGGREGATES": ("evalrun.metrics.aggregates", "AGGREGATES"),
    # the Python API (docs/python-api.md)
    "Run": ("evalrun.api.running", "Run"),
    "open": ("evalrun.api.store", "open_results"),
    "Store": ("evalrun.api.store", "Store"),
    "Table": ("evalrun.api.table", "Table"),
    "detect": ("evalrun.api.detecting", "detect"),
    "detect_many": ("evalrun.api.detecting", "detect_many"),
    "Watermark": ("evalrun.api.detecting", "Watermark"),
    "Detection": ("evalrun.watermark.base", "Detection"),
}

__all__ = ["AGGREGATES", "ATTACKS", "JUDGES", "PROVIDERS", "SCHEMES", "Detection", "EvalrunError", "Grade",
           "GradeContext", "Judgement", "Registry", "Run", "Store", "Table", "Watermark", "__version__",
           "detect", "detect_many", "open", "run", "text_attack", "watermark"]

legacy.install()
share_cores()  # before anything imports torch: libgomp reads it once (evalrun/_util/threads.py)

if TYPE_CHECKING:
    from evalrun._util.errors import EvalrunError
    from evalrun._util.registry import Registry
    from evalrun.api.detecting import Watermark, detect, detect_many, watermark
    from evalrun.api.running import Run, run
    from evalrun.api.store import Store
    from evalrun.api.store import open_results as open
    from evalrun.api.table import Table
    from evalrun.attacks.base import ATTACKS, text_attack
    from evalrun.judges import JUDGES
    from evalrun.metrics.aggregates import AGGREGATES
    from evalrun.model.providers import PROVIDERS
    from evalrun.pack.grade import Grade, GradeContext, Judgement
    from evalrun.watermark.base import Detection
    from evalrun.watermark.registry import SCHEMES


def __getattr__(name: str) -> Any:
    if name in _CALLABLE:  # the sub-package, imported now, comes back wrapped by _Facade.__setattr__
        importlib.import_module(f"evalrun.{name}")
        return sys.modules[__name__].__dict__[name]
    if name not in _API:
        raise AttributeError(f"module 'evalrun' has no attribute {name!r}")
    module, attribute = _API[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value
