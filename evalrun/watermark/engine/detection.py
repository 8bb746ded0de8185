"""Detection by the native schemes: per-prefix scores and p-values of a token sequence.

:class:`NativeDetection` is the detection half of :class:`~evalrun.watermark.engine.NativeScheme`
(the other half, generation, is :mod:`evalrun.watermark.engine.processing`). Sum scores have exact
nulls where the sampler declares one (binomial for green lists, Erlang for exponential
evidence) and seeded permutation tests otherwise; the fixed-key randomness scores every
cyclic offset of the key sequence (``align``/``edit`` scores, :mod:`evalrun.watermark.engine.scores`),
on the numpy backend through the compiled kernel :mod:`evalrun.kernels.offset_scores` where the
install built it, on torch with a batch of texts and a chunk of null keys in each pass. Float evidence is summed in one fixed order on every backend and in that
kernel, so numpy, torch and the kernel give the same bits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from evalrun._util.errors import EvalrunError
from evalrun.kernels import offset_scores as offset_kernel
from evalrun.kernels import seed_words as kr
from evalrun.kernels.backend import NUMPY, Ops, get_ops, is_torch
from evalrun.kernels.permutation import count_at_least
from evalrun.watermark.base import Detection, checked_int64_arrays
from evalrun.watermark.engine import nulls
from evalrun.watermark.engine import randomness as rnd
from evalrun.watermark.engine import scores as sc

if TYPE_CHECKING:
    from evalrun.watermark.engine.sampler import Sampler

#: elements per chunk of null draws (bounds memory of permutation tests)
CHUNK_ELEMENTS = 1 << 22
#: elements per chunk of the edit DP (its rows are swept n times: keep them in cache)
CHUNK_DP = 1 << 17
#: key-sequence words per chunk of null keys on the compiled fixed-key path
CHUNK_KEY_WORDS = 1 << 20
#: scored units per ragged pass of the batched detectors (texts are never split; a pass
#: holds at least one text): bounds their memory and keeps the arrays near the caches
BATCH_ELEMENTS = 1 << 16
#: how many times larger the null-key chunks of fixed-key detection are off the CPU: a GPU
#: needs big batches to fill it and has the memory for them (2**5: chunks of ``M`` of 128 M
#: float64 entries, 1 GiB)
DEVICE_SCALE = 1 << 5
#: arrays of a chunk's size alive at once at the peak (M, its gathered diagonals, their
#: prefix sums, and the evidence's intermediates), with room to spare
PEAK_ARRAYS = 8


def _scale(ops: Ops) -> int:
    """1 on the CPU; on an accelerator :data:`DEVICE_SCALE`, or less where the device's free
    memory would not hold :data:`PEAK_ARRAYS` chunks of that size (a small GPU gets smaller
    chunks, not an out-of-memory error)."""
    device = getattr(ops, "device", None)
    if device is None or getattr(device, "type", "cpu") == "cpu":
        return 1
    try:
        free, _total = ops.torch.cuda.mem_get_info(device)
    except Exception:  # not CUDA, or no such query: the default size
        return DEVICE_SCALE
    fit = int(free) // (CHUNK_ELEMENTS * 8 * PEAK_ARRAYS)
    return max(1, min(DEVICE_SCALE, fit))


class NativeDetection:
    """Detection methods of a native scheme (its sampler, randomness and scoring)."""

    sampler: "Sampler"
    randomness: rnd.Randomness
    scoring: sc.Scoring
    green_list: bool
    null_seed: int

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int, *,
               backend: str | None = None) -> Detection:
        return self._detection(self.analyse(token_ids, key, vocab_size, backend=backend))

    def _detection(self, res: dict[str, Any]) -> Detection:
        """The Detection of one text from its :meth:`analyse` result."""
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

    # ---- batched detection (ragged) ----------------------------------------------------
    def detect_many(self, token_id_arrays: Sequence[Sequence[int]], key: str, vocab_size: int,
                    *, backend: str | None = None) -> list[Detection]:
        """:meth:`detect` of every sequence, bit for bit, in few kernel passes.

        Sum scores (window and min-hash randomness) lay the texts end to end and score them
        together: one pass computes every position's seed (context never crosses a text's
        start), statistic and repeat mask (repeats within a text only), and per-text totals
        come from segment offsets; permutation tests rescore the whole batch under each
        chunk of null keys. Fixed-key scores (align, edit): on torch (a GPU above all) the
        texts, padded to a common length, and a chunk of null keys are scored in one batch
        (:meth:`_fixed_many`); on numpy one text at a time, through the compiled kernel."""
        if self.randomness.fixed:
            return [self._detection(res) for res in self._fixed_many(token_id_arrays, key,
                                                                      vocab_size, backend)]
        return self._many(token_id_arrays, key, vocab_size, backend, prefixes=False)

    def prefix_p_values_many(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                             vocab_size: int, *, backend: str | None = None) -> list[np.ndarray]:
        """:meth:`prefix_p_values` of every sequence, bit for bit (see :meth:`detect_many`)."""
        if self.randomness.fixed:
            return [res["p"] for res in self._fixed_many(token_id_arrays, key, vocab_size, backend)]
        return self._many(token_id_arrays, key, vocab_size, backend, prefixes=True)

    def _fixed_many(self, token_id_arrays: Sequence[Any], key: str, vocab_size: int,
                    backend: str | None) -> list[dict[str, Any]]:
        """:meth:`analyse` of every text under a fixed key. numpy: text by text (the compiled
        kernel, or numpy's reference). torch: texts sorted by length and cut into passes of at
        most an eighth of a null chunk's evidence entries per key (so a chunk holds 8 keys or
        more), each pass scored under the key and every chunk of null keys at once
        (:meth:`_fixed_batch`): launches per chunk and prefix step, none per text or key."""
        inputs = list(token_id_arrays)
        ops = get_ops(backend, *[a for a in inputs if is_torch(a)][:1])
        if ops.name == "numpy":
            return [self.analyse(ids, key, vocab_size, backend="numpy") for ids in inputs]
        if vocab_size < 2:
            raise EvalrunError(f"vocab size must be at least 2, got {vocab_size}")
        arrays = _as_token_arrays(inputs, vocab_size)  # raises as analyse would
        key_word = rnd.derive_key(key)
        out: list[dict[str, Any] | None] = [None] * len(arrays)
        budget = self._chunk_budget(ops) // 8
        order = sorted(range(len(arrays)), key=lambda i: len(arrays[i]))
        start = 0
        while start < len(order):
            if len(arrays[order[start]]) == 0:  # analyse's own empty result
                out[order[start]] = self._analyse_fixed(ops, ops.i64(arrays[order[start]]),
                                                        key_word, vocab_size)
                start += 1
                continue
            stop = start + 1  # the pass's padded length is its last (longest) text's
            while (stop < len(order) and (stop + 1 - start) * len(arrays[order[stop]])
                   * self.randomness.key_len <= budget):
                stop += 1
            batch = order[start:stop]
            for i, res in zip(batch, self._fixed_batch(ops, [arrays[i] for i in batch],
                                                       key_word, vocab_size)):
                out[i] = res
            start = stop
        return [res for res in out if res is not None]

    def _chunk_budget(self, ops: Ops) -> int:
        """Evidence entries per chunk of null keys on ``ops``: the edit DP's state, swept n
        times, is kept small enough for the CPU's caches; an accelerator takes
        :data:`DEVICE_SCALE` x :data:`CHUNK_ELEMENTS` for both scores."""
        scale = _scale(ops)
        if scale > 1:
            return CHUNK_ELEMENTS * scale
        return CHUNK_DP if self.scoring.kind == "edit" else CHUNK_ELEMENTS

    def _fixed_batch(self, ops: Ops, arrays: list[np.ndarray], key_word: int,
                     vocab_size: int) -> list[dict[str, Any]]:
        """:meth:`_analyse_fixed` of non-empty texts together, bit for bit: the texts padded
        with token 0 to the longest (a prefix's align or edit score reads its own positions
        only, so the padding changes no prefix of a text), ``M`` of ``[keys, texts, n, L]``."""
        s, r, scoring = self.sampler, self.randomness, self.scoring
        lengths = [len(a) for a in arrays]
        n = max(lengths)
        padded = np.zeros((len(arrays), n), dtype=np.int64)
        for t, a in enumerate(arrays):
            padded[t, : len(a)] = a
        tokens = ops.i64(padded)
        key = ops.u64([key_word])
        observed, offsets = sc.offset_scores(ops, scoring, self._offset_matrix(ops, key, tokens,
                                                                                vocab_size))
        counts = np.zeros((len(arrays), n), dtype=np.int64)
        per_key = len(arrays) * n * r.key_len
        if scoring.kind != "edit":
            per_key *= s.units_per_token(vocab_size)
        for keys in self._null_chunks(ops, per_key, self._chunk_budget(ops)):
            null, _ = sc.offset_scores(ops, scoring, self._offset_matrix(ops, keys, tokens,
                                                                         vocab_size))
            counts += ops.to_numpy(count_at_least(ops, observed, null)).astype(np.int64)
        score = ops.to_numpy(observed[0]).astype(np.float64)
        offset = ops.to_numpy(offsets[0])
        out = []
        for t, m in enumerate(lengths):
            res: dict[str, Any] = {"n": np.arange(1, m + 1, dtype=np.int64),
                                   "score": score[t, :m].copy(),
                                   "p": nulls.permutation_p_values(counts[t, :m], scoring.permutations),
                                   "offset": int(offset[t, m - 1]), "extra": self._perm_extra()}
            if self.green_list:
                res.update(self._green(ops, tokens[t, :m], key, res["offset"], vocab_size))
            out.append(res)
        return out

    def _many(self, token_id_arrays: Sequence[Any], key: str, vocab_size: int,
              backend: str | None, prefixes: bool) -> list[Any]:
        if vocab_size < 2:
            raise EvalrunError(f"vocab size must be at least 2, got {vocab_size}")
        inputs = list(token_id_arrays)
        ops = get_ops(backend, *[a for a in inputs if is_torch(a)][:1])
        arrays = _as_token_arrays(inputs, vocab_size)  # raises as detect would
        key_word = rnd.derive_key(key)
        budget = max(1, BATCH_ELEMENTS // self.sampler.units_per_token(vocab_size))
        out: list[Any] = []
        start = 0
        while start < len(arrays):  # passes of about ``budget`` tokens (bounds memory)
            stop, size = start, 0
            while stop < len(arrays) and (stop == start or size + len(arrays[stop]) <= budget):
                size += len(arrays[stop])
                stop += 1
            out.extend(self._sum_many(ops, arrays[start:stop], key_word, vocab_size, prefixes))
            start = stop
        return out

    def _sum_many(self, ops: Ops, arrays: list[np.ndarray], key_word: int, vocab_size: int,
                  prefixes: bool) -> list[Any]:
        """One ragged pass of :meth:`_analyse_sum` over ``arrays``: Detections, or prefix
        p-value arrays when ``prefixes``."""
        s, r, scoring = self.sampler, self.randomness, self.scoring
        lay = _Layout(arrays)
        tokens = ops.i64(lay.flat)
        local = ops.i64(lay.local)
        segments = ops.i64(lay.segment)
        key = ops.u64([key_word])
        seeds, scored = r.text_seeds(ops, key, tokens, local)
        ev, units = s.sum_terms(ops, seeds, tokens, scored, vocab_size, scoring.count_repeats,
                                segments)
        units_np = ops.to_numpy(units)
        units_int = units_np.round().astype(np.int64)
        # integer counts: every prefix's running sum, or (detections) each text's total only
        if prefixes:
            cum_units = lay.int_cumsum(units_int)
        else:
            u, n = lay.totals(units_int), lay.totals((units_np > 0).astype(np.int64))
        if s.exact_null == "binomial":
            gamma = s.green_fraction
            assert gamma is not None  # samplers with a binomial null set their green fraction
            ev_int = ops.to_numpy(ev).round().astype(np.int64)
            if prefixes:
                return lay.split(nulls.binomial_p(lay.int_cumsum(ev_int), cum_units, gamma))
            g = lay.totals(ev_int)
            return lay.detections(self, n, g.astype(np.float64), nulls.binomial_p(g, u, gamma),
                                  {"null": "binomial"}, units=u, green=g,
                                  z=nulls.z_scores(g, u, gamma))
        if s.exact_null == "erlang":
            total = ops.to_numpy(lay.ordered_cumsum(ops, ev))
            if prefixes:
                return lay.split(nulls.erlang_p(total, cum_units))
            t = lay.last(total)
            return lay.detections(self, n, t, nulls.erlang_p(t, u), {"null": "erlang"}, units=u)
        mu = s.null_mean(vocab_size)
        observed = lay.ordered_cumsum(ops, ev - mu * units)
        counts = np.zeros(lay.size, dtype=np.int64)
        for keys in self._null_chunks(ops, lay.size * s.units_per_token(vocab_size)):
            nseeds, nscored = r.text_seeds(ops, keys[:, None], tokens, local)
            nev, nunits = s.sum_terms(ops, nseeds, tokens, nscored, vocab_size,
                                      scoring.count_repeats, segments)
            null = lay.ordered_cumsum(ops, nev - mu * nunits)
            counts += ops.to_numpy(count_at_least(ops, observed, null)).astype(np.int64)
        p_all = nulls.permutation_p_values(counts, scoring.permutations)
        if prefixes:
            return lay.split(p_all)
        score = ops.to_numpy(observed).astype(np.float64)
        return lay.detections(self, n, lay.last(score), lay.last(p_all), self._perm_extra(),
                              units=u)

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
            assert gamma is not None  # samplers with a binomial null set their green fraction
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
        """``M[k, ..., i, m]``: centred evidence of token i (of ``tokens [..., n]``) against key
        position m of key k."""
        seq, active = self.randomness.key_sequence(ops, keys)  # [K, L]
        lead = (int(seq.shape[0]),) + (1,) * int(tokens.ndim) + (int(seq.shape[-1]),)
        m = self.sampler.centered_stat(ops, seq.reshape(lead), tokens[None, ..., None], vocab_size)
        return ops.where(active.reshape(lead), m, 0.0)

    def _analyse_fixed(self, ops: Ops, tokens: Any, key_word: int, vocab_size: int) -> dict[str, Any]:
        s, scoring = self.sampler, self.scoring
        n = int(tokens.shape[0])
        out: dict[str, Any] = {"n": np.arange(1, n + 1, dtype=np.int64)}
        if n == 0:
            out.update(score=np.zeros(0), p=np.zeros(0), extra=self._perm_extra())
            return out
        key = ops.u64([key_word])
        stat = (s.compiled_offset_stat(vocab_size)
                if ops.name == "numpy" and offset_kernel.compiled_available() else None)
        if stat is not None:
            score, offset, counts = self._fixed_compiled(stat, tokens, key, vocab_size)
        else:
            score, offset, counts = self._fixed_reference(ops, tokens, key, vocab_size)
        out["score"] = score
        out["p"] = nulls.permutation_p_values(counts, scoring.permutations)
        out["offset"] = offset
        out["extra"] = self._perm_extra()
        if self.green_list:
            out.update(self._green(ops, tokens, key, offset, vocab_size))
        return out

    def _green(self, ops: Ops, tokens: Any, key: Any, offset: int, vocab_size: int) -> dict[str, Any]:
        """Green count and z-score of a text read at the key offset it aligns best with."""
        s, r = self.sampler, self.randomness
        n = int(tokens.shape[0])
        seq, active = r.key_sequence(ops, key)
        idx = (ops.arange(n) + offset) % r.key_len
        green = s.token_stat(ops, seq[0][idx], tokens, vocab_size) & active[0][idx]
        g = int(ops.to_numpy(ops.count_true(green, axis=0)))
        assert s.green_fraction is not None  # green-list samplers set their green fraction
        return {"green": g,
                "z": float(nulls.z_scores(np.array([g]), np.array([n]), s.green_fraction)[0])}

    def _fixed_reference(self, ops: Ops, tokens: Any, key: Any, vocab_size: int,
                         ) -> tuple[np.ndarray, int, np.ndarray]:
        """Every prefix's score, the last prefix's best offset and the null exceedance
        counts, from ``M`` built whole (:meth:`_offset_matrix`) on any backend: the reference
        the compiled kernel reproduces, and the path of torch and of installs without it."""
        s, r, scoring = self.sampler, self.randomness, self.scoring
        n = int(tokens.shape[0])
        observed, offsets = sc.offset_scores(ops, scoring, self._offset_matrix(ops, key, tokens,
                                                                                vocab_size))
        counts = np.zeros(n, dtype=np.int64)
        per_key = n * r.key_len * (1 if scoring.kind == "edit" else s.units_per_token(vocab_size))
        for keys in self._null_chunks(ops, per_key, self._chunk_budget(ops)):
            null, _ = sc.offset_scores(ops, scoring, self._offset_matrix(ops, keys, tokens,
                                                                         vocab_size))
            counts += ops.to_numpy(count_at_least(ops, observed, null)).astype(np.int64)
        score = ops.to_numpy(observed[0]).astype(np.float64)
        return score, int(ops.to_numpy(offsets[0])[-1]), counts

    def _fixed_compiled(self, stat: offset_kernel.CompiledStat, tokens: np.ndarray, key: Any,
                        vocab_size: int) -> tuple[np.ndarray, int, np.ndarray]:
        """:meth:`_fixed_reference` on the numpy backend, bit for bit, by the compiled kernel
        (:mod:`evalrun.kernels.offset_scores`): one key and one row of ``M`` at a time."""
        r, scoring = self.randomness, self.scoring
        null_mean = self.sampler.null_mean(vocab_size)

        def scores(keys: Any, offsets: bool) -> tuple[np.ndarray, Any]:
            seq, active = r.key_sequence(NUMPY, keys)
            return offset_kernel.offset_scores(stat, scoring.kind, seq, active, tokens,
                                               vocab_size, null_mean, psi=scoring.psi,
                                               offsets=offsets)

        best, arg = scores(key, True)
        observed = best[0]
        counts = np.zeros(int(tokens.shape[0]), dtype=np.int64)
        # key sequences of a chunk of null keys: [keys, L] words (a million permutations
        # would otherwise hold a million sequences at once)
        for keys in self._null_chunks(NUMPY, r.key_len, CHUNK_KEY_WORDS):
            null, _ = scores(keys, False)
            counts += np.count_nonzero(null >= observed[None, :], axis=0)
        return observed, int(arg[0, -1]), counts


def _as_token_array(token_ids: Sequence[int] | Any, vocab_size: int) -> np.ndarray:
    """Token ids as int64, checked against the vocabulary."""
    if is_torch(token_ids):
        arr = token_ids.detach().cpu().numpy()  # type: ignore[union-attr]  # a torch tensor (is_torch)
    else:
        arr = np.asarray(list(token_ids) if not isinstance(token_ids, np.ndarray) else token_ids)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim == 1 and arr.dtype == object and all(type(v) is int for v in arr.tolist()):
        # Python ints beyond 64 bits: name the first one outside the vocabulary
        i = next(i for i, v in enumerate(arr.tolist()) if not 0 <= v < vocab_size)
        raise _outside_vocabulary(arr[i], i, vocab_size)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise EvalrunError("token ids must be a flat list of integers")
    arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr >= vocab_size)
    if bad.any():
        i = int(np.argmax(bad))
        raise _outside_vocabulary(int(arr[i]), i, vocab_size)
    return arr


def _outside_vocabulary(token: int, position: int, vocab_size: int) -> EvalrunError:
    return EvalrunError(f"token id {token} at position {position} is outside the vocabulary "
                        f"[0, {vocab_size})")


def _as_token_arrays(inputs: list[Any], vocab_size: int) -> list[np.ndarray]:
    """:func:`_as_token_array` of every input; flat int64 arrays (what ``evalrun detect
    --tokens`` reads) are checked in one pass over all of them instead of one call each."""
    if checked_int64_arrays(inputs, vocab_size):
        return inputs
    return [_as_token_array(a, vocab_size) for a in inputs]


class _Layout:
    """Texts laid end to end for one ragged pass: the concatenated ids, each position's text
    (``segment``) and index inside it (``local``), and per-text reductions that give each
    text exactly what it gets when scored alone."""

    def __init__(self, arrays: list[np.ndarray]) -> None:
        self.count = len(arrays)
        self.lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=self.count)
        self.ends = np.cumsum(self.lengths)
        self.starts = self.ends - self.lengths
        self.size = int(self.ends[-1]) if self.count else 0
        self.flat = (np.concatenate(arrays) if self.size else np.zeros(0, dtype=np.int64))
        self.segment = np.repeat(np.arange(self.count, dtype=np.int64), self.lengths)
        self.local = np.arange(self.size, dtype=np.int64) - np.repeat(self.starts, self.lengths)
        self.nonempty = self.lengths > 0
        self.max_len = int(self.lengths.max()) if self.count else 0

    def int_cumsum(self, x: np.ndarray) -> np.ndarray:
        """Per-text running sums of integers (exact in any order: one global cumsum minus
        each text's offset)."""
        cum = np.cumsum(x, dtype=np.int64)
        before = np.concatenate([[0], cum])[self.starts]
        return cum - np.repeat(before, self.lengths)

    def ordered_cumsum(self, ops: Ops, x: Any) -> Any:
        """Per-text :meth:`Ops.ordered_cumsum` along the last axis of ``x [..., size]``: each
        text's floats added left to right from its own start (the single-text order)."""
        if self.count <= 1:
            return ops.ordered_cumsum(x, axis=-1)
        if ops.name == "numpy" and self.count * self.max_len <= 2 * self.size + 4096:
            # rows of a padded [count, max_len] block (padding repeats a text's last entry,
            # after every real prefix): numpy accumulates each row left to right
            idx = self.starts[:, None] + np.minimum(np.arange(self.max_len)[None, :],
                                                    np.maximum(self.lengths - 1, 0)[:, None])
            idx = np.minimum(idx, max(self.size - 1, 0))
            rows = np.cumsum(np.take(x, idx, axis=-1), axis=-1)
            flat = rows.reshape(tuple(x.shape[:-1]) + (self.count * self.max_len,))
            return np.take(flat, self.segment * self.max_len + self.local, axis=-1)
        parts = [ops.ordered_cumsum(x[..., a:b], axis=-1)
                 for a, b in zip(self.starts.tolist(), self.ends.tolist()) if b > a]
        return ops.concat(parts, axis=-1) if parts else x

    def totals(self, x: np.ndarray) -> np.ndarray:
        """Each text's sum of integers (0 for empty texts): one global running sum read at
        the text boundaries, exact in any order."""
        cum = np.zeros(self.size + 1, dtype=np.int64)
        np.cumsum(x, dtype=np.int64, out=cum[1:])
        return cum[self.ends] - cum[self.starts]

    def last(self, x: np.ndarray) -> np.ndarray:
        """Each text's last entry (0 for empty texts, which the callers do not read)."""
        return np.where(self.nonempty, x[np.maximum(self.ends - 1, 0)] if self.size else 0, 0)

    def split(self, x: np.ndarray) -> list[np.ndarray]:
        return np.split(x, self.ends[:-1]) if self.count else []

    def detections(self, scheme: "NativeDetection", n: np.ndarray, score: np.ndarray,
                   p: np.ndarray, extra: dict[str, Any], *, units: np.ndarray,
                   green: np.ndarray | None = None, z: np.ndarray | None = None,
                   ) -> list[Detection]:
        """One :class:`Detection` per text, built as :meth:`NativeDetection.detect` builds it."""
        unit_key = f"num_{scheme.sampler.unit_name}_scored" if scheme.sampler.unit_name else None
        gl = scheme.green_list
        out = []
        n_l, s_l, p_l, u_l = n.tolist(), score.tolist(), p.tolist(), units.tolist()
        g_l = green.tolist() if green is not None else None
        z_l = z.tolist() if z is not None else None
        for i, length in enumerate(self.lengths.tolist()):
            if length == 0:
                out.append(Detection(0, 0.0, 1.0, 0 if gl else None, 0.0 if gl else None,
                                     dict(extra)))
                continue
            ex = dict(extra)
            if unit_key:
                ex[unit_key] = int(u_l[i])
            out.append(Detection(int(n_l[i]), float(s_l[i]), float(p_l[i]),
                                 int(g_l[i]) if gl and g_l is not None else None,
                                 float(z_l[i]) if gl and z_l is not None else None, ex))
        return out
