"""Model providers behind one interface (:class:`evalrun.model.generation.Provider`).

Each module defines its provider and the :class:`~evalrun.model.providers.ProviderKind` that the
core's registry (:data:`evalrun.model.providers.PROVIDERS`) names lazily, so heavy back ends
(transformers, vllm, openai) are imported only when their spec is used.
"""

from evalrun.model.providers import (
                               PROVIDERS,
                               ModelSpec,
                               ProviderKind,
                               check_model,
                               check_watermark_support,
                               make_provider,
                               parse_model,
)

__all__ = ["PROVIDERS", "ModelSpec", "ProviderKind", "check_model", "check_watermark_support",
           "make_provider", "parse_model"]
