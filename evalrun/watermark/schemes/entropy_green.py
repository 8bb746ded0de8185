"""What SWEET and EWD share: KGW's green lists, read through the model's entropy.

Both schemes (:mod:`evalrun.watermark.schemes.sweet`, :mod:`evalrun.watermark.schemes.ewd`) bias green logits
by ``delta`` at generation, as KGW does, and differ at detection only in how much each token
counts: SWEET drops low-entropy positions, EWD weighs every position by its spike entropy.
Those entropies come from the model's logits on the text (``needs_model``), one per position:
position ``t >= 1`` gets the statistic of the row predicting it (row ``t - 1`` of
:class:`~evalrun.watermark.base.TokenLogits`); the first position has none.

Green lists, by ``compat``:

* ``compat=markllm`` (THU-BPM/MarkLLM at 112fa74, ``watermark/sweet``, ``watermark/ewd``):
  ``--key`` is MarkLLM's integer ``hash_key``; a position's context value is the product of its
  ``prefix_length`` previous ids modulo V, its generator seed ``hash_key * c``, its green list
  the first ``int(V * gamma)`` entries of CPU ``torch.randperm(V)`` from that seed
  (:class:`~evalrun.watermark.kgw_compat.GreenLists`, bit for bit torch's).
* native (``compat=none``): native kgw's green lists (:mod:`evalrun.watermark.schemes.kgw`): the
  window seed of the ``prefix_length`` previous ids under evalrun's key, and a token is green
  when the keyed hash of (seed, token) falls below ``gamma`` -- the same tokens native
  ``kgw:gamma=...`` calls green under the same key, so SWEET and EWD read as kgw plus an
  entropy rule.

The units evalrun's null scores are first occurrences: natively of each (context ids, token)
tuple, whose keyed hashes are independent, chosen from the text and the model alone; in compat
mode of each green list, i.e. of the 32 generator-seed bits torch keeps (``hash_key * c`` of
two contexts may agree there -- every context does for a key divisible by 2**32 -- and then
they share one list and one unit). For a text fixed independently of the key each unit is
then green independently with the exact probability
:meth:`EntropyGreenScheme.green_probability` (compat mode: taking torch's permutations of
distinct seeds as independent draws).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Sequence

import numpy as np

from evalrun._util.errors import SpecError
from evalrun._util.lru import LRU
from evalrun._util.specs import Spec, spec_float, spec_int
from evalrun.kernels import vocab_rows
from evalrun.kernels.backend import NUMPY
from evalrun.kernels.green import green_mask, is_green
from evalrun.kernels.keyed_hash import threshold53
from evalrun.watermark.base import (
    SchemeProcessor,
    TokenLogits,
    checked_logits,
    finite_param,
    require_logits,
    token_id_array,
)
from evalrun.watermark.engine.counting import first_occurrences
from evalrun.watermark.engine.markllm_compat import MARKLLM, MarkLLMKeyed, compat_mode
from evalrun.watermark.engine.processing import host_f32
from evalrun.watermark.engine.randomness import Randomness, derive_key
from evalrun.watermark.schemes.kgw_compat import GreenLists
from evalrun.watermark.schemes.morphmark import context_values

WHAT = "--watermark"
#: MarkLLM's ``hash_key`` in config/SWEET.json and config/EWD.json (the compat-mode key)
MARKLLM_HASH_KEY = 15485863
MAX_PREFIX = 8
#: the entropy of position 0 (no row predicts it), MarkLLM's sentinel
NO_ENTROPY = -10000.0
#: per-position statistics kept between ``detect`` and ``prefix_p_values`` of the same text,
#: so a grade stage runs the model once per text: (scheme kind, model, V, ids) -> stats
_STATS: LRU[tuple[Any, ...], np.ndarray] = LRU(4096)


class EntropyGreenScheme(MarkLLMKeyed):
    """KGW's green lists with a per-position statistic of the model's distribution; the
    subclass says which statistic (:meth:`position_stats`) and how detection uses it."""

    green_list = True
    needs_model = True
    markllm_key_field = "hash_key"
    markllm_key_high = 2**63
    name: str = ""
    #: what detection reads the model for (in the missing-model message)
    model_use: str = ""

    def __init__(self, spec: Spec, *, gamma: float, delta: float, prefix_length: int,
                 z_threshold: float, compat: str) -> None:
        self.spec = spec
        self.gamma = gamma
        self.delta = delta
        self.prefix_length = prefix_length
        self.z_threshold = z_threshold
        self.compat = compat

    @property
    def shared_context(self) -> int | None:
        """Reads the last ``prefix_length`` ids and the row's scores, ignores ``seed``, keeps no
        state: one processor may serve a batch."""
        return self.prefix_length

    def green_probability(self, vocab_size: int) -> float:
        """Exact probability that one scored unit is green under the null."""
        if self.compat == MARKLLM:
            return GreenLists(vocab_size, self.gamma).size / vocab_size
        return threshold53(self.gamma) / float(1 << 53)

    # ---- green lists ------------------------------------------------------------------
    def _compat_seed(self, hash_key: int, context: int) -> int:
        """MarkLLM's generator seed of a context value; torch's mt19937 keeps its low 32 bits."""
        return (hash_key * int(context)) & 0xFFFFFFFF

    def green_units(self, ids: np.ndarray, key: str, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """``(green, first)`` per position: green membership (False before ``prefix_length``)
        and whether the position is the first occurrence of its null unit (native: the
        (context ids, token) tuple, chosen from the text alone; compat: the green list's
        32-bit generator seed, so contexts that share a list share a unit)."""
        self.check_key(key)
        n, k = len(ids), self.prefix_length
        green = np.zeros(n, dtype=bool)
        first = np.zeros(n, dtype=bool)
        if n <= k:
            return green, first
        if self.compat == MARKLLM:
            hash_key = self.markllm_key(key)
            ctx = context_values(ids, vocab_size, k, "time")
            seeds = np.asarray([self._compat_seed(hash_key, c) for c in ctx], dtype=np.int64)
            uniq, inverse = np.unique(seeds, return_inverse=True)
            green[k:] = GreenLists(vocab_size, self.gamma).membership(
                uniq.astype(np.uint64), ids[k:], cache=True, seed_of=inverse.reshape(-1))
            first[k:] = first_occurrences(seeds)
            return green, first
        seeds, scored = Randomness("window", context=k).text_seeds(
            NUMPY, NUMPY.u64([derive_key(key)]), NUMPY.i64(ids))
        green[:] = np.asarray(is_green(NUMPY, seeds, ids, self.gamma), dtype=bool) & scored
        windows = np.lib.stride_tricks.sliding_window_view(ids, k + 1)  # ids[t-k..t], t >= k
        _, at = np.unique(windows, axis=0, return_index=True)
        first[k + at] = True
        return green, first

    def green_rows(self, input_ids: np.ndarray, key: str, vocab_size: int,
                   lists: GreenLists | None = None) -> np.ndarray:
        """``[B, V]`` green masks for the next token of each row of ``input_ids [B, T]``
        (``lists``: the compat green lists to draw from, kept by the caller across steps)."""
        k = self.prefix_length
        if self.compat == MARKLLM:
            hash_key = self.markllm_key(key)
            lists = lists or GreenLists(vocab_size, self.gamma)
            # the context value of the position after each row: its last k ids
            ctx = [context_values(np.append(r[-k:], 0), vocab_size, k, "time")[0] for r in input_ids]
            return np.stack([lists.mask(self._compat_seed(hash_key, c)) for c in ctx])
        seeds = Randomness("window", context=k).generation_seeds(
            NUMPY, derive_key(key), input_ids, int(input_ids.shape[1]), None)
        return np.asarray(green_mask(NUMPY, seeds, vocab_size, self.gamma), dtype=bool)

    # ---- the model's statistics ---------------------------------------------------------
    @abstractmethod
    def position_stats(self, rows: np.ndarray) -> np.ndarray:
        """The statistic of each logits row (float32 arithmetic, as MarkLLM)."""

    def stats(self, ids: np.ndarray, logits: TokenLogits | None, vocab_size: int) -> np.ndarray:
        """Per position: :data:`NO_ENTROPY` at 0, then the statistic of the row predicting it
        (kept for the next call on the same text and model)."""
        model = require_logits(self, logits, self.model_use)
        memo = (type(self).__name__, self.gamma, self.delta, model.name, vocab_size, ids.tobytes())

        def build() -> np.ndarray:
            out = np.full(len(ids), NO_ENTROPY, dtype=np.float64)
            if len(ids) >= 2:
                out[1:] = self.position_stats(checked_logits(self, model, ids, vocab_size))
            out.setflags(write=False)
            return out

        return _STATS.get_or_build(memo, build)

    def inputs(self, token_ids: Sequence[int], key: str, vocab_size: int,
               logits: TokenLogits | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(ids, stats, green, first)`` of one text (the model is asked for before the key's
        green lists are drawn, so a missing model is reported first)."""
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        self.check_key(key)
        ids = token_id_array(token_ids, vocab_size)
        stats = self.stats(ids, logits, vocab_size)
        green, first = self.green_units(ids, key, vocab_size)
        return ids, stats, green, first

    # ---- generation -----------------------------------------------------------------------
    def gate(self, scores: Any) -> Any:
        """``[B, 1]`` bool: which rows get the green bias (all rows, unless a subclass gates)."""
        import torch

        return torch.ones((int(scores.shape[0]), 1), dtype=torch.bool, device=scores.device)

    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> "GreenBiasProcessor":
        self.check_key(key)
        return GreenBiasProcessor(self, key, vocab_size, temperature)


class GreenBiasProcessor(SchemeProcessor):
    """Adds ``delta`` to the green logits of the rows the scheme's :meth:`~EntropyGreenScheme.gate`
    lets through (MarkLLM's order: the gate reads the raw scores), then divides by the
    temperature (the provider samples at temperature 1). Rows shorter than ``prefix_length``
    are left as they are, as MarkLLM does."""

    scheme: EntropyGreenScheme

    def __init__(self, scheme: EntropyGreenScheme, key: str, vocab_size: int, temperature: float) -> None:
        super().__init__(scheme, vocab_size, temperature)
        self._key = key
        self._lists: dict[int, GreenLists] = {}  # compat green lists by width, kept across steps

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        raw, ids, as_numpy = self.torch_inputs(input_ids, scores)
        out = raw.clone()
        width = min(int(out.shape[-1]), self.vocab_size)
        host = host_f32(out) if self.scheme.compat != MARKLLM and out.ndim == 2 else None
        if ids.shape[-1] >= self.scheme.prefix_length and host is not None:
            # native green lists hashed as their bias is added, row by row in one call: the
            # same float32 sums as adding the mask times delta
            seeds = Randomness("window", context=self.scheme.prefix_length).generation_seeds(
                NUMPY, derive_key(self._key), ids, int(ids.shape[1]), None)
            gate = self.scheme.gate(raw[:, :width]).reshape(-1).cpu().numpy()
            vocab_rows.green_add(host, seeds, width, self.scheme.gamma, self.scheme.delta, gate)
        elif ids.shape[-1] >= self.scheme.prefix_length:
            lists = self._lists.get(width)
            if lists is None and self.scheme.compat == MARKLLM:
                lists = self._lists[width] = GreenLists(width, self.scheme.gamma)
            mask = torch.from_numpy(self.scheme.green_rows(ids, self._key, width, lists)).to(out.device)
            mask = mask & self.scheme.gate(raw[:, :width])
            out[:, :width] = out[:, :width] + mask.to(out.dtype) * self.scheme.delta
        if self.temperature > 0 and self.temperature != 1:
            out = out / self.temperature
        return out.numpy() if as_numpy else out


def common_params(spec: Spec, *, defaults: dict[str, float]) -> dict[str, Any]:
    """gamma, delta, prefix_length, z_threshold and compat of a SWEET/EWD spec, checked (one
    line naming the scheme and the parameter)."""
    gamma = finite_param(spec, "gamma", spec_float(spec, "gamma", defaults["gamma"], what=WHAT, lo=0.0, hi=1.0))
    if not 0.0 < gamma < 1.0:
        raise SpecError(f"{WHAT} {spec}: gamma={spec.params['gamma']} must lie strictly between 0 and 1")
    delta = finite_param(spec, "delta", spec_float(spec, "delta", defaults["delta"], what=WHAT, lo=0.0, hi=50.0))
    prefix_length = spec_int(spec, "prefix_length", int(defaults["prefix_length"]), what=WHAT, lo=1, hi=MAX_PREFIX)
    z_threshold = finite_param(spec, "z_threshold",
                               spec_float(spec, "z_threshold", defaults["z_threshold"], what=WHAT))
    compat = compat_mode(spec, spec.params.get("compat"))
    return {"gamma": gamma, "delta": delta, "prefix_length": prefix_length, "z_threshold": z_threshold,
            "compat": compat}


def canonical(name: str, params: dict[str, Any]) -> Spec:
    """The stored spec: every parameter, defaults filled in, floats as ``repr``."""
    return Spec(name=name, params={k: (repr(v) if isinstance(v, float) else str(v)) for k, v in params.items()})
