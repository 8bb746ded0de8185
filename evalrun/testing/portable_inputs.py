"""Float test inputs that every machine draws with the same bits.

A fixture whose expected outputs were computed once must be fed the same inputs everywhere.
``torch.randn`` is not such a source: its vectorised kernels (AVX2/AVX-512 against torch's
portable ones) turn the same generator state into other normal variates. Integers are: this
module draws them with ``torch.randint`` and scales them by a power of two, which is exact.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

#: 2**22 steps of 2**-20: values in [-4, 4), each exactly representable in float32
_HALF_RANGE = 2 ** 22
_STEP = 2.0 ** -20


def uniform_scores(shape: tuple[int, ...], generator: Any) -> Any:
    """A float32 tensor of ``shape``, uniform on [-4, 4) in steps of 2**-20, from ``generator``
    (a ``torch.Generator``): logits-like scores with the same bits on any CPU."""
    import torch

    ints = torch.randint(-_HALF_RANGE, _HALF_RANGE, shape, generator=generator, dtype=torch.int64)
    return ints.to(torch.float32) * _STEP


class TextLogits:
    """A stand-in model for the detectors that read one (``TokenLogits``): each text's logits
    are integer draws in [-8, 8] scaled by 1/4, from a generator seeded by the text's ids, so
    they are fixed by the text (as a model's are, whatever the batch) and have the same bits
    on any machine."""

    name = "text-seeded-logits"

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def __call__(self, texts: Sequence[np.ndarray]) -> list[np.ndarray]:
        out = []
        for ids in texts:
            rng = np.random.default_rng([len(ids), *(int(i) for i in ids)])
            draws = rng.integers(-8, 9, size=(max(len(ids) - 1, 0), self.vocab_size))
            out.append((draws / 4).astype(np.float32))
        return out
