"""Detection by the native schemes: per-prefix scores and p-values of a token sequence.

:class:`NativeDetection` is the detection half of :class:`~evalrun.watermark.engine.NativeScheme`
(the other half, generation, is :mod:`evalrun.watermark.processing`). Sum scores have exact
nulls where the sampler declares one (binomial for green lists, Erlang for exponential
evidence) and seeded permutation tests otherwise; the fixed-key randomness scores every
cyclic offset of the key sequence (``align``/``edit`` scores, :mod:`evalrun.watermark.scores`).
Float evidence is summed in one fixed order on every backend, so numpy and torch give the same
bits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from evalrun.errors import EvalrunError
from evalrun.kernels import seed_words as kr
from evalrun.kernels.backend import Ops, get_ops, is_torch
from evalrun.kernels.permutation import count_at_least
from evalrun.watermark import nulls
from evalrun.watermark import randomness as rnd
from evalrun.watermark import scores as sc
from evalrun.watermark.base import Detection

if TYPE_CHECKING:
    from evalrun.watermark.engine import Sampler

#: elements per chunk of null draws (bounds memory of permutation tests)
CHUNK_ELEMENTS = 1 << 22
#: elements per chunk of the edit DP (its rows are swept n times: keep them in cache)
CHUNK_DP = 1 << 17


class NativeDetection:
    """Detection methods of a native scheme (its sampler, randomness and scoring)."""

    sampler: "Sampler"
    randomness: rnd.Randomness
    scoring: sc.Scoring
    green_list: bool
    null_seed: int

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int, *,
               backend: str | None = None) -> Detection:
        res = self.analyse(token_ids, key, vocab_size, backend=backend)
        n = len(res["p"])
        extra = dict(res["extra"])
        if n == 0:
            green = 0 if self.green_list else None
            z = 0.0 if self.green_list else None
            return Detection(0, 0.0, 1.0, green, z, extra)
        if "offset" in res:
            extra["offset"] = int(res["offset"])
        if "units" in res and self.sampler.unit_name:
            extra[f"num_{self.sampler.unit_name}_scored"] = int(res["units"][-1])
        green = int(res["green"]) if self.green_list else None
        z = float(res["z"]) if self.green_list else None
        return Detection(int(res["n"][-1]), float(res["score"][-1]), float(res["p"][-1]),
                         green, z, extra)

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int, *,
                        backend: str | None = None) -> np.ndarray:
        return self.analyse(token_ids, key, vocab_size, backend=backend)["p"]

    def analyse(self, token_ids: Sequence[int] | Any, key: str, vocab_size: int, *,
                backend: str | None = None) -> dict[str, Any]:
        """Per-prefix arrays ``score``, ``p``, ``n`` (tokens scored) and final-prefix extras."""
        if vocab_size < 2:
            raise EvalrunError(f"vocab size must be at least 2, got {vocab_size}")
        ops = get_ops(backend, token_ids)
        tokens_np = _as_token_array(token_ids, vocab_size)
        tokens = ops.i64(token_ids if is_torch(token_ids) else tokens_np)
        key_word = rnd.derive_key(key)
        if self.randomness.fixed:
            return self._analyse_fixed(ops, tokens, key_word, vocab_size)
        return self._analyse_sum(ops, tokens, key_word, vocab_size)

    def _null_chunks(self, ops: Ops, per_key: int, budget: int = CHUNK_ELEMENTS) -> Any:
        total = self.scoring.permutations
        keys = kr.null_keys(ops, self.null_seed, total)
        step = max(1, budget // max(per_key, 1))
        for start in range(0, total, step):
            yield keys[start : start + step]

    def _analyse_sum(self, ops: Ops, tokens: Any, key_word: int, vocab_size: int) -> dict[str, Any]:
        s, r = self.sampler, self.randomness
        n = int(tokens.shape[0])
        key = ops.u64([key_word])
        seeds, scored = r.text_seeds(ops, key, tokens)
        ev, units = s.sum_terms(ops, seeds, tokens, scored, vocab_size, self.scoring.count_repeats)
        # counts (units, green flags) are sums of small integers: exact in any order; float
        # evidence goes through ordered_cumsum so every backend adds it in the same order
        cum_units = ops.to_numpy(ops.cumsum(units, axis=-1)).round().astype(np.int64)
        counted = ops.to_numpy(units) > 0
        out: dict[str, Any] = {"n": np.cumsum(counted).astype(np.int64), "units": cum_units}
        if s.exact_null == "binomial":
            green = ops.to_numpy(ops.cumsum(ev, axis=-1)).round().astype(np.int64)
            gamma = s.green_fraction
            out["score"] = green.astype(np.float64)
            out["p"] = nulls.binomial_p(green, cum_units, gamma)
            if n:
                out["green"] = green[-1]
                out["z"] = nulls.z_scores(green[-1:], cum_units[-1:], gamma)[0]
            out["extra"] = {"null": "binomial"}
            return out
        if s.exact_null == "erlang":
            total = ops.to_numpy(ops.ordered_cumsum(ev, axis=-1))
            out["score"] = total
            out["p"] = nulls.erlang_p(total, cum_units)
            out["extra"] = {"null": "erlang"}
            return out
        mu = s.null_mean(vocab_size)
        observed = ops.ordered_cumsum(ev - mu * units, axis=-1)
        counts = np.zeros(n, dtype=np.int64)
        for keys in self._null_chunks(ops, n * s.units_per_token(vocab_size)):
            nseeds, nscored = r.text_seeds(ops, keys[:, None], tokens)
            nev, nunits = s.sum_terms(ops, nseeds, tokens, nscored, vocab_size,
                                      self.scoring.count_repeats)
            null = ops.ordered_cumsum(nev - mu * nunits, axis=-1)
            counts += ops.to_numpy(count_at_least(ops, observed, null)).astype(np.int64)
        out["score"] = ops.to_numpy(observed).astype(np.float64)
        out["p"] = nulls.permutation_p_values(counts, self.scoring.permutations)
        out["extra"] = self._perm_extra()
        return out

    def _perm_extra(self) -> dict[str, Any]:
        n = self.scoring.permutations
        return {"null": "permutation", "permutations": n, "p_value_resolution": 1.0 / (n + 1)}

    def _offset_matrix(self, ops: Ops, keys: Any, tokens: Any, vocab_size: int) -> Any:
        """``M[k, i, m]``: centred evidence of token i against key position m of key k."""
        seq, active = self.randomness.key_sequence(ops, keys)  # [K, L]
        m = self.sampler.centered_stat(ops, seq[:, None, :], tokens[None, :, None], vocab_size)
        return ops.where(active[:, None, :], m, 0.0)

    def _analyse_fixed(self, ops: Ops, tokens: Any, key_word: int, vocab_size: int) -> dict[str, Any]:
        s, r, scoring = self.sampler, self.randomness, self.scoring
        n = int(tokens.shape[0])
        out: dict[str, Any] = {"n": np.arange(1, n + 1, dtype=np.int64)}
        if n == 0:
            out.update(score=np.zeros(0), p=np.zeros(0), extra=self._perm_extra())
            return out
        key = ops.u64([key_word])
        observed, offsets = sc.offset_scores(ops, scoring, self._offset_matrix(ops, key, tokens,
                                                                                vocab_size))
        counts = np.zeros(n, dtype=np.int64)
        per_key = n * r.key_len * s.units_per_token(vocab_size)
        if scoring.kind == "edit":
            chunks = self._null_chunks(ops, n * r.key_len, CHUNK_DP)
        else:
            chunks = self._null_chunks(ops, per_key)
        for keys in chunks:
            null, _ = sc.offset_scores(ops, scoring, self._offset_matrix(ops, keys, tokens,
                                                                         vocab_size))
            counts += ops.to_numpy(count_at_least(ops, observed, null)).astype(np.int64)
        out["score"] = ops.to_numpy(observed[0]).astype(np.float64)
        out["p"] = nulls.permutation_p_values(counts, scoring.permutations)
        offset = int(ops.to_numpy(offsets[0])[-1])
        out["offset"] = offset
        out["extra"] = self._perm_extra()
        if self.green_list:
            seq, active = r.key_sequence(ops, key)
            idx = (ops.arange(n) + offset) % r.key_len
            green = s.token_stat(ops, seq[0][idx], tokens, vocab_size) & active[0][idx]
            g = int(ops.to_numpy(ops.count_true(green, axis=0)))
            out["green"] = g
            out["z"] = float(nulls.z_scores(np.array([g]), np.array([n]), s.green_fraction)[0])
        return out



def _as_token_array(token_ids: Sequence[int] | Any, vocab_size: int) -> np.ndarray:
    """Token ids as int64, checked against the vocabulary."""
    if is_torch(token_ids):
        arr = token_ids.detach().cpu().numpy()
    else:
        arr = np.asarray(list(token_ids) if not isinstance(token_ids, np.ndarray) else token_ids)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise EvalrunError("token ids must be a flat list of integers")
    arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr >= vocab_size)
    if bad.any():
        i = int(np.argmax(bad))
        raise EvalrunError(f"token id {int(arr[i])} at position {i} is outside the vocabulary "
                           f"[0, {vocab_size})")
    return arr
