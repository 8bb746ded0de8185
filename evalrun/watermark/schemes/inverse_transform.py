"""Inverse-transform watermark ``its`` (Kuditipudi et al. 2023; MarkMyWords Fig. 10 C2).

Each position's seed ``s`` gives a uniform ``u`` and a keyed permutation ``pi_s`` of the
vocabulary (a Feistel network, :func:`evalrun.kernels.keyed_hash.feistel_rank`). The chosen token
is the first one, in permuted order, at which the cumulative model probability reaches ``u``.
The per-token statistic is ``1 - |u - eta(pi_s(token))|`` with ``eta(rank) = rank / (V - 1)``
(Kuditipudi et al.'s distance ``|u - eta|``, negated so larger means watermarked).

The null distribution is not tractable in closed form (MarkMyWords VII-F), so every score of
``its`` is tested by permutation (``permutations=N`` random keys, default 200).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evalrun._util.specs import Spec
from evalrun.kernels import offset_scores, vocab_rows
from evalrun.kernels.backend import NUMPY, Ops
from evalrun.kernels.keyed_hash import feistel_rank
from evalrun.kernels.offset_scores import CompiledStat
from evalrun.kernels.token_stats import its_null_mean, its_stat, its_uniform
from evalrun.watermark.engine.native import NativeScheme, Sampler, build_native
from evalrun.watermark.engine.processing import MEMO_LIMIT, host_f32, host_view, sampling_probs

WHAT = "--watermark"


class InverseTransform(Sampler):
    name = "its"
    exact_null = None
    chooses = True
    table_kind = "index"

    def units_per_token(self, vocab_size: int) -> int:
        return 8  # Feistel rounds and cycle walking

    def token_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        return its_stat(ops, seeds, tokens, vocab_size)

    def null_mean(self, vocab_size: int) -> float:
        return its_null_mean(vocab_size)

    def compiled_offset_stat(self, vocab_size: int) -> CompiledStat | None:
        return offset_scores.its() if type(self) is InverseTransform else None

    def seed_table(self, ops: Ops, seeds: Any, width: int, vocab_size: int) -> Any:
        """The token at each rank of the seed's permutation (the inverse of ``pi_s``)."""
        tokens = ops.arange(vocab_size)[None, :]
        ranks = ops.i64(feistel_rank(ops, seeds[:, None], tokens, vocab_size))
        return ops.put_along(ops.zeros(tuple(ranks.shape), "i64"), ranks,
                             tokens + ops.zeros(tuple(ranks.shape), "i64"), axis=1)

    def apply_words(self, ops: Ops, logits: Any, temperature: float, vocab_size: int,
                    hash_ops: Ops, words: list[int]) -> Any | None:
        """:meth:`apply` with each row's permutation ranked as its probabilities are put in
        order (:func:`evalrun.kernels.vocab_rows.its_choose`); None for rows with a NaN."""
        if type(self).seed_table is not InverseTransform.seed_table or vocab_size < 2 or \
                host_f32(logits) is None:
            return None
        probs = host_f32(sampling_probs(ops, logits, temperature, vocab_size))
        if probs is None:
            return None
        tokens = vocab_rows.its_choose(probs, words, self._uniforms(hash_ops, words), vocab_size)
        return None if (tokens < 0).any() else tokens

    def apply(self, ops: Ops, rows: list[Any], logits: Any, temperature: float, vocab_size: int,
              hash_ops: Ops, words: list[int]) -> Any:
        probs = sampling_probs(ops, logits, temperature, vocab_size)
        work = self.workspace
        permuted = work.get(ops, "permuted", probs)  # probabilities in rank order
        src, dst = host_view(probs), host_view(permuted)
        take = ops.take if src is None else NUMPY.take
        if src is None:
            src, dst = probs, permuted
        for b, row in enumerate(rows):
            take(src[b], row, out=dst[b])  # type: ignore[index]  # permuted shares probs' memory: both views or neither
        cdf = ops.cumsum(permuted, axis=1, dtype="f64", out=work.get(ops, "cdf", probs, "f64"))
        u = ops.f64(self._uniforms(hash_ops, words))
        k = ops.searchsorted(cdf, u[:, None])[:, 0]  # ranks whose cdf lies below u
        ranks = ops.to_numpy(k).tolist()  # checked in Python: an array test costs more here
        if vocab_size in ranks:
            # rounding can leave the last cdf entry just under u: take the last rank with
            # positive probability
            positions = ops.arange(vocab_size)[None, :]
            last = ops.amax(ops.where(permuted > 0, positions, -1), axis=1)
            ranks = ops.to_numpy(ops.where(k > last, last, k)).tolist()
        return np.array([int(row[kb]) for row, kb in zip(rows, ranks)], dtype=np.int64)

    def _uniforms(self, hash_ops: Ops, words: list[int]) -> list[float]:
        """The uniform ``u`` of each seed word, memoised per word like the seed tables."""
        memo: dict[int, float] = self.__dict__.setdefault("_u_memo", {})
        missing = [w for w in dict.fromkeys(words) if w not in memo]
        if missing:
            found = hash_ops.to_numpy(its_uniform(hash_ops, hash_ops.u64(missing))).tolist()
            if len(memo) + len(missing) > MEMO_LIMIT:
                memo.clear()
            memo.update(zip(missing, found))
        return [memo[w] for w in words]


def build(spec: Spec) -> NativeScheme:
    return build_native(spec, InverseTransform(), WHAT)
