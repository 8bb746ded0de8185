"""Input checks shared by the metrics and the commands: errors name the offending entry."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from evalrun._util.errors import EvalrunError

#: the most new tokens a generation may ask for (--max-tokens, a pack's [defaults] max_tokens):
#: beyond it a value is a typo, not a plan
MAX_NEW_TOKENS = 1_000_000
#: the sampling temperatures taken (--temperature, a pack's [defaults] temperature)
TEMPERATURE_RANGE = (0.0, 5.0)


def _shown(bound: float) -> str:
    """A bound as a reader writes it: 16,777,216, not 1.67772e+07."""
    return f"{int(bound):,}" if float(bound).is_integer() and abs(bound) >= 1e4 else f"{bound:g}"


def between(lo: float, hi: float) -> Callable[[Any], str | None]:
    """A check of a number in [lo, hi]: None when it is (or is None), else the problem, worded
    for the option or the pack.toml key it follows. One rule for the command line, pyproject's
    [tool.evalrun] and pack.toml."""
    def check(v: Any) -> str | None:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"must be a number in [{_shown(lo)}, {_shown(hi)}]"
        if isinstance(v, int):  # exact: 2**63 is not a float's neighbour of it
            return None if lo <= v <= hi else f"must be in [{_shown(lo)}, {_shown(hi)}]"
        if not math.isfinite(v):  # NaN passes no comparison, infinity fails one: say which it is
            return f"must be a finite number in [{_shown(lo)}, {_shown(hi)}]"
        return None if lo <= v <= hi else f"must be in [{_shown(lo)}, {_shown(hi)}]"
    return check


def finite_number(text: str, where: str, *, integer: bool = False,
                  error: type[EvalrunError] = EvalrunError) -> float:
    """``text`` as a finite number (an integer with ``integer``); NaN, infinities and words
    are an ``error`` naming ``where``."""
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise error(f"{where}: {text!r} is not {'an integer' if integer else 'a number'}") from None
    if not math.isfinite(value):
        raise error(f"{where}: {text!r} is not a finite number")
    return value


def check_p_threshold(threshold: float) -> None:
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"p-value threshold must be in (0, 1], got {threshold!r}")


def p_value_array(values: Sequence[float], name: str = "p_values") -> np.ndarray:
    """1-D float array of p-values; NaN or values outside [0, 1] are errors."""
    p = np.asarray(values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {p.shape}")
    bad = np.flatnonzero(~((p >= 0.0) & (p <= 1.0)))  # the comparison is False for NaN
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name}[{i}] = {p[i]!r} is not a p-value in [0, 1]")
    return p


def score_array(values: Sequence[float], name: str) -> np.ndarray:
    """1-D float array of scores; NaN is an error, +-inf is allowed."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {x.shape}")
    bad = np.flatnonzero(np.isnan(x))
    if bad.size:
        raise ValueError(f"{name}[{int(bad[0])}] is NaN")
    return x


def check_fpr(fpr: float) -> None:
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"target false positive rate must be in [0, 1], got {fpr!r}")


def pairs_array(x: Sequence[float], y: Sequence[float]) -> np.ndarray:
    """``n x 2`` array of finite (x, y) pairs from two equally long 1-D sequences."""
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    if xa.ndim != 1 or ya.ndim != 1:
        raise ValueError(f"x and y must be one-dimensional, got shapes {xa.shape} and {ya.shape}")
    if xa.shape != ya.shape:
        raise ValueError(f"x and y differ in length: {xa.size} vs {ya.size}")
    for name, a in (("x", xa), ("y", ya)):
        bad = np.flatnonzero(~np.isfinite(a))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{name}[{i}] = {a[i]!r} is not a finite number")
    return np.column_stack([xa, ya])
