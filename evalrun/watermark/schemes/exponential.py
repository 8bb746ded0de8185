"""Exponential (Gumbel-max) watermark ``exp`` (Aaronson & Kirchner; MarkMyWords Fig. 10 C1).

At each position every vocabulary token ``v`` gets a keyed uniform ``r_v = h_s(v)`` from the
position's seed ``s``; the token ``argmax_v log(r_v) / p_v`` is chosen, where ``p`` are the
temperature-scaled model probabilities (equivalently ``argmax r_v ** (1 / p_v)``, which is a
sample from ``p`` when the ``r_v`` are uniform). Generation takes the same argmax as
``argmax_v logit_v / T + G_v`` with per-seed Gumbel noise ``G_v = -log(-log r_v)``
(:func:`evalrun.kernels.token_stats.exp_gumbel`, rounded to the scores' dtype). The per-token
statistic is ``-log(1 - r_token)``; the sum over n scored tokens is Erlang(n, 1) under the
null.

No sampler-specific keys: ``exp:randomness=window,context=3,skip=0.05``.
"""

from __future__ import annotations

from typing import Any

from evalrun._util.specs import Spec
from evalrun.kernels import offset_scores, vocab_rows
from evalrun.kernels.backend import NUMPY, Ops
from evalrun.kernels.offset_scores import CompiledStat
from evalrun.kernels.token_stats import exp_gumbel, exp_stat, exp_word_stat
from evalrun.watermark.engine.native import NativeScheme, Sampler, build_native
from evalrun.watermark.engine.processing import add_rows, host_f32, host_view

WHAT = "--watermark"


class Exponential(Sampler):
    name = "exp"
    exact_null = "erlang"
    chooses = True

    def token_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        return exp_stat(ops, seeds, tokens)

    def word_stat(self, ops: Ops, words: Any) -> Any:
        return exp_word_stat(ops, words)

    def null_mean(self, vocab_size: int) -> float:
        return 1.0

    def compiled_offset_stat(self, vocab_size: int) -> CompiledStat | None:
        return offset_scores.exp() if type(self) is Exponential else None

    def seed_table(self, ops: Ops, seeds: Any, width: int, vocab_size: int) -> Any:
        return exp_gumbel(ops, seeds, vocab_size)

    overwrites = True

    def apply_words(self, ops: Ops, logits: Any, temperature: float, vocab_size: int,
                    hash_ops: Ops, words: list[int]) -> Any | None:
        """:meth:`apply` without the Gumbel rows: the argmax of ``x + f32(G)`` from the seed
        words, the exact noise computed only for the tokens that could win
        (:func:`evalrun.kernels.vocab_rows.keyed_argmax`)."""
        h = host_f32(logits)
        if h is None or type(self).seed_table is not Exponential.seed_table:
            return None
        if temperature != 1:
            x = logits if int(logits.shape[1]) == vocab_size else logits[:, :vocab_size]
            x /= temperature
        return vocab_rows.keyed_argmax(h, words, vocab_size, vocab_rows.NOISE_GUMBEL,
                                       vocab_rows.COMBINE_F32)

    def apply(self, ops: Ops, rows: list[Any], logits: Any, temperature: float, vocab_size: int,
              hash_ops: Ops, words: list[int]) -> Any:
        x = logits if int(logits.shape[1]) == vocab_size else logits[:, :vocab_size]
        if temperature != 1:
            x /= temperature
        add_rows(x, rows)
        h = host_view(x)  # numpy's argmax is several times faster than torch's on CPU
        return ops.argmax(x, axis=1) if h is None else NUMPY.argmax(h, axis=1)


def build(spec: Spec) -> NativeScheme:
    return build_native(spec, Exponential(), WHAT)
