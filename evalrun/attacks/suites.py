"""Attack suites (``--attack-suite NAME|PATH``): named lists of attack specs kept as data files.

A suite is a TOML file::

    description = "what the suite is for"          # optional
    attacks = ["swap:p=0.1", "translate:fr:{translator}", ...]

    [placeholders]                                  # optional: what each {name} stands for
    translator = "model spec of the translation model"

Shipped suites live in ``evalrun/attacks/suites/<name>.toml`` (``mmw``: MarkMyWords' grid of
MarkMyWords; ``quick``: a few cheap offline attacks). An argument that ends in ``.toml`` or
contains a path separator is a user's file; anything else is the name of a shipped suite.

The loader checks the file's shape and the spec *syntax* only: it does not look names up in
the attack registry, because a suite may name attacks that another package provides (model
attacks such as ``translate:<lang>:<model-spec>``). ``{name}`` placeholders in a spec are
returned as they are unless values are passed with ``fill``.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from evalrun._util.errors import SpecError
from evalrun._util.specs import parse_spec

OPTION = "--attack-suite"
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KEYS = {"description", "attacks", "placeholders"}


@dataclass(frozen=True)
class Suite:
    """A suite file, read and checked."""

    name: str
    path: str
    attacks: tuple[str, ...]
    description: str = ""
    #: placeholder name -> what it stands for
    placeholders: dict[str, str] = field(default_factory=dict)

    def fill(self, values: Mapping[str, str]) -> list[str]:
        """The specs with every ``{name}`` replaced by ``values[name]``; a missing value is an error."""
        out = []
        for spec in self.attacks:
            missing = sorted({m for m in PLACEHOLDER.findall(spec) if m not in values})
            if missing:
                about = "; ".join(f"{{{m}}}: {self.placeholders[m]}" for m in missing if m in self.placeholders)
                raise SpecError(f"{OPTION} {self.name}: attack {spec!r} needs a value for "
                                f"{', '.join('{' + m + '}' for m in missing)}" + (f" ({about})" if about else ""))
            out.append(PLACEHOLDER.sub(lambda m: values[m.group(1)], spec))
        return out


def shipped_suites() -> list[str]:
    """Names of the suites that ship with evalrun."""
    folder = resources.files("evalrun.attacks").joinpath("suites")
    return sorted(entry.name[:-5] for entry in folder.iterdir() if entry.name.endswith(".toml"))


def _is_path(name_or_path: str | os.PathLike[str]) -> bool:
    text = os.fspath(name_or_path)
    return isinstance(name_or_path, os.PathLike) or text.endswith(".toml") or "/" in text or os.sep in text


def read_suite(name_or_path: str | os.PathLike[str]) -> Suite:
    """Read a shipped suite by name, or a user's suite file by path."""
    arg = os.fspath(name_or_path)
    if _is_path(name_or_path):
        path = Path(arg).expanduser()
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"{OPTION} {arg}: cannot read {path}: {exc.strerror or exc}") from None
        where = str(path)
    else:
        entry = resources.files("evalrun.attacks").joinpath("suites", f"{arg}.toml")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", arg) or not entry.is_file():
            raise SpecError(f"{OPTION} {arg}: no shipped suite {arg!r}; shipped: {', '.join(shipped_suites())}"
                            " (or give the path of a .toml file)")
        raw = entry.read_text(encoding="utf-8")
        where = f"evalrun/attacks/suites/{arg}.toml"
    return _parse(arg, where, raw)


def _parse(arg: str, where: str, raw: str) -> Suite:
    def fail(message: str) -> SpecError:
        return SpecError(f"{OPTION} {arg}: {where}: {message}")

    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise fail(f"not valid TOML: {exc}") from None
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise fail(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_KEYS))}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise fail("description must be a string")
    placeholders = data.get("placeholders", {})
    if not isinstance(placeholders, dict) or not all(isinstance(v, str) for v in placeholders.values()):
        raise fail("[placeholders] must map each name to a string saying what it stands for")
    attacks = data.get("attacks")
    if not isinstance(attacks, list) or not attacks:
        raise fail("attacks must be a non-empty list of attack specs")
    specs: list[str] = []
    for i, spec in enumerate(attacks):
        if not isinstance(spec, str) or not spec.strip():
            raise fail(f"attacks[{i}] must be a non-empty string, got {spec!r}")
        spec = spec.strip()
        parse_spec(spec, what=f"{OPTION} {arg}: {where}: attacks[{i}]")
        if spec in specs:
            raise fail(f"attacks[{i}] {spec!r} repeats attacks[{specs.index(spec)}]")
        specs.append(spec)
    name = Path(where).stem
    return Suite(name=name if where.endswith(".toml") else arg, path=where, attacks=tuple(specs),
                 description=description, placeholders=dict(placeholders))


def load_suite(name_or_path: str | os.PathLike[str], *, fill: Mapping[str, str] | None = None) -> list[str]:
    """The attack specs of a suite, in file order.

    Without ``fill``, ``{placeholder}`` specs come back as written (``translate:fr:{translator}``);
    with it, placeholders are replaced and one without a value is a :class:`SpecError`.
    """
    suite = read_suite(name_or_path)
    return suite.fill(fill) if fill is not None else list(suite.attacks)
