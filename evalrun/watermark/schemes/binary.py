"""Binary watermark ``binary`` (Christ, Gunn & Zamir 2023; MarkMyWords Fig. 10 C3).

Tokens are written as bit strings with a Huffman code of the vocabulary, and each token is
sampled bit by bit: at tree node ``x`` the probability ``P[0]`` of the left subtree is
computed from the model distribution and bit 0 is taken when the keyed uniform
``u = h_s(x)`` is below it. The per-bit statistic is ``-log(u)`` for bit 0 and
``-log(1 - u)`` for bit 1, i.i.d. Exp(1) under the null, so the sum score over n scored bits
is Erlang(n, 1). With ``repeats=ignore`` a repeated (seed, tree node) pair is scored once.

Frequency proxy for the code. MarkMyWords builds the Huffman code from corpus frequencies;
evalrun has no corpus per tokenizer, so it uses a fixed deterministic proxy: token ``t`` has
weight ``1 / (t + 1)`` (Zipf by token id). BPE vocabularies number tokens roughly in merge
order, so low ids are the frequent ones and get short codes. The code only changes how many
bits a token costs; detection is valid for any code.

No sampler-specific keys: ``binary:context=1``.
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from evalrun._util.specs import Spec
from evalrun.kernels import offset_scores
from evalrun.kernels.backend import Ops
from evalrun.kernels.keyed_hash import _M1, _M2, GOLDEN, TAG_NODE
from evalrun.kernels.offset_scores import CompiledStat
from evalrun.kernels.token_stats import bit_stat, bit_uniforms, first_occurrence, node_words
from evalrun.watermark.engine.native import NativeScheme, Sampler, build_native
from evalrun.watermark.engine.processing import sampling_probs

WHAT = "--watermark"


@dataclass(frozen=True)
class HuffmanTree:
    """A Huffman code over ``[0, V)``; internal nodes are ``0..V-2`` (root ``V-2``), a child
    reference ``c < 0`` is the leaf of token ``-c - 1``. Leaves are numbered in depth-first
    order so that every subtree covers the contiguous leaf range ``[lo, hi)`` split at ``mid``.
    """

    root: int
    left: np.ndarray
    right: np.ndarray
    lo: np.ndarray
    mid: np.ndarray
    hi: np.ndarray
    leaf_order: np.ndarray  # token at each depth-first leaf position
    path_nodes: np.ndarray  # [V, D] internal nodes from the root, -1 padded
    path_bits: np.ndarray  # [V, D] bits (True = 1 = right), False padded
    path_len: np.ndarray  # [V]

    @property
    def depth(self) -> int:
        return int(self.path_nodes.shape[1])


@lru_cache(maxsize=8)
def huffman_tree(vocab_size: int) -> HuffmanTree:
    """Huffman tree for weights ``1 / (t + 1)`` (two-queue construction, ties to leaves)."""
    v = vocab_size
    leaves = deque((1.0 / (t + 1), -(t + 1)) for t in range(v - 1, -1, -1))  # ascending
    merged: deque[tuple[float, int]] = deque()
    left = np.zeros(v - 1, dtype=np.int64)
    right = np.zeros(v - 1, dtype=np.int64)

    def pop() -> tuple[float, int]:
        if merged and (not leaves or merged[0][0] < leaves[0][0]):
            return merged.popleft()
        return leaves.popleft()

    for node in range(v - 1):
        (w1, a), (w2, b) = pop(), pop()
        left[node], right[node] = a, b
        merged.append((w1 + w2, node))
    root = v - 2
    lo = np.zeros(v - 1, dtype=np.int64)
    mid = np.zeros(v - 1, dtype=np.int64)
    hi = np.zeros(v - 1, dtype=np.int64)
    leaf_order = np.zeros(v, dtype=np.int64)
    paths: list[tuple[list[int], list[bool]]] = [([], [])] * v
    counter = 0
    # iterative depth-first walk: (ref, path nodes, path bits, stage)
    stack: list[tuple[int, list[int], list[bool], int]] = [(root, [], [], 0)]
    while stack:
        ref, nodes, bits, stage = stack.pop()
        if ref < 0:
            token = -ref - 1
            leaf_order[counter] = token
            paths[token] = (nodes, bits)
            counter += 1
            continue
        if stage == 0:
            lo[ref] = counter
            stack.append((ref, nodes, bits, 1))
            stack.append((int(left[ref]), nodes + [ref], bits + [False], 0))
        elif stage == 1:
            mid[ref] = counter
            stack.append((ref, nodes, bits, 2))
            stack.append((int(right[ref]), nodes + [ref], bits + [True], 0))
        else:
            hi[ref] = counter
    depth = max(len(p[0]) for p in paths)
    path_nodes = np.full((v, depth), -1, dtype=np.int64)
    path_bits = np.zeros((v, depth), dtype=bool)
    path_len = np.zeros(v, dtype=np.int64)
    for t, (nodes, bits) in enumerate(paths):
        path_nodes[t, : len(nodes)] = nodes
        path_bits[t, : len(bits)] = bits
        path_len[t] = len(nodes)
    return HuffmanTree(root, left, right, lo, mid, hi, leaf_order, path_nodes, path_bits,
                       path_len)


class Binary(Sampler):
    name = "binary"
    unit_name = "bits"
    exact_null = "erlang"
    chooses = True
    table_kind = "host"

    def __init__(self) -> None:
        self._cache: dict[tuple[str, ...], Any] = {}

    def units_per_token(self, vocab_size: int) -> int:
        return huffman_tree(vocab_size).depth

    def _tables(self, ops: Ops, tree: HuffmanTree) -> tuple[Any, Any, Any]:
        """Path tables on the backend's device (converted once per backend and vocabulary)."""
        key = ("paths", ops.name, str(getattr(ops, "device", "")), str(len(tree.path_len)))
        if key not in self._cache:
            self._cache[key] = (ops.i64(tree.path_nodes), ops.i64(tree.path_bits.astype(np.int64)),
                                ops.i64(tree.path_len))
        return self._cache[key]

    def null_mean(self, vocab_size: int) -> float:
        return 1.0

    def compiled_offset_stat(self, vocab_size: int) -> CompiledStat | None:
        if type(self) is not Binary:
            return None
        tree = huffman_tree(vocab_size)
        return offset_scores.binary(tree.path_nodes, tree.path_bits, tree.path_len)

    def _bits(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> tuple[Any, Any, Any]:
        """Hash words, per-bit evidence and validity, shape ``broadcast(seeds, tokens) + [D]``."""
        tree = huffman_tree(vocab_size)
        nodes_t, bits_t, len_t = self._tables(ops, tree)
        nodes = nodes_t[tokens]
        bits = bits_t[tokens] != 0
        valid = ops.arange(tree.depth) < len_t[tokens][..., None]
        words = node_words(ops, seeds[..., None], nodes)
        return words, bit_stat(ops, words, bits), valid

    # A token's evidence is the sum of its bits' evidence, added root first with
    # ``ordered_sum``: numpy's and torch's own reductions associate the same floats
    # differently, which made the two backends' scores and p-values differ in the last bits.
    def token_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        _, ev, valid = self._bits(ops, seeds, tokens, vocab_size)
        return ops.ordered_sum(ops.where(valid, ev, 0.0))

    def centered_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        _, ev, valid = self._bits(ops, seeds, tokens, vocab_size)
        return ops.ordered_sum(ops.where(valid, ev - 1.0, 0.0))

    def sum_terms(self, ops: Ops, seeds: Any, tokens: Any, scored: Any, vocab_size: int,
                  count_repeats: bool, segments: Any = None) -> tuple[Any, Any]:
        words, ev, valid = self._bits(ops, seeds, tokens, vocab_size)
        mask = valid & scored[..., None]
        if not count_repeats:
            shape = tuple(words.shape)
            flat = words.reshape(shape[:-2] + (shape[-2] * shape[-1],))
            if segments is not None:  # one segment id per bit: a token's D bits in a row
                segments = ops.i64(segments)[:, None] + ops.zeros((1, shape[-1]), "i64")
                segments = segments.reshape((shape[-2] * shape[-1],))
            mask = mask & first_occurrence(ops, flat, segments).reshape(shape)
        return (ops.ordered_sum(ops.where(mask, ev, 0.0)),
                ops.f64(ops.count_true(mask, axis=-1)))

    def seed_table(self, ops: Ops, seeds: Any, width: int, vocab_size: int) -> Any:
        """The uniform ``u = h_s(x)`` of every internal node ``x`` of the tree."""
        nodes = ops.arange(vocab_size - 1)[None, :]
        return bit_uniforms(ops, seeds[:, None], nodes)

    def apply_words(self, ops: Ops, logits: Any, temperature: float, vocab_size: int,
                    hash_ops: Ops, words: list[int]) -> Any | None:
        """:meth:`apply` with the uniforms of the nodes each row's walk visits hashed as it
        visits them (a token costs ~depth nodes, the table all V - 1), on any backend."""
        if type(self).seed_table is not Binary.seed_table:
            return None
        tagged = [_mix64_int(w ^ TAG_NODE) for w in words]
        return self._walk(ops, logits, temperature, vocab_size,
                          [functools.partial(_node_uniform, t) for t in tagged])

    def apply(self, ops: Ops, rows: list[Any], logits: Any, temperature: float, vocab_size: int,
              hash_ops: Ops, words: list[int]) -> Any:
        return self._walk(ops, logits, temperature, vocab_size, [row.item for row in rows])

    def _walk(self, ops: Ops, logits: Any, temperature: float, vocab_size: int,
              uniforms: list[Callable[[int], float]]) -> Any:
        """The tokens of the rows of ``logits``: each row walks the tree from the root, taking
        bit 0 at node x when ``uniforms[b](x)`` (its keyed uniform) is below ``P[0]``."""
        tree = huffman_tree(vocab_size)
        probs = sampling_probs(ops, logits, temperature, vocab_size)
        work = self.workspace
        ordered = ops.take_along(probs, self._leaf_order(ops, tree), axis=1,
                                 out=work.get(ops, "ordered", probs))
        cum = ops.to_numpy(ops.cumsum(ordered, axis=1, dtype="f64",  # mass of leaves <= j
                                      out=work.get(ops, "cum", probs, "f64")))
        lo, mid, hi, left, right = _walk_lists(vocab_size)
        tokens = []
        for b in range(int(cum.shape[0])):
            # one row's walk touches ~depth entries: scalar reads beat [B]-wide array steps
            c, u = cum[b].item, uniforms[b]
            node = tree.root
            while True:
                base = c(lo[node] - 1) if lo[node] else 0.0
                total = c(hi[node] - 1) - base
                p0 = (c(mid[node] - 1) - base) / total if total > 0 else 0.5
                child = right[node] if u(node) >= p0 else left[node]
                if child < 0:
                    tokens.append(-child - 1)
                    break
                node = child
        return np.array(tokens, dtype=np.int64)

    def _leaf_order(self, ops: Ops, tree: HuffmanTree) -> Any:
        key = ("leaf_order", ops.name, str(getattr(ops, "device", "")), str(len(tree.leaf_order)))
        if key not in self._cache:
            self._cache[key] = ops.i64(tree.leaf_order)[None, :]
        return self._cache[key]


_MASK64 = (1 << 64) - 1


def _mix64_int(x: int) -> int:
    """:func:`evalrun.kernels.keyed_hash.mix64` of one word, in Python integers."""
    x ^= x >> 30
    x = (x * _M1) & _MASK64
    x ^= x >> 27
    x = (x * _M2) & _MASK64
    return x ^ (x >> 31)


def _node_uniform(tagged_seed: int, node: int) -> float:
    """:func:`~evalrun.kernels.token_stats.bit_uniforms` of one (seed, node) pair, given
    ``tag(seed, TAG_NODE)``: ``(top53(pair) + 0.5) * 2**-53``, the same float."""
    h = _mix64_int(tagged_seed ^ ((node * GOLDEN) & _MASK64))
    return (float(h >> 11) + 0.5) * (2.0 ** -53)


@lru_cache(maxsize=8)
def _walk_lists(vocab_size: int) -> tuple[list[int], ...]:
    """The tree's node arrays as Python lists (fast scalar indexing in the walk)."""
    tree = huffman_tree(vocab_size)
    return tuple(a.tolist() for a in (tree.lo, tree.mid, tree.hi, tree.left, tree.right))


def build(spec: Spec) -> NativeScheme:
    return build_native(spec, Binary(), WHAT)
