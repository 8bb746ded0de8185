"""Per-token statistics of the sampling schemes (MarkMyWords, Fig. 10 C1-C3) and repeat masks.

All statistics are *evidence*: larger means more watermark-like. Under the null hypothesis
(text independent of the key) the exponential and binary statistics are i.i.d. Exp(1), which
gives the Erlang nulls in :mod:`evalrun.watermark.engine.nulls`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evalrun.kernels.backend import Ops
from evalrun.kernels.keyed_hash import (
    TAG_NODE,
    TAG_UNIFORM,
    code,
    complement,
    exact_log,
    feistel_rank,
    neg_log_uniform,
    pair,
    range_codes,
    tag,
    uniform,
)


def exp_stat(ops: Ops, seeds: Any, tokens: Any) -> Any:
    """C1 statistic ``-log(1 - r_token)``, computed as ``-log`` of the exact complement."""
    return exp_word_stat(ops, pair(ops, seeds, code(ops, tokens)))


def exp_word_stat(ops: Ops, words: Any) -> Any:
    """:func:`exp_stat` given the pairs' words ``pair(seeds, code(tokens))``."""
    return neg_log_uniform(ops, complement(ops, words))


def exp_gumbel(ops: Ops, seeds: Any, vocab_size: int) -> Any:
    """Gumbel noise ``G_v = -log(-log r_v)`` of every token for each seed in ``seeds [m]``:
    ``[m, V]``. ``argmax_v (logit_v / T + G_v)`` is the token ``argmax_v log(r_v) / p_v`` of C1
    (``log r / p = -exp(log E - log p)`` with ``E = -log r``), with one add per token at
    generation time instead of a division by probabilities."""
    words = pair(ops, seeds[:, None], range_codes(ops, vocab_size)[None, :])
    return -exact_log(ops, neg_log_uniform(ops, words))


def its_uniform(ops: Ops, seeds: Any) -> Any:
    """The per-position uniform ``u`` of inverse-transform sampling."""
    return uniform(ops, tag(ops, seeds, TAG_UNIFORM))


def its_rank(ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
    """Normalised rank ``eta(pi_s(token)) = rank / (V - 1)`` in [0, 1]."""
    rank = feistel_rank(ops, seeds, tokens, vocab_size)
    return ops.f64(rank) / float(vocab_size - 1)


def its_stat(ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
    """C2 statistic ``1 - |u - eta(pi_s(token))|`` (Kuditipudi et al.'s distance, negated)."""
    return 1.0 - ops.abs(its_uniform(ops, seeds) - its_rank(ops, seeds, tokens, vocab_size))


def its_null_mean(vocab_size: int) -> float:
    """E[1 - |U - eta|] for U ~ U(0,1), eta uniform on {k/(V-1)}: ``1 - (2V-1)/(6(V-1))``."""
    v = float(vocab_size)
    return 1.0 - (2.0 * v - 1.0) / (6.0 * (v - 1.0))


def node_words(ops: Ops, seeds: Any, nodes: Any) -> Any:
    """Hash words of (seed, Huffman tree node) pairs for binary sampling."""
    return pair(ops, tag(ops, seeds, TAG_NODE), code(ops, nodes))


def bit_uniforms(ops: Ops, seeds: Any, nodes: Any) -> Any:
    return uniform(ops, node_words(ops, seeds, nodes))


def bit_stat(ops: Ops, words: Any, bits: Any) -> Any:
    """C3 per-bit statistic: ``-log(u)`` for bit 0 (chosen when ``u < P[0]``) and
    ``-log(1 - u)`` for bit 1 (Christ et al.; MarkMyWords writes the cost form)."""
    return neg_log_uniform(ops, ops.where(bits, complement(ops, words), words))


def first_occurrence(ops: Ops, words: Any, segments: Any = None, *,
                     order: np.ndarray | None = None) -> Any:
    """True at the first occurrence of each word along the last axis.

    ``segments`` (optional, int64 ``[N]`` for words ``[..., N]``, non-decreasing) splits the
    last axis into independent texts laid end to end (ragged batches): a word is then a
    repeat only of an earlier equal word *of the same segment*. The flags are those that each
    segment would get on its own.

    ``order`` (numpy, 1-D words only): an argsort of ``words`` the caller already has (equal
    words side by side, in any order among them), saving the sort."""
    if ops.name == "numpy" and getattr(words, "ndim", 0) == 1:
        return _first_occurrence_1d(words, None if segments is None else np.asarray(segments),
                                    order)
    key = ops.word_order_key(words)
    order = ops.argsort_stable(key, axis=-1)
    srt = ops.take_along(key, order, axis=-1)
    new = srt[..., 1:] != srt[..., :-1]
    if segments is not None:
        seg = ops.i64(segments).reshape((1,) * (len(words.shape) - 1) + (int(words.shape[-1]),))
        seg_sorted = ops.take_along(seg, order, axis=-1)
        # equal words sort by position (stable sort), hence by segment: a segment change
        # inside a run of equal words starts that segment's first occurrence
        new = new | (seg_sorted[..., 1:] != seg_sorted[..., :-1])
    first = ops.zeros(tuple(srt.shape[:-1]) + (1,), "bool") == ops.zeros((1,), "bool")
    flags = ops.concat([first, new], axis=-1)
    return ops.put_along(ops.zeros(tuple(words.shape), "bool"), order, flags, axis=-1)


def _first_occurrence_1d(words: np.ndarray, segments: np.ndarray | None,
                         order: np.ndarray | None = None) -> np.ndarray:
    """:func:`first_occurrence` of a 1-D numpy array without a stable sort.

    numpy's unstable argsort is several times faster than its stable one on long arrays
    (a vectorised quicksort against a merge sort: ~40 against ~110 ns a word at 400k words),
    and the flags do not need stability: a run of equal words in sorted order is resolved by
    the minimum position in it. Only runs longer than one (repeats, a small share) need their
    positions looked at, and with ``segments`` those are split by segment through a stable
    sort of just their elements. Same flags as the stable-sort kernel, exactly."""
    n = int(words.shape[0])
    flags = np.zeros(n, dtype=bool)
    if n == 0:
        return flags
    key = words.view(np.int64) if words.dtype == np.uint64 else np.asarray(words)
    if order is None:
        order = np.argsort(key)  # any order inside runs of equal words
    srt = key[order]
    same = srt[1:] == srt[:-1]
    if not same.any():
        flags[:] = True
        return flags
    # singletons are first occurrences; elements of runs longer than one are resolved below
    in_run = np.zeros(n, dtype=bool)
    in_run[1:] = same
    in_run[:-1] |= same
    flags[order[~in_run]] = True
    pos = order[in_run]
    pos.sort()  # positions of the repeated words, ascending (so by segment, then position)
    sub = np.argsort(key[pos], kind="stable")  # equal words stay in position order
    pos = pos[sub]
    k = key[pos]
    start = np.ones(len(pos), dtype=bool)
    start[1:] = k[1:] != k[:-1]
    if segments is not None:
        s = segments[pos]
        start[1:] |= s[1:] != s[:-1]
    flags[pos[start]] = True
    return flags
