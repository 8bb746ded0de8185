"""Native distribution-shift watermark ``kgw`` (Kirchenbauer et al. 2023; MarkMyWords Fig. 10 C4).

Spec: ``kgw:gamma=0.25,delta=2.0`` plus the randomness and score keys of
:mod:`evalrun.watermark.engine.randomness` and :mod:`evalrun.watermark.engine.scores`.

* ``gamma`` (default 0.25, in (0, 1)): expected fraction of the vocabulary that is green for
  a context; a token is green when its keyed hash with the context seed falls below gamma
  (:mod:`evalrun.kernels.green`), so green lists are not exact vocabulary partitions.
* ``delta`` (default 2.0, in [0, 50]): bias added to green logits before temperature.

The sum score is the green count, tested against Binomial(n, gamma); the z-score is reported
too. ``kgw`` specs with a ``seeding`` key go to the reference-compatible implementation in
:mod:`evalrun.watermark.schemes.kgw_compat` instead.
"""

from __future__ import annotations

from typing import Any

from evalrun._util.specs import Spec, spec_float
from evalrun.kernels import offset_scores, vocab_rows
from evalrun.kernels.backend import Ops
from evalrun.kernels.green import green_mask, is_green
from evalrun.kernels.keyed_hash import below
from evalrun.kernels.offset_scores import CompiledStat
from evalrun.watermark.base import WatermarkScheme
from evalrun.watermark.engine.native import Sampler, build_native
from evalrun.watermark.engine.processing import add_rows, host_f32
from evalrun.watermark.strength import GREEN_LIST_GRID

WHAT = "--watermark"
#: ``evalrun tune``'s search: WaterBench's green-list grid around kgw's default gamma 0.25
STRENGTH_GRID = GREEN_LIST_GRID


class DistributionShift(Sampler):
    name = "kgw"
    exact_null = "binomial"
    green_list = True
    keys = frozenset({"gamma", "delta"})

    def __init__(self, gamma: float, delta: float) -> None:
        self.gamma = self.green_fraction = gamma
        self.delta = delta

    def params(self) -> dict[str, str]:
        return {"gamma": repr(self.gamma), "delta": repr(self.delta)}

    def token_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        return is_green(ops, seeds, tokens, self.gamma)

    def word_stat(self, ops: Ops, words: Any) -> Any:
        return below(ops, words, self.gamma)  # is_green, given pair(seed, code(token))

    def null_mean(self, vocab_size: int) -> float:
        return self.gamma

    def compiled_offset_stat(self, vocab_size: int) -> CompiledStat | None:
        return offset_scores.kgw(self.gamma) if type(self) is DistributionShift else None

    def seed_table(self, ops: Ops, seeds: Any, width: int, vocab_size: int) -> Any:
        """``delta`` at the green columns of each seed, 0 elsewhere."""
        return ops.where(self.seed_mask(ops, seeds, width), self.delta, 0.0)

    @property
    def mask_bias(self) -> float:  # type: ignore[override]
        return self.delta

    def seed_mask(self, ops: Ops, seeds: Any, width: int) -> Any:
        return green_mask(ops, seeds, width, self.gamma)

    overwrites = True

    def apply_words(self, ops: Ops, logits: Any, temperature: float, vocab_size: int,
                    hash_ops: Ops, words: list[int]) -> Any | None:
        """:meth:`apply` with each row's green list hashed as its bias is added (one pass a
        row, no table: :func:`evalrun.kernels.vocab_rows.green_add`)."""
        x = host_f32(logits)
        if x is None or type(self).seed_table is not DistributionShift.seed_table:
            return None
        vocab_rows.green_add(x, words, int(x.shape[1]), self.gamma, self.delta)
        if temperature > 0 and temperature != 1:
            logits /= temperature
        return logits

    def apply(self, ops: Ops, rows: list[Any], logits: Any, temperature: float, vocab_size: int,
              hash_ops: Ops, words: list[int]) -> Any:
        add_rows(logits, rows)
        if temperature > 0 and temperature != 1:
            logits /= temperature
        return logits


def build(spec: Spec) -> WatermarkScheme:
    """Native kgw; with ``seeding=lefthash|selfhash`` the reference-compatible scheme of
    :mod:`evalrun.watermark.schemes.kgw_compat` (also registered by itself as ``kgw_compat``)."""
    if "seeding" in spec.params:
        # kgw_compat loads scipy and the compiled kernels: `evalrun detect` with native kgw
        # starts without them
        from evalrun.watermark.schemes.kgw_compat import build as build_compat

        return build_compat(spec)
    gamma = spec_float(spec, "gamma", 0.25, what=WHAT, lo=1e-6, hi=1 - 1e-6)
    delta = spec_float(spec, "delta", 2.0, what=WHAT, lo=0.0, hi=50.0)
    return build_native(spec, DistributionShift(gamma, delta), WHAT)
