"""Float test inputs that every machine draws with the same bits.

A fixture whose expected outputs were computed once must be fed the same inputs everywhere.
``torch.randn`` is not such a source: its vectorised kernels (AVX2/AVX-512 against torch's
portable ones) turn the same generator state into other normal variates. Integers are: this
module draws them with ``torch.randint`` and scales them by a power of two, which is exact.
"""

from __future__ import annotations

from typing import Any

#: 2**22 steps of 2**-20: values in [-4, 4), each exactly representable in float32
_HALF_RANGE = 2 ** 22
_STEP = 2.0 ** -20


def uniform_scores(shape: tuple[int, ...], generator: Any) -> Any:
    """A float32 tensor of ``shape``, uniform on [-4, 4) in steps of 2**-20, from ``generator``
    (a ``torch.Generator``): logits-like scores with the same bits on any CPU."""
    import torch

    ints = torch.randint(-_HALF_RANGE, _HALF_RANGE, shape, generator=generator, dtype=torch.int64)
    return ints.to(torch.float32) * _STEP
