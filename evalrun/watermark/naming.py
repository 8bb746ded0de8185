"""Short names of watermark specs, for what a person reads (tables, chart titles, the viewer).

A canonical spec fills in every default (``kgw:context=1,delta=2.0,gamma=0.5,randomness=window,
repeats=ignore,score=sum,skip=0.0``), which is right for the store, cache keys and exports but
crowds the numbers out of a table. The short name keeps the scheme and the parameters that differ
from its defaults (``kgw γ=0.5``). A default is what the scheme's own builder fills in when the
parameter is left out, so a scheme added by a plugin is shortened without registering anything.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from evalrun._util.errors import EvalrunError
from evalrun._util.specs import Spec, is_none, parse_spec
from evalrun.watermark.registry import build_scheme

#: parameters written as the symbol the papers use
SYMBOLS = {"gamma": "γ", "delta": "δ", "alpha": "α"}


def short_name(spec: str) -> str:
    """``spec`` without its default parameters; a text that is not a scheme's spec (``none``,
    an unknown scheme, an attack) comes back unchanged."""
    return _short(spec)


def short_names(specs: Iterable[str]) -> dict[str, str]:
    """Each spec's short name, except that specs whose short names coincide keep their full
    text, so that two setups never read alike."""
    specs = list(dict.fromkeys(specs))
    short = {s: _short(s) for s in specs}
    seen: dict[str, int] = {}
    for name in short.values():
        seen[name] = seen.get(name, 0) + 1
    return {s: (name if seen[name] == 1 else s) for s, name in short.items()}


@lru_cache(maxsize=1024)
def _short(text: str) -> str:
    if is_none(text):
        return text
    try:
        spec = parse_spec(text, what="--watermark")
        if spec.arg is not None or not spec.params:
            return text
        build_scheme(spec)
        kept = [(k, v) for k, v in spec.params.items() if not _is_default(spec, k, v)]
    except EvalrunError:
        return text
    return " ".join([spec.name, *(f"{SYMBOLS.get(k, k)}={_number(v)}" for k, v in sorted(kept))])


def _is_default(spec: Spec, key: str, value: str) -> bool:
    """Whether leaving ``key`` out builds the same scheme (a required key never is)."""
    rest = {k: v for k, v in spec.params.items() if k != key}
    try:
        built = build_scheme(Spec(name=spec.name, params=rest)).spec
    except EvalrunError:
        return False
    return built.params.get(key) == value and built.name == spec.name


def _number(value: str) -> str:
    """``2.0`` as ``2``; any other value as written (``0.0001`` stays exact)."""
    try:
        number = float(value)
    except ValueError:
        return value
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 and "e" not in value.lower() else value
