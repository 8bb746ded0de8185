"""Spec text -> :class:`WatermarkScheme`, importing each scheme module only when named.

Each scheme module exposes ``build(spec: Spec) -> WatermarkScheme`` that validates keys and
ranges and fills in defaults.
"""

from __future__ import annotations

import importlib

from evalrun.errors import SpecError
from evalrun.specs import Spec, parse_spec
from evalrun.watermark.base import WatermarkScheme

#: scheme name -> module holding its ``build``
SCHEME_MODULES: dict[str, str] = {
    "kgw": "evalrun.watermark.kgw",
    "exp": "evalrun.watermark.exponential",
    "binary": "evalrun.watermark.binary",
    "its": "evalrun.watermark.inverse_transform",
    "unigram": "evalrun.watermark.unigram",
}
#: reference-compatible kgw (Kirchenbauer et al.'s green lists) lives apart from native kgw
KGW_COMPAT_MODULE = "evalrun.watermark.kgw_compat"


def is_none(text: str | None) -> bool:
    return text is None or text.strip().lower() in ("", "none")


def parse_watermark(text: str) -> WatermarkScheme | None:
    """Build the scheme named by ``text``; ``none`` gives None. Errors name ``--watermark``."""
    if is_none(text):
        return None
    spec = parse_spec(text, what="--watermark")
    return build_scheme(spec)


def build_scheme(spec: Spec) -> WatermarkScheme:
    if spec.arg is not None:
        raise SpecError(f"--watermark {spec}: expected <scheme>:<key>=<value>,...")
    module_name = SCHEME_MODULES.get(spec.name)
    if module_name is None:
        raise SpecError(
            f"--watermark {spec}: unknown scheme {spec.name!r}; known: {', '.join(sorted(SCHEME_MODULES))}"
        )
    if spec.name == "kgw" and "seeding" in spec.params:
        module_name = KGW_COMPAT_MODULE
    module = importlib.import_module(module_name)
    return module.build(spec)
