"""How far a float result may drift between machines, for tests that compare against numbers
computed elsewhere (a reference implementation's output, a stored fixture).

Two classes of arithmetic drift (docs/reproducibility.md):

* **float32 model arithmetic** (a forward pass: logits, log-probabilities, entropies, token
  scores): BLAS and torch's vectorised kernels sum in another order on another CPU or thread
  count, and every logit moves by some units of float32 roundoff of the largest logit's
  magnitude. Measured on an AVX-512 machine against torch's portable kernels, MKL's SSE4.2
  path and one thread (2026-11-28): up to 9 units for the logits, 12 for quantities derived
  from them. :data:`FORWARD_PASS_ROUNDOFFS` allows 64.
* **float64 through SIMD transcendentals or BLAS** (``np.log``/``np.exp`` pick AVX-512 or
  scalar code by the CPU; dot products sum in the kernel's order): last-bit differences per
  operation, a few float64 roundoffs of the magnitude summed.

A bound is ``roundoffs x unit roundoff x magnitude``: the form of the classical forward-error
bound of a sum, ``|fl(sum x) - sum x| <= n u sum |x|``. A decision made from such values (a
threshold verdict, an argmax, a filter) is compared only where its margin exceeds the bound:
:func:`assert_clear_of` fails when a reference value sits too close to its threshold to be
judged the same way on another machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: unit roundoff of float32 and float64 (half the distance from 1 to the next number)
FLOAT32_ROUNDOFF = 2.0 ** -24
FLOAT64_ROUNDOFF = 2.0 ** -53
#: float32 roundoffs of max |logit| a forward-pass quantity may drift by between two CPUs
FORWARD_PASS_ROUNDOFFS = 64
#: float64 roundoffs of its value a special function (SciPy's ``ndtr``, ``gammaincc``; libm's
#: ``exp``/``log``; NumPy's SIMD ``log``) may differ by when built for another CPU: a few units
#: (arm64 against x86-64 under emulation, 2026-11-28); 64 allowed
SPECIAL_FUNCTION_ROUNDOFFS = 64


def float32_bound(magnitude: float, roundoffs: float = FORWARD_PASS_ROUNDOFFS) -> float:
    """The drift allowed to a float32 result carried at ``magnitude``."""
    return float(roundoffs * FLOAT32_ROUNDOFF * abs(magnitude))


def float64_bound(magnitude: Any, roundoffs: float = SPECIAL_FUNCTION_ROUNDOFFS) -> Any:
    """The drift allowed to a float64 result carried at ``magnitude`` (a number or an array)."""
    return roundoffs * FLOAT64_ROUNDOFF * np.abs(np.asarray(magnitude, dtype=np.float64))


def assert_within(actual: Any, expected: Any, bound: Any, what: str) -> None:
    """Every ``|actual - expected| <= bound`` (elementwise; ``bound`` broadcasts), infinities
    and NaNs equal where they occur; the failure names ``what``, the worst element and its
    deviation against the bound."""
    a, e = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
    finite = np.isfinite(a) & np.isfinite(e)
    assert np.array_equal(a[~finite], e[~finite], equal_nan=True), (
        f"{what}: non-finite values differ: {a[~finite]!r} != {e[~finite]!r}")
    dev = np.abs(np.where(finite, a, 0.0) - np.where(finite, e, 0.0))
    b = np.broadcast_to(np.asarray(bound, dtype=np.float64), a.shape)
    excess = np.where(finite, dev - b, -np.inf)
    if excess.size and excess.max() > 0:
        i = np.unravel_index(int(np.argmax(excess)), a.shape)
        raise AssertionError(f"{what}: |{float(a[i])!r} - {float(e[i])!r}| = {dev[i]:.3g} exceeds the float "
                             f"bound {b[i]:.3g} at index {tuple(int(k) for k in i)}")


def clear_of(values: Any, threshold: float, bound: Any) -> np.ndarray:
    """Which values lie further than ``bound`` (elementwise) from ``threshold``: a verdict drawn
    from those (above / below) is the same on any machine whose drift stays within the bound."""
    return np.abs(np.asarray(values, dtype=np.float64) - threshold) > np.asarray(bound, dtype=np.float64)


def assert_clear_of(values: Any, threshold: float, bound: Any, what: str) -> None:
    """Every value is :func:`clear_of` the threshold; the failure names the closest one."""
    v = np.asarray(values, dtype=np.float64)
    b = np.broadcast_to(np.asarray(bound, dtype=np.float64), v.shape)
    near = ~clear_of(v, threshold, b)
    if near.any():
        i = np.unravel_index(int(np.argmax(np.where(near, b - np.abs(v - threshold), -np.inf))), v.shape)
        raise AssertionError(f"{what}: {float(v[i])!r} lies {abs(float(v[i]) - threshold):.3g} from the "
                             f"threshold {threshold!r}, within the float bound {float(b[i]):.3g}: its "
                             "verdict may differ on another machine")
