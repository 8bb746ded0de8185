"""Fixed-key detectors' align and edit scores, compiled: the fast path of numpy detection.

Permutation tests of the fixed-key schemes rescore the text under every null key: the
evidence ``M[k, i, m]`` of text token ``i`` against key position ``m`` of key ``k`` (the
sampler's centred statistic), then every prefix's best score over the cyclic offsets
(:mod:`evalrun.kernels.align`). numpy builds ``M`` and the diagonal running sums as
``[K, n, L]`` arrays; the compiled kernel ``evalrun.kernels._offset_scores``
(``kernels/offset_scores.c``, built at install when a C compiler is present) makes one row
of ``M`` at a time and folds it into the running sums (align) or the DP (edit), returning
only each prefix's best score (and offset). It performs numpy's float operations in numpy's
order, so the two give the same bits; tests hold them to it on every scheme that uses these
scores. Where it was not built, detection takes the numpy path (the reference).

The samplers describe their statistic to the kernel with a :class:`CompiledStat`
(``Sampler.compiled_offset_stat``): which of the four statistics (kgw, exp, its, binary) and
the arrays it reads, all made by the same numpy kernels the reference uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evalrun.kernels.backend import NUMPY
from evalrun.kernels.keyed_hash import (
    TAG_NODE,
    TAG_UNIFORM,
    code,
    feistel_bits,
    tag,
    threshold53,
    uniform,
)

try:  # built by setup.py when a C compiler is available (the extension is optional)
    from evalrun.kernels import _offset_scores as _compiled
except ImportError:  # pragma: no cover - exercised where the build was skipped
    _compiled = None

KIND_KGW, KIND_EXP, KIND_ITS, KIND_BINARY = 0, 1, 2, 3
MODES = {"align": 0, "edit": 1}
#: keys per kernel call (bounds the ``[keys, n]`` outputs, as CHUNK_ELEMENTS bounds numpy's)
KEYS_PER_CALL_ELEMENTS = 1 << 20
#: the build of the loops that calls without a ``variant`` run: "" for the widest this CPU
#: runs, or one of :func:`variants` (benchmarks set it to time a plainer CPU's build)
DEFAULT_VARIANT = ""


def compiled_available() -> bool:
    """Whether the compiled kernel was built with this install."""
    return _compiled is not None


def variants() -> list[str]:
    """The builds of the kernel's loops this CPU runs (``portable``, ``avx2``, ``avx512``)."""
    return list(_compiled.variants()) if _compiled is not None else []


_EMPTY_U8 = np.zeros(0, dtype=np.uint8)
_EMPTY_F64 = np.zeros(0, dtype=np.float64)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class CompiledStat:
    """A sampler's centred statistic as the compiled kernel computes it.

    ``kind``: 0 kgw (``f64(below(pair(seed, code(t)), gamma)) - gamma``), 1 exp
    (``neg_log_uniform(complement(pair(seed, code(t)))) - 1``), 2 its
    (``1 - |u(seed) - rank(seed, t) / (V - 1)| - its_null_mean(V)``), 3 binary (the ordered
    sum over the token's Huffman path of ``bit_stat - 1``). ``gamma`` for kgw; for binary the
    Huffman path tables ``path_nodes [V, D]`` (-1 padded), ``path_bits [V, D]``,
    ``path_len [V]``."""

    kind: int
    gamma: float = 0.0
    path_nodes: np.ndarray | None = None
    path_bits: np.ndarray | None = None
    path_len: np.ndarray | None = None


def kgw(gamma: float) -> CompiledStat:
    return CompiledStat(KIND_KGW, gamma=gamma)


def exp() -> CompiledStat:
    return CompiledStat(KIND_EXP)


def its() -> CompiledStat:
    return CompiledStat(KIND_ITS)


def binary(path_nodes: np.ndarray, path_bits: np.ndarray, path_len: np.ndarray) -> CompiledStat:
    return CompiledStat(KIND_BINARY, path_nodes=path_nodes, path_bits=path_bits,
                        path_len=path_len)


def offset_scores(stat: CompiledStat, mode: str, seq: np.ndarray, active: np.ndarray,
                  tokens: np.ndarray, vocab_size: int, null_mean: float, *, psi: float = 0.0,
                  offsets: bool = False, variant: str = "") -> tuple[np.ndarray, Any]:
    """Every prefix's best ``mode`` score (``align``/``edit``) under each key, from the key
    sequences ``seq [K, L]`` (uint64) and their active positions ``active [K, L]``, and the
    text ``tokens [n]`` (``n >= 1``): ``best [K, n]`` float64 and, with ``offsets``, the first
    best offset ``[K, n]`` int64 (else None). Bit for bit what
    :func:`evalrun.watermark.engine.scores.offset_scores` gives on the numpy backend for
    ``M = _offset_matrix(...)``. ``null_mean``: the sampler's ``null_mean(vocab_size)``.
    ``variant`` picks a build of the loops (tests); the default is the widest the CPU runs."""
    if _compiled is None:
        raise RuntimeError("the compiled offset-score kernel was not built with this install "
                           "(evalrun.kernels._offset_scores; it needs a C compiler at install)")
    seq = np.ascontiguousarray(seq, dtype=np.uint64)
    keys, key_len = (int(d) for d in seq.shape)
    tok = np.asarray(tokens, dtype=np.int64)
    n = int(tok.shape[0])
    act = np.ascontiguousarray(np.broadcast_to(active, seq.shape), dtype=np.uint8)
    pos_words, pos_floats = seq, _EMPTY_F64
    tok_bits, tok_len = _EMPTY_U8, _EMPTY_I64
    depth, threshold, all_green, bits, denom = 1, 0, False, 0, 0.0
    if stat.kind == KIND_KGW:
        t = threshold53(stat.gamma)
        all_green = t >= 1 << 53
        threshold = 0 if all_green else t << 11
        tok_words = code(NUMPY, tok)
    elif stat.kind == KIND_EXP:
        tok_words = code(NUMPY, tok)
    elif stat.kind == KIND_ITS:
        pos_floats = np.ascontiguousarray(uniform(NUMPY, tag(NUMPY, seq, TAG_UNIFORM)),
                                          dtype=np.float64)
        tok_words = NUMPY.u64(tok)
        bits = feistel_bits(vocab_size)
        denom = float(vocab_size - 1)
    elif stat.kind == KIND_BINARY:
        assert stat.path_nodes is not None and stat.path_bits is not None
        assert stat.path_len is not None
        pos_words = np.ascontiguousarray(tag(NUMPY, seq, TAG_NODE), dtype=np.uint64)
        tok_words = code(NUMPY, stat.path_nodes[tok])
        depth = int(stat.path_nodes.shape[1])
        tok_bits = np.ascontiguousarray(stat.path_bits[tok], dtype=np.uint8)
        tok_len = np.ascontiguousarray(stat.path_len[tok], dtype=np.int64)
    else:
        raise ValueError(f"unknown statistic kind {stat.kind}")
    tok_words = np.ascontiguousarray(tok_words, dtype=np.uint64)
    best = np.empty((keys, n), dtype=np.float64)
    arg = np.empty((keys, n), dtype=np.int64) if offsets else None
    step = max(1, KEYS_PER_CALL_ELEMENTS // max(n, key_len))
    for k0 in range(0, keys, step):
        k1 = min(keys, k0 + step)
        _compiled.scores(
            MODES[mode], stat.kind, pos_words[k0:k1],
            pos_floats[k0:k1] if pos_floats.ndim == 2 else pos_floats, act[k0:k1], tok_words,
            tok_bits, tok_len,
            k1 - k0, key_len, n, depth, float(null_mean), denom, threshold, all_green,
            vocab_size, bits, float(psi), best[k0:k1],
            arg[k0:k1] if arg is not None else _EMPTY_I64, variant or DEFAULT_VARIANT)
    return best, arg
