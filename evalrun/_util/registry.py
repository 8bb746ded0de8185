"""One small registry for every extensible concept: attacks, watermark schemes, providers,
judges and metrics.

In-tree entries register with a decorator (``@ATTACKS.register("swap")``) or, when importing
their module is costly (torch, transformers), lazily by ``"module:attribute"``. Third-party
packages add entries through ``importlib.metadata`` entry points in the registry's group
(``evalrun.attacks``, ``evalrun.schemes``, ...): the entry point's name is the registered name
and its object is what ``get`` returns. An unknown name is an error listing the known ones.
"""

from __future__ import annotations

import importlib
from typing import Callable, Generic, Iterator, TypeVar

from evalrun._util.errors import SpecError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> object, filled by decorators, lazy references and entry points."""

    def __init__(self, kind: str, group: str, *, option: str) -> None:
        #: what the entries are, for messages ("attack", "watermark scheme")
        self.kind = kind
        #: entry-point group third-party packages register under
        self.group = group
        #: the command-line option that names entries, for messages ("--attack")
        self.option = option
        self._objects: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._plugins_loaded = False

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T]:
        """``@registry.register("name")`` above a definition, or ``register("name", obj)``."""
        def add(value: T) -> T:
            self._check_new(name)
            self._objects[name] = value
            return value

        if obj is not None:
            add(obj)
        return add

    def register_lazy(self, name: str, target: str) -> None:
        """Register ``"package.module:attribute"``, imported the first time it is asked for."""
        self._check_new(name)
        self._lazy[name] = target

    def _check_new(self, name: str) -> None:
        if not name or name.strip().lower() == "none":
            raise ValueError(f"{self.kind} name {name!r} is reserved")
        if name in self._objects or name in self._lazy:
            raise ValueError(f"{self.kind} {name!r} is registered twice")

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        from importlib import metadata  # ~20 ms of imports; only when a name is not in-tree

        found: dict[str, tuple[str, str]] = {}  # name -> (target, where it comes from)
        for ep in metadata.entry_points(group=self.group):
            source = _entry_point_source(ep)
            taken = found[ep.name][1] if ep.name in found else self._source(ep.name)
            if taken is not None:
                # neither may silently win: the user would run something else than they named
                raise SpecError(f"{self.kind} {ep.name!r} is registered twice: by {taken} and by {source}; "
                                f"uninstall one or rename its entry point in the {self.group!r} group")
            found[ep.name] = (ep.value, source)
        self._lazy.update({name: target for name, (target, _) in found.items()})
        self._plugins_loaded = True

    def _source(self, name: str) -> str | None:
        """Where an in-tree entry comes from, for error messages (None: not registered)."""
        if name in self._lazy:
            return f"evalrun ({self._lazy[name]})"
        if name in self._objects:
            module = getattr(self._objects[name], "__module__", None) or type(self._objects[name]).__module__
            return f"evalrun ({module})"
        return None

    def get(self, name: str) -> T:
        """The entry named ``name``; a :class:`SpecError` listing the known names otherwise."""
        if name in self._objects:
            return self._objects[name]
        if name not in self._lazy:
            self._load_plugins()
        target = self._lazy.get(name)
        if target is None:
            if name in self._objects:  # loaded meanwhile by another thread (the viewer serves on several)
                return self._objects[name]
            raise SpecError(f"{self.option} {name}: unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        module_name, _, attr = target.partition(":")
        try:
            value: object = importlib.import_module(module_name)
            for part in filter(None, attr.split(".")):
                value = getattr(value, part)
        except Exception as exc:  # a broken plugin names itself instead of crashing the run
            raise SpecError(f"{self.option} {name}: {self.kind} {target} cannot be loaded: "
                            f"{type(exc).__name__}: {exc}") from None
        self._objects[name] = value  # type: ignore[assignment]
        self._lazy.pop(name, None)  # another thread that loaded it too may have removed it
        return self._objects[name]

    def names(self) -> list[str]:
        self._load_plugins()
        return sorted({*self._objects, *self._lazy})

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def _entry_point_source(ep: object) -> str:
    """``the entry point 'name = module:attr' of package dist version``, as far as known."""
    dist = getattr(ep, "dist", None)
    package = f" of package {dist.name} {dist.version}" if dist is not None else ""
    return f"the entry point '{getattr(ep, 'name', '?')} = {getattr(ep, 'value', '?')}'{package}"
