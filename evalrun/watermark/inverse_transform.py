"""Inverse-transform watermark ``its`` (Kuditipudi et al. 2023; seed 000 Fig. 10 C2).

Each position's seed ``s`` gives a uniform ``u`` and a keyed permutation ``pi_s`` of the
vocabulary (a Feistel network, :func:`evalrun.kernels.hashing.feistel_rank`). The chosen token
is the first one, in permuted order, at which the cumulative model probability reaches ``u``.
The per-token statistic is ``1 - |u - eta(pi_s(token))|`` with ``eta(rank) = rank / (V - 1)``
(Kuditipudi et al.'s distance ``|u - eta|``, negated so larger means watermarked).

The null distribution is not tractable in closed form (seed 000 VII-F), so every score of
``its`` is tested by permutation (``permutations=N`` random keys, default 200).
"""

from __future__ import annotations

from typing import Any

from evalrun.kernels.backend import Ops
from evalrun.kernels.hashing import feistel_rank
from evalrun.kernels.stats import its_null_mean, its_stat, its_uniform
from evalrun.specs import Spec
from evalrun.watermark.engine import NativeScheme, Sampler, build_native, only_token, sampling_probs

WHAT = "--watermark"


class InverseTransform(Sampler):
    name = "its"
    exact_null = None

    def units_per_token(self, vocab_size: int) -> int:
        return 8  # Feistel rounds and cycle walking

    def token_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        return its_stat(ops, seeds, tokens, vocab_size)

    def null_mean(self, vocab_size: int) -> float:
        return its_null_mean(vocab_size)

    def process(self, ops: Ops, seeds: Any, logits: Any, temperature: float,
                vocab_size: int) -> Any:
        probs = sampling_probs(ops, logits, temperature, vocab_size)  # [B, V]
        ranks = ops.i64(feistel_rank(ops, seeds[:, None], ops.arange(vocab_size)[None, :],
                                     vocab_size))
        permuted = ops.put_along(ops.zeros(tuple(probs.shape)), ranks, probs, axis=1)
        cdf = ops.cumsum(permuted, axis=1)
        u = its_uniform(ops, seeds)
        k = ops.count_true(cdf < u[:, None], axis=1)
        # rounding can leave the last cdf entry just under u: fall back to the last token
        # with positive probability
        positions = ops.arange(vocab_size)[None, :]
        last = ops.amax(ops.where(permuted > 0, positions, -1), axis=1)
        k = ops.where(k > last, last, k)
        chosen = ops.argmax(ranks == k[:, None], axis=1)
        return only_token(ops, tuple(logits.shape), chosen)


def build(spec: Spec) -> NativeScheme:
    return build_native(spec, InverseTransform(), WHAT)
