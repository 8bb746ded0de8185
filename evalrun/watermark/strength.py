"""Strength grids: how ``evalrun tune`` searches a scheme's strength (WaterBench, Tu et al.,
section 3.2 and Fig. 3). Each scheme that can be tuned defines its grid beside itself
(``STRENGTH_GRID`` in its module) and is listed here lazily; third-party schemes register
theirs through the ``evalrun.strength_grids`` entry-point group."""

from __future__ import annotations

from dataclasses import dataclass

from evalrun._util.registry import Registry


@dataclass(frozen=True)
class StrengthGrid:
    """How a scheme's strength is searched: ``outer`` at each of ``outer_values``, ``inner``
    bisected over ``inner_range`` (the TPR must grow with it)."""

    outer: str
    outer_values: tuple[float, ...]
    inner: str
    inner_range: tuple[float, float]
    #: the scheme's default outer value (ties go to the nearest)
    outer_default: float
    #: decimals the inner value is rounded to: short specs, exact cache hits
    decimals: int = 2


#: WaterBench's green-list grid (Fig. 3): gamma in {0.1, 0.25, 0.5, 0.75, 0.9}, delta from 0 to 15
GREEN_LIST_GRID = StrengthGrid("gamma", (0.1, 0.25, 0.5, 0.75, 0.9), "delta", (0.0, 15.0), outer_default=0.25)

STRENGTH_GRIDS: Registry[StrengthGrid] = Registry("strength grid", "evalrun.strength_grids", option="--scheme")
STRENGTH_GRIDS.register_lazy("kgw", "evalrun.watermark.schemes.kgw:STRENGTH_GRID")
STRENGTH_GRIDS.register_lazy("unigram", "evalrun.watermark.schemes.unigram:STRENGTH_GRID")
