"""The random 2-layer GPT-2 that made ``data/markllm_reference.json``, rebuilt from
``scripts/markllm_reference.py`` (same construction, checked against the stored weight hash),
and its logits as a :class:`~evalrun.watermark.base.TokenLogits`: what the tests of the
schemes whose detector reads the model (SWEET, EWD, Unbiased) hand to ``detect``.

MarkLLM's numbers for those schemes are float32 arithmetic on the logits, which another CPU
moves in their last bits. :meth:`ReferenceLogits.bound` says how far a test may let them move:
0 where this machine's forward pass gives the reference run's logits (their stored digest),
else the float32 bound of a forward pass (:mod:`evalrun.testing.float_drift`)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

import numpy as np

from evalrun.testing.float_drift import float32_bound

ROOT = Path(__file__).resolve().parents[3]
DATA = json.loads((Path(__file__).parent / "data" / "markllm_reference.json").read_text())


@functools.cache
def reference_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("markllm_reference", ROOT / "scripts" / "markllm_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def reference_model(vocab_size: int) -> Any:
    """The reference GPT-2 at ``vocab_size``; AssertionError if its weights differ from the ones
    MarkLLM ran with (the hash in the reference file)."""
    script = reference_script()
    model = script.build_model(vocab_size)
    expected = DATA["vocab"][str(vocab_size)]["model"]["weights_sha256"]
    assert script.weights_sha256(model) == expected, "the rebuilt reference model differs"
    return model


class ReferenceLogits:
    """:class:`TokenLogits` of the reference model: one text per forward pass, as MarkLLM."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.name = f"markllm-reference-gpt2-V{vocab_size}"
        self.calls = 0

    def __call__(self, texts: Sequence[np.ndarray]) -> list[np.ndarray]:
        self.calls += len(texts)
        return [self.rows(ids) for ids in texts]

    def rows(self, ids: Sequence[int]) -> np.ndarray:
        """The logits of one text (not counted in :attr:`calls`)."""
        return reference_script().next_token_logits(reference_model(self.vocab_size), list(ids))

    def bound(self, case: dict) -> float:
        """How far one logit of ``case``'s text may have moved from the reference run's: 0 when
        this machine reproduces them bit for bit, else the float32 bound of a forward pass at
        the text's largest logit."""
        rows = self.rows(case["ids"])
        if hashlib.sha256(rows.tobytes()).hexdigest() == case["logits_sha256"]:
            return 0.0
        return float32_bound(float(np.abs(rows).max()))
