"""Spec text -> :class:`WatermarkScheme`, importing each scheme module only when named.

Each scheme registers a ``build(spec: Spec) -> WatermarkScheme`` that validates keys and
ranges and fills in defaults: in-tree schemes lazily below, third-party ones through the
``evalrun.schemes`` entry-point group.
"""

from __future__ import annotations

from typing import Callable

from evalrun._util.errors import SpecError
from evalrun._util.registry import Registry
from evalrun._util.specs import Spec, is_none, parse_spec
from evalrun.watermark.base import WatermarkScheme

SchemeBuilder = Callable[[Spec], WatermarkScheme]

#: the environment variable holding the secret watermark key when ``--key`` is not given
KEY_ENV = "EVALRUN_WATERMARK_KEY"

SCHEMES: Registry[SchemeBuilder] = Registry("scheme", "evalrun.schemes", option="--watermark")
SCHEMES.register_lazy("kgw", "evalrun.watermark.schemes.kgw:build")
SCHEMES.register_lazy("exp", "evalrun.watermark.schemes.exponential:build")
SCHEMES.register_lazy("binary", "evalrun.watermark.schemes.binary:build")
SCHEMES.register_lazy("its", "evalrun.watermark.schemes.inverse_transform:build")
SCHEMES.register_lazy("unigram", "evalrun.watermark.schemes.unigram:build")
SCHEMES.register_lazy("waterfall", "evalrun.watermark.schemes.waterfall:build")
SCHEMES.register_lazy("synthid", "evalrun.watermark.schemes.synthid:build")
SCHEMES.register_lazy("pf", "evalrun.watermark.schemes.permute_flip:build")
SCHEMES.register_lazy("dipmark", "evalrun.watermark.schemes.dipmark:build")
#: reference-compatible kgw (Kirchenbauer et al.'s green lists, ``seeding=lefthash|selfhash``);
#: ``kgw:seeding=...`` reaches it too (native kgw's builder hands it over)
SCHEMES.register_lazy("kgw_compat", "evalrun.watermark.schemes.kgw_compat:build")
SCHEMES.register_lazy("morphmark", "evalrun.watermark.schemes.morphmark:build")
SCHEMES.register_lazy("exp_gumbel", "evalrun.watermark.schemes.exp_gumbel:build")
SCHEMES.register_lazy("sweet", "evalrun.watermark.schemes.sweet:build")
SCHEMES.register_lazy("ewd", "evalrun.watermark.schemes.ewd:build")
SCHEMES.register_lazy("unbiased", "evalrun.watermark.schemes.unbiased:build")


def parse_watermark(text: str) -> WatermarkScheme | None:
    """Build the scheme named by ``text``; ``none`` gives None. Errors name ``--watermark``."""
    if is_none(text):
        return None
    spec = parse_spec(text, what="--watermark")
    return build_scheme(spec)


def build_scheme(spec: Spec) -> WatermarkScheme:
    if spec.arg is not None:
        raise SpecError(f"--watermark {spec}: expected <scheme>:<key>=<value>,...")
    return SCHEMES.get(spec.name)(spec)
