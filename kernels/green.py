"""Green lists of the distribution-shift scheme (Kirchenbauer et al.; MarkMyWords Fig. 10 C4).

A token ``v`` is green for a context seed ``s`` iff ``pair(s, v)`` falls below ``gamma`` (see
:func:`evalrun.kernels.keyed_hash.below`): membership of one token costs one hash, so detection
never builds a vocabulary permutation, and the green list has ``gamma * V`` tokens on average.
"""

from __future__ import annotations

from typing import Any

from evalrun.kernels.backend import Ops
from evalrun.kernels.keyed_hash import below, code, pair, range_codes


def is_green(ops: Ops, seeds: Any, tokens: Any, gamma: float) -> Any:
    """Green membership for (seed, token) pairs; shapes broadcast."""
    return below(ops, pair(ops, seeds, code(ops, tokens)), gamma)


def green_mask(ops: Ops, seeds: Any, vocab_size: int, gamma: float) -> Any:
    """``[B, V]`` boolean green mask for a batch of ``[B]`` context seeds."""
    vocab = range_codes(ops, vocab_size)
    return below(ops, pair(ops, seeds[:, None], vocab[None, :]), gamma)
