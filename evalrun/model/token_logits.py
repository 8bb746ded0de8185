"""A model's next-token logits on texts, from a ``--model`` spec: what the detectors of SWEET,
EWD and Unbiased read (:class:`evalrun.watermark.base.TokenLogits`).

Local models (``embedded``, ``hf:PATH``) give them; API and replay models do not, and asking
for them is an error naming the model. Loaded models are kept per spec for the process, so
a grade stage that detects many outputs loads each model once.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from evalrun._util.errors import EvalrunError
from evalrun.model.providers import ModelSpec, make_provider, provider_kind

_LOADED: dict[str, "ModelLogits"] = {}


class ModelLogits:
    """The logits of one loaded model (a provider with ``next_token_logits``)."""

    def __init__(self, name: str, provider: Any) -> None:
        self.name = name
        self._provider = provider
        #: the model's logit width: the vocabulary its token ids index
        self.vocab_size = int(provider.vocab_size)

    def __repr__(self) -> str:
        return f"ModelLogits({self.name})"

    def __call__(self, texts: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(rows, dtype=np.float32) for rows in self._provider.next_token_logits(texts)]


def model_logits(spec: ModelSpec) -> ModelLogits:
    """The logits of the model ``spec`` (loaded once per process); EvalrunError naming
    ``--model`` when its provider gives no logits."""
    name = spec.identity()
    found = _LOADED.get(name)
    if found is not None:
        return found
    if not provider_kind(spec.name).scores_texts:
        raise EvalrunError(f"--model {name}: gives no next-token logits (detection with SWEET, EWD "
                           "or Unbiased needs a local model: embedded or hf:PATH)")
    found = _LOADED[name] = ModelLogits(name, make_provider(spec))
    return found
