"""Exponential (Gumbel-max) watermark ``exp`` (Aaronson & Kirchner; seed 000 Fig. 10 C1).

At each position every vocabulary token ``v`` gets a keyed uniform ``r_v = h_s(v)`` from the
position's seed ``s``; the token ``argmax_v log(r_v) / p_v`` is chosen, where ``p`` are the
temperature-scaled model probabilities (equivalently ``argmax r_v ** (1 / p_v)``, which is a
sample from ``p`` when the ``r_v`` are uniform). The per-token statistic is
``-log(1 - r_token)``; the sum over n scored tokens is Erlang(n, 1) under the null.

No sampler-specific keys: ``exp:randomness=window,context=3,skip=0.05``.
"""

from __future__ import annotations

from typing import Any

from evalrun.kernels.backend import Ops
from evalrun.kernels.hashing import code, neg_log_uniform, pair
from evalrun.kernels.stats import exp_stat
from evalrun.specs import Spec
from evalrun.watermark.engine import NativeScheme, Sampler, build_native, only_token, sampling_probs

WHAT = "--watermark"


class Exponential(Sampler):
    name = "exp"
    exact_null = "erlang"

    def token_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        return exp_stat(ops, seeds, tokens)

    def null_mean(self, vocab_size: int) -> float:
        return 1.0

    def process(self, ops: Ops, seeds: Any, logits: Any, temperature: float,
                vocab_size: int) -> Any:
        probs = sampling_probs(ops, logits, temperature, vocab_size)
        words = pair(ops, seeds[:, None], code(ops, ops.arange(vocab_size))[None, :])
        log_r = -neg_log_uniform(ops, words)
        key = ops.where(probs > 0, log_r / ops.where(probs > 0, probs, 1.0), float("-inf"))
        return only_token(ops, tuple(logits.shape), ops.argmax(key, axis=1))


def build(spec: Spec) -> NativeScheme:
    return build_native(spec, Exponential(), WHAT)
