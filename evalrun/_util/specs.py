"""The one spec grammar shared by models, watermarks and attacks: ``<name>[:<arg>]``.

``<arg>`` is either ``key=value`` pairs separated by commas (``kgw:gamma=0.5,delta=2``) or a
single free argument (``openai:gpt-4o-mini``, ``translate:hf:/models/m``, ``replay:out.jsonl``).
Parsing is purely syntactic; each registry (providers, watermark schemes, attacks) validates
the names and keys it owns.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from evalrun._util.errors import SpecError

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_none(text: str | None) -> bool:
    """The one definition of "none" for a watermark or an attack: absent, empty or ``none``."""
    return text is None or text.strip().lower() in ("", "none")


@dataclass(frozen=True)
class Spec:
    """A parsed spec. ``params`` keeps key=value pairs; ``arg`` keeps a free argument."""

    name: str
    params: dict[str, str] = field(default_factory=dict)
    arg: str | None = None

    def canonical(self) -> str:
        """Stable text form (sorted keys) used in item ids, cache keys and the store."""
        if self.arg is not None:
            return f"{self.name}:{self.arg}"
        if not self.params:
            return self.name
        body = ",".join(f"{k}={self.params[k]}" for k in sorted(self.params))
        return f"{self.name}:{body}"

    def __str__(self) -> str:
        return self.canonical()


def parse_spec(text: str, *, what: str = "spec", free_arg: bool = False) -> Spec:
    """Parse ``text``; ``what`` names the option in error messages (e.g. ``--watermark``).

    With ``free_arg`` the part after the first colon is always one free argument (model
    specs: paths and model names may contain ``=`` or ``,``).
    """
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f"{what}: empty spec")
    text = text.strip()
    name, sep, rest = text.partition(":")
    if not _NAME.match(name):
        raise SpecError(f"{what} {text!r}: bad name {name!r} (letters, digits, '_', '-', '.')")
    if not sep:
        return Spec(name=name)
    if not rest:
        raise SpecError(f"{what} {text!r}: nothing after ':'")
    if free_arg or "=" not in rest:
        return Spec(name=name, arg=rest)
    params: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not _KEY.match(key) or value == "":
            raise SpecError(f"{what} {text!r}: expected key=value, got {part!r}")
        if key in params:
            raise SpecError(f"{what} {text!r}: key {key!r} given twice")
        params[key] = value
    return Spec(name=name, params=params)


def spec_float(spec: Spec, key: str, default: float, *, what: str, lo: float | None = None,
               hi: float | None = None) -> float:
    """Read a float parameter with range checking and an error naming the spec and key."""
    raw = spec.params.get(key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SpecError(f"{what} {spec}: {key}={raw!r} is not a number") from None
    if not math.isfinite(value):  # NaN passes every range comparison
        raise SpecError(f"{what} {spec}: {key}={raw} is not a finite number")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise SpecError(f"{what} {spec}: {key}={raw} out of range [{lo}, {hi}]")
    return value


def spec_int(spec: Spec, key: str, default: int, *, what: str, lo: int | None = None,
             hi: int | None = None) -> int:
    """Read an integer parameter with range checking."""
    raw = spec.params.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SpecError(f"{what} {spec}: {key}={raw!r} is not an integer") from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise SpecError(f"{what} {spec}: {key}={raw} out of range [{lo}, {hi}]")
    return value


def check_keys(spec: Spec, allowed: set[str] | frozenset[str], *, what: str) -> None:
    """Reject unknown keys, listing the allowed ones."""
    unknown = sorted(set(spec.params) - set(allowed))
    if unknown:
        raise SpecError(
            f"{what} {spec}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed)) or 'none'}"
        )
