"""Per-position seeds: sliding window, min hash and fixed key sequences (MarkMyWords, Fig. 10 R1-R3).

A context array ``ctx[..., H]`` holds the H previous tokens, newest first (``ctx[..., 0]`` is
the token right before the scored one). ``key`` is a 64-bit word (or an array of words that
broadcasts against ``ctx[..., 0]``, e.g. shape ``[P, 1]`` for P null keys).
"""

from __future__ import annotations

from typing import Any

from evalrun.kernels.backend import Ops
from evalrun.kernels.keyed_hash import TAG_KEYSEQ, TAG_SKIP, below, code, mix64, pair, stream, tag


def window_seeds(ops: Ops, key: Any, ctx: Any) -> Any:
    """R1: ``h(T[n-1] || ... || T[n-H] || k)``, folded newest first."""
    s = key
    for k in range(ctx.shape[-1]):
        s = pair(ops, s, code(ops, ctx[..., k]))
    return s


def minhash_seeds(ops: Ops, key: Any, ctx: Any) -> Any:
    """R2: ``min(h(T[n-1] || k), ..., h(T[n-H] || k))`` (unsigned minimum)."""
    parts = [pair(ops, key, code(ops, ctx[..., k])) for k in range(ctx.shape[-1])]
    return ops.umin(ops.stack(parts, axis=-1), axis=-1)


def key_sequences(ops: Ops, keys: Any, length: int) -> Any:
    """R3: each key word in ``keys[...]`` expanded to ``length`` per-position seeds:
    shape ``[..., length]``."""
    base = mix64(ops, keys ^ ops.const(TAG_KEYSEQ))
    return mix64(ops, base[..., None] ^ code(ops, ops.arange(length)))


def skip_mask(ops: Ops, seeds: Any, skip: float) -> Any:
    """True where watermarking is skipped at a position (keyed, so the detector knows)."""
    return below(ops, tag(ops, seeds, TAG_SKIP), skip)


def null_keys(ops: Ops, null_seed: int, count: int) -> Any:
    """``count`` independent 64-bit keys for permutation tests."""
    return mix64(ops, stream(ops, null_seed, count))
