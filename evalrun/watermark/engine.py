"""The native watermark engine: randomness source x sampling algorithm x score (seed 000 VII).

A :class:`Sampler` (one per scheme module: kgw, exp, binary, its) supplies per-token
statistics and the token choice at generation; :class:`NativeScheme` combines it with a
:class:`~evalrun.watermark.randomness.Randomness` and a
:class:`~evalrun.watermark.scores.Scoring` into a :class:`WatermarkScheme`.

Kernels run on numpy or torch (see :mod:`evalrun.kernels.backend`); ``detect`` and
``prefix_p_values`` accept ``backend=`` to override the automatic choice.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from evalrun.errors import EvalrunError, SpecError
from evalrun.hashing import stable_int
from evalrun.kernels import randomness as kr
from evalrun.kernels.backend import NUMPY, Ops, TorchOps, get_ops, is_torch
from evalrun.kernels.hashing import code, pair
from evalrun.kernels.permutation import count_at_least
from evalrun.kernels.stats import first_occurrence
from evalrun.specs import Spec, check_keys
from evalrun.watermark import nulls
from evalrun.watermark import randomness as rnd
from evalrun.watermark import scores as sc
from evalrun.watermark.base import Detection, WatermarkScheme
from evalrun.watermark.mask_tables import add_packed, previous_tokens
from evalrun.watermark.seed_tables import seed_tables

#: elements per chunk of null draws (bounds memory of permutation tests)
CHUNK_ELEMENTS = 1 << 22
#: most context tuples one seed memo holds (then it starts afresh)
MEMO_LIMIT = 1 << 15
#: elements per chunk of the edit DP (its rows are swept n times: keep them in cache)
CHUNK_DP = 1 << 17


class Workspace:
    """Output buffers a sampler reuses from step to step, by name, backend, device, shape and
    dtype. A fresh ``[B, V]`` array per step means fresh pages from the allocator, and on CPU
    the page faults cost as much as the arithmetic; a buffer stays mapped. Results handed to
    callers are never views of these buffers."""

    def __init__(self, limit: int = 16) -> None:
        self.limit = limit
        self._buffers: dict[tuple[Any, ...], Any] = {}

    def get(self, ops: Ops, name: str, like: Any, dtype: str | None = None) -> Any:
        """A buffer shaped like ``like``, of its dtype (or float64 with ``dtype="f64"``)."""
        # hashable as they are (no string formatting: this runs every decoding step)
        key = (name, ops.name, getattr(ops, "device", None), like.shape, dtype, like.dtype)
        buf = self._buffers.get(key)
        if buf is None:
            shape = tuple(int(d) for d in like.shape)
            if len(self._buffers) >= self.limit:
                self._buffers.clear()
            buf = ops.zeros(shape) if dtype == "f64" else ops.cast_like(ops.zeros(shape), like)
            self._buffers[key] = buf
        return buf


class Sampler(ABC):
    """Sampling algorithm C and its per-token statistic s (evidence: larger = watermarked)."""

    name: str
    #: "binomial" or "erlang" when the sum score has an exact null, else None
    exact_null: str | None = None
    green_list: bool = False
    #: names of the sampler's own spec keys
    keys: frozenset[str] = frozenset()

    def params(self) -> dict[str, str]:
        return {}

    def units_per_token(self, vocab_size: int) -> int:
        """Work per (seed, token) pair, for sizing chunks."""
        return 1

    @abstractmethod
    def token_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        """Evidence of (seed, token) pairs (shapes broadcast)."""

    @abstractmethod
    def null_mean(self, vocab_size: int) -> float:
        """Expected evidence of one scored unit under the null hypothesis."""

    def centered_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        """Evidence minus its null mean (0 contributes nothing to align/edit)."""
        return ops.f64(self.token_stat(ops, seeds, tokens, vocab_size)) - self.null_mean(vocab_size)

    def sum_terms(self, ops: Ops, seeds: Any, tokens: Any, scored: Any, vocab_size: int,
                  count_repeats: bool) -> tuple[Any, Any]:
        """Per-position evidence and number of scored units for the sum score, zero at
        unscored positions and (unless ``count_repeats``) at repeated (seed, token) pairs."""
        mask = scored
        if not count_repeats:
            mask = mask & first_occurrence(ops, pair(ops, seeds, code(ops, tokens)))
        ev = ops.where(mask, ops.f64(self.token_stat(ops, seeds, tokens, vocab_size)), 0.0)
        return ev, ops.f64(mask)

    @property
    def workspace(self) -> Workspace:
        """This sampler's reusable step buffers (made on first use)."""
        work = self.__dict__.get("_workspace")
        if work is None:
            work = self.__dict__["_workspace"] = Workspace()
        return work

    #: True when the sampler picks each watermarked token itself (exp, binary, its), so the
    #: caller does not sample those rows; False when it reshapes the scores (kgw)
    chooses: bool = False
    #: True when :meth:`apply` writes into the ``logits`` it is given
    overwrites: bool = False
    #: how :meth:`seed_table` rows are kept: "float" in the scores' dtype, "index" as int64,
    #: both in numpy when :func:`host_view` works on the scores and on their device otherwise;
    #: "host" always as numpy float64
    table_kind: str = "float"

    @abstractmethod
    def seed_table(self, ops: Ops, seeds: Any, width: int, vocab_size: int) -> Any:
        """``[m, W]`` rows that depend on the seed alone (memoised per seed by the processor);
        ``width`` is the number of score columns (``>= vocab_size``)."""

    #: set by samplers whose table rows are ``mask_bias`` on a mask and 0 elsewhere and whose
    #: step only adds them (kgw): their rows may be kept as packed bits
    #: (:mod:`evalrun.watermark.mask_tables`)
    mask_bias: float | None = None

    def seed_mask(self, ops: Ops, seeds: Any, width: int) -> Any:
        """Boolean ``[m, W]`` masks of the columns that get :attr:`mask_bias`: here the
        nonzero entries of :meth:`seed_table`; samplers may compute the mask directly."""
        return self.seed_table(ops, seeds, width, width) != 0

    @abstractmethod
    def apply(self, ops: Ops, rows: list[Any], logits: Any, temperature: float, vocab_size: int,
              hash_ops: Ops, words: list[int]) -> Any:
        """The watermarked step of the rows ``logits [B, V']`` (the scores' dtype, before
        temperature; ``temperature > 0`` unless the sampler is a green list), computed with
        ``ops`` (the scores' backend), given each row's table row ``rows[b]`` and seed word
        ``words[b]``: new scores to sample at temperature 1 (argmax at 0), or the chosen
        tokens ``[B]`` when :attr:`chooses`. The caller owns ``logits`` for the call: samplers
        that :attr:`overwrite <overwrites>` work in place rather than in a new ``[B, V]`` array
        (on CPU a fresh array per step costs its page faults, and every array a step touches
        beyond the model's own logits comes cold from memory after the forward pass)."""


def only_token(ops: Ops, shape: tuple[int, int], chosen: Any) -> Any:
    """Scores that are -inf everywhere except 0 at ``chosen[b]``."""
    out = ops.full(shape, float("-inf"))
    return ops.put_along(out, chosen[:, None], 0.0, axis=1)


def sampling_probs(ops: Ops, logits: Any, temperature: float, vocab_size: int) -> Any:
    """Temperature-scaled probabilities over the first ``vocab_size`` columns."""
    x = logits if int(logits.shape[1]) == vocab_size else logits[:, :vocab_size]
    return ops.softmax(x / temperature if temperature != 1 else x)


def build_native(spec: Spec, sampler: Sampler, what: str = "--watermark") -> "NativeScheme":
    """Validate ``spec`` for ``sampler`` and build the scheme with its canonical spec."""
    check_keys(spec, rnd.KEYS | sc.KEYS | sampler.keys, what=what)
    randomness = rnd.parse_randomness(spec, what)
    scoring = sc.parse_scoring(spec, what, randomness, sampler.exact_null is not None)
    params = {**randomness.params(), **scoring.params(), **sampler.params()}
    canonical = Spec(name=spec.name, params=params)
    return NativeScheme(canonical, sampler, randomness, scoring)


class NativeScheme(WatermarkScheme):
    """One native scheme; holds no key."""

    def __init__(self, spec: Spec, sampler: Sampler, randomness: rnd.Randomness,
                 scoring: sc.Scoring) -> None:
        self.spec = spec
        self.sampler = sampler
        self.randomness = randomness
        self.scoring = scoring
        self.green_list = sampler.green_list
        self.null_seed = stable_int("evalrun-permutation-null", spec.canonical())

    def __repr__(self) -> str:
        return f"NativeScheme({self.spec})"

    # ---- generation ------------------------------------------------------------------
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float, seed: int,
                         backend: str | None = None) -> "WatermarkProcessor":
        return WatermarkProcessor(self, rnd.derive_key(key), vocab_size, temperature, seed,
                                  backend)

    # ---- detection -------------------------------------------------------------------
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
        if "units" in res and self.sampler.name == "binary":
            extra["num_bits_scored"] = int(res["units"][-1])
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
            gamma = s.gamma  # type: ignore[attr-defined]
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
            out["z"] = float(nulls.z_scores(np.array([g]), np.array([n]), s.gamma)[0])  # type: ignore[attr-defined]
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


_SEED_MEMOS: OrderedDict[Any, dict[tuple[int, ...], tuple[int, bool]]] = OrderedDict()


def _seed_memo(space: Any) -> dict[tuple[int, ...], tuple[int, bool]]:
    """The memo of context tuple -> (seed word, skipped) for one randomness source and key,
    shared by every processor of them so that it outlives a batch (the four most recently
    used are kept; each holds at most ``MEMO_LIMIT`` contexts)."""
    memo = _SEED_MEMOS.get(space)
    if memo is None:
        memo = _SEED_MEMOS[space] = {}
        while len(_SEED_MEMOS) > 4:
            _SEED_MEMOS.popitem(last=False)
    _SEED_MEMOS.move_to_end(space)
    return memo


def scores_ops(scores: Any) -> Ops:
    """The backend that works on ``scores`` without copying them: torch on the tensor's device
    for torch tensors, numpy otherwise (hashing may still run elsewhere, see ``get_ops``)."""
    if is_torch(scores):
        return TorchOps(scores.device)
    return NUMPY


def host_view(x: Any) -> np.ndarray | None:
    """A numpy view sharing the memory of ``x`` when it lives in host memory with a dtype
    numpy has (numpy arrays, CPU float32/float64/int64 tensors), else None. Samplers do their
    per-row work through it: a numpy call on one row costs about half of a torch one."""
    if isinstance(x, np.ndarray):
        return x
    if is_torch(x) and x.device.type == "cpu":
        try:
            return x.detach().numpy()
        except TypeError:  # bfloat16 and other dtypes numpy lacks
            return None
    return None


def add_rows(x: Any, rows: list[Any]) -> None:
    """``x[b] += rows[b]`` in place, row by row, through :func:`host_view` when it applies
    (table rows are numpy exactly then): no ``[B, W]`` table is assembled."""
    h = host_view(x)
    y = x if h is None else h
    for b, row in enumerate(rows):
        view = y[b]
        view += row


class WatermarkProcessor:
    """Batched logits processor ``(input_ids [B, T], scores [B, V']) -> scores``.

    One instance serves one generation call: the first call records the prompt length, later
    calls count generated tokens from it (fixed randomness indexes the key sequence by that
    count, at a per-row random offset drawn from ``seed``). A call with a shorter
    ``input_ids`` starts a new generation. With ``temperature == 0`` the model's logits are
    returned with the kgw bias only (the provider takes the argmax; schemes that replace
    sampling cannot watermark greedy decoding).

    The vocabulary-wide work of a position depends on its seed alone and is memoised per
    seed (:mod:`evalrun.watermark.seed_tables`); scores are computed in their own dtype and
    on their own device. Providers that sample themselves call :meth:`choose`, which hands
    back the tokens the scheme picked instead of one-hot scores.
    """

    def __init__(self, scheme: NativeScheme, key_word: int, vocab_size: int, temperature: float,
                 seed: int, backend: str | None = None) -> None:
        if temperature < 0:
            raise SpecError(f"temperature must be >= 0, got {temperature}")
        self.scheme = scheme
        self._key_word = key_word
        self.vocab_size = vocab_size
        self.temperature = float(temperature)
        self.seed = int(seed)
        self.backend = backend
        self._start: int | None = None
        self._offsets: np.ndarray | None = None
        self._spaces: dict[tuple[int, str, str], tuple[Any, ...]] = {}
        self._backends: dict[tuple[Any, ...], tuple[Ops, Ops, bool]] = {}
        self._seed_memo = _seed_memo((scheme.randomness, key_word))
        #: dense mask tables by score width, held while the cache keeps them
        self._mask_tables: dict[int, Any] = {}

    def __repr__(self) -> str:  # never show the key
        return f"WatermarkProcessor({self.scheme.spec}, vocab_size={self.vocab_size})"

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        out, tokens = self.choose(input_ids, scores)
        if tokens is not None:
            ops = scores_ops(scores)
            rows = np.flatnonzero(tokens >= 0)
            shape = (len(rows), int(scores.shape[1]))
            onehot = only_token(ops, shape, ops.i64(tokens[rows]))
            if out is None:
                out = onehot
            else:
                out[ops.i64(rows)] = ops.cast_like(onehot, out)
        return _like(out, scores)

    def choose(self, input_ids: Any, scores: Any, *, reuse: bool = False,
               ) -> tuple[Any | None, np.ndarray | None]:
        """One step for every row: ``(scores, tokens)``. ``tokens`` (numpy int64 ``[B]``, or
        None for none) holds the token the scheme chose for a row, -1 where the caller must
        sample the row from ``scores`` (at temperature 1, or argmax when the temperature is
        0); ``scores`` is None when no row needs sampling, else a new array unless ``reuse``.
        With ``reuse`` the caller gives ``scores`` up: they may be overwritten and returned
        (no ``[B, V]`` allocation or copy per step), for callers that sample at once."""
        hops, ops, host = self._ops(scores, input_ids)
        batch, t = int(input_ids.shape[0]), int(input_ids.shape[1])
        r = self.scheme.randomness
        if r.fixed and (self._start is None or t < self._start or (
                self._offsets is not None and len(self._offsets) != batch)):
            self._start = t
            rng = np.random.default_rng(self.seed)
            self._offsets = rng.integers(0, r.key_len, size=batch)
        s = self.scheme.sampler
        tau = self.temperature
        if tau == 0 and not s.green_list:
            return scores, None
        if s.mask_bias is not None and r.kind == "window" and r.context == 1 and host:
            out = self._masked_step(hops, ops, input_ids, scores, reuse)
            if out is not None:
                return out, None
        words, skips = self._seeds(hops, input_ids, t - (self._start or 0))
        if skips is not None and all(skips):
            return self._plain(scores), None
        every = skips is None or not any(skips)
        if every:
            rows = None
            logits = scores if reuse or not s.overwrites else ops.copy(scores)
        else:
            rows = [b for b in range(batch) if not skips[b]]
            words = [words[b] for b in rows]
            logits = scores[ops.i64(rows)]
        result = s.apply(ops, self._table(hops, ops, host, words, scores), logits, tau,
                         self.vocab_size, hops, words)
        if s.chooses:
            tokens = np.full(batch, -1, dtype=np.int64)
            tokens[rows if rows is not None else slice(None)] = NUMPY.i64(result)
            return (None if every else self._plain(scores)), tokens
        if every:
            return result, None
        out = self._plain(scores)
        out[ops.i64(rows)] = result
        return out, None

    def _ops(self, scores: Any, input_ids: Any) -> tuple[Ops, Ops, bool]:
        """``(hash ops, score ops, host)`` for these arrays, resolved once per array type,
        device and dtype (a decoding loop calls ``choose`` with the same kinds every step);
        ``host`` when :func:`host_view` works on the scores, so table rows are kept in numpy."""
        key = (type(scores), getattr(scores, "device", None), scores.dtype, type(input_ids),
               getattr(input_ids, "device", None))
        found = self._backends.get(key)
        if found is None:
            found = self._backends[key] = (get_ops(self.backend, scores, input_ids),
                                           scores_ops(scores), host_view(scores[:0]) is not None)
        return found

    def _seeds(self, hops: Ops, input_ids: Any, step: int) -> tuple[list[int], list[bool] | None]:
        """Seed words (Python ints) of every row's next position and whether each position
        is skipped (None when the randomness never skips). Window and min-hash seeds are
        memoised per context tuple (process-wide, per randomness source and key): inside a
        decoding loop each array call costs several microseconds, dictionary lookups a
        fraction of one."""
        r = self.scheme.randomness
        if r.fixed:
            seeds = r.generation_seeds(hops, self._key_word, input_ids, step, self._offsets)
            words = hops.to_numpy(hops.u64(seeds)).view(np.uint64).tolist()
            if r.skip <= 0:
                return words, None
            return words, hops.to_numpy(r.skipped(hops, seeds)).astype(bool).tolist()
        t = int(input_ids.shape[1])
        contexts = list(map(tuple, input_ids[:, max(t - r.context, 0):].tolist()))
        memo = self._seed_memo
        found = list(map(memo.get, contexts))
        if None in found:
            missing = list(dict.fromkeys(c for c, f in zip(contexts, found) if f is None))
            if r.context == 1 and self.vocab_size <= MEMO_LIMIT // 2 and len(memo) < 2:
                # one-token contexts: every seed of the vocabulary in one vectorised call (about
                # what a handful of single misses costs), then none misses again
                missing = list(dict.fromkeys(missing + [(v,) for v in range(self.vocab_size)]))
            seeds = r.generation_seeds(hops, self._key_word, np.array(missing, dtype=np.int64),
                                       step, None)
            skips = hops.to_numpy(r.skipped(hops, seeds)).astype(bool).tolist()
            words = hops.to_numpy(hops.u64(seeds)).view(np.uint64).tolist()
            if len(memo) + len(missing) > MEMO_LIMIT:
                memo.clear()
            memo.update(zip(missing, zip(words, skips)))
            found = list(map(memo.__getitem__, contexts))
        return [w for w, _ in found], ([k for _, k in found] if r.skip > 0 else None)

    def _mask_table(self, hops: Ops, width: int) -> Any:
        """The dense table of this key's green masks, one row per previous token (row
        ``width`` for the padding context of an empty history), or None when too large.
        Rows of skipped contexts are empty: a skipped position adds no bias."""
        table = self._mask_tables.get(width)
        if table is None or table.evicted:
            space = ("mask", self.scheme.spec.canonical(), self._key_word, width)
            table = self._mask_tables[width] = seed_tables().dense(
                space, width + 1, width, lambda: self._mask_builder(hops, width))
        return table

    def _mask_builder(self, hops: Ops, width: int) -> Any:
        """Mask rows of one-token contexts, from the seeds of all ``width + 1`` contexts
        (one vectorised call when the table is made)."""
        s, r = self.scheme.sampler, self.scheme.randomness
        context = np.arange(-1, width, dtype=np.int64)[:, None]  # PAD_TOKEN first
        seeds = r.generation_seeds(hops, self._key_word, context, 0, None)
        seeds = hops.concat([seeds[1:], seeds[:1]], 0)  # row ``width`` is the padding
        skipped = hops.to_numpy(r.skipped(hops, seeds)) if r.skip > 0 else None

        def build(index: np.ndarray) -> np.ndarray:
            masks = hops.to_numpy(s.seed_mask(hops, seeds[hops.i64(index)], width))
            if skipped is not None:
                masks[skipped[index]] = False
            return masks

        return build

    def _masked_step(self, hops: Ops, ops: Ops, input_ids: Any, scores: Any, reuse: bool,
                     ) -> Any | None:
        """One step of a one-token-context mask sampler through its dense table (gather,
        unpack and add for the whole batch); None when there is no table or a previous token
        lies outside it (the caller then takes the per-seed path)."""
        t = int(input_ids.shape[1])
        width = int(scores.shape[1])
        if t == 0:
            index = [width] * int(input_ids.shape[0])
        else:
            index = previous_tokens(input_ids, width)
            if index is None:
                return None
        table = self._mask_table(hops, width)
        if table is None:
            return None
        out = scores if reuse else ops.copy(scores)
        add_packed(out, table.packed(index), self.scheme.sampler.mask_bias)
        tau = self.temperature
        if tau > 0 and tau != 1:
            out /= tau
        return out

    def _plain(self, scores: Any) -> Any:
        """Unwatermarked scores at temperature 1 (a new array)."""
        tau = self.temperature
        return scores / tau if tau > 0 else (scores.clone() if is_torch(scores) else scores.copy())

    def _table(self, hops: Ops, ops: Ops, host: bool, words: list[int], scores: Any,
               ) -> list[Any]:
        """The sampler's seed-table row of each seed word (memoised): numpy rows for "host"
        tables and for scores in host memory (read through :func:`host_view`), else rows on
        the scores' device; "float" rows in the scores' dtype, "index" rows int64. Rows are
        handed over as a list: samplers read them row by row, which beats stacking a
        ``[B, W]`` copy."""
        s = self.scheme.sampler
        width = int(scores.shape[1])
        kind = s.table_kind
        home: Ops = NUMPY if kind == "host" or host else ops
        dtype = str(scores.dtype) if kind == "float" else kind
        device = str(getattr(home, "device", ""))
        space = self._spaces.get((width, device, dtype))
        if space is None:
            space = self._spaces[(width, device, dtype)] = (
                self.scheme.spec.canonical(), self._key_word, self.vocab_size, width, home.name,
                device, dtype)

        def build(missing: list[int]) -> list[Any]:
            block = s.seed_table(hops, hops.u64(missing), width, self.vocab_size)
            if kind == "float":
                block = home.cast_like(block, host_view(scores[:1]) if host else scores)
            elif kind == "index":
                block = home.i64(block)
            else:
                block = NUMPY.f64(block)
            return [home.copy(block[i]) for i in range(len(missing))]

        return seed_tables().rows(space, words, build)


def _like(out: Any, scores: Any) -> Any:
    """``out`` converted to the array type, dtype and device of ``scores``."""
    if is_torch(scores):
        import torch

        t = out if is_torch(out) else torch.from_numpy(np.ascontiguousarray(out))
        return t.to(device=scores.device, dtype=scores.dtype)
    return np.asarray(out, dtype=np.asarray(scores).dtype)
