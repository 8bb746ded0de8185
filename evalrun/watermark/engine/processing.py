"""Generation-time processing of the native schemes: the batched logits processor.

:class:`WatermarkProcessor` applies a native scheme to a decoding step (hf and vLLM providers
call it), memoising the vocabulary-wide work of each seed (:mod:`evalrun.watermark.engine.seed_tables`,
dense bit tables in :mod:`evalrun.watermark.engine.mask_tables`) and reusing step buffers
(:class:`Workspace`), because on a CPU the page faults of fresh arrays cost as much as the
arithmetic. Detection is :mod:`evalrun.watermark.engine.detection`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Protocol

import numpy as np

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec
from evalrun.kernels import vocab_rows
from evalrun.kernels.backend import NUMPY, Ops, TorchOps, get_ops, is_torch
from evalrun.watermark.engine.buffers import Workspace
from evalrun.watermark.engine.mask_tables import add_packed, previous_tokens
from evalrun.watermark.engine.randomness import Randomness
from evalrun.watermark.engine.sampler import Sampler
from evalrun.watermark.engine.seed_tables import seed_tables

__all__ = ["MEMO_LIMIT", "NativeParts", "WatermarkProcessor", "Workspace", "only_token", "sampling_probs"]


class NativeParts(Protocol):
    """What the processor reads of a native scheme (:class:`~evalrun.watermark.engine.NativeScheme`
    satisfies it; the engine builds processors, so this module cannot import it)."""

    @property
    def spec(self) -> Spec: ...

    @property
    def randomness(self) -> Randomness: ...

    @property
    def sampler(self) -> Sampler: ...

#: most context tuples one seed memo holds (then it starts afresh)
MEMO_LIMIT = 1 << 15


def only_token(ops: Ops, shape: tuple[int, int], chosen: Any) -> Any:
    """Scores that are -inf everywhere except 0 at ``chosen[b]``."""
    out = ops.full(shape, float("-inf"))
    return ops.put_along(out, chosen[:, None], 0.0, axis=1)


def sampling_probs(ops: Ops, logits: Any, temperature: float, vocab_size: int) -> Any:
    """Temperature-scaled probabilities over the first ``vocab_size`` columns."""
    x = logits if int(logits.shape[1]) == vocab_size else logits[:, :vocab_size]
    return ops.softmax(x / temperature if temperature != 1 else x)


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


def host_f32(x: Any) -> np.ndarray | None:
    """:func:`host_view` of ``x`` when it is a C-contiguous float32 ``[B, W]`` array in host
    memory and the compiled vocabulary kernels were built (what
    :meth:`~evalrun.watermark.engine.sampler.Sampler.apply_words` works on), else None."""
    if not vocab_rows.compiled_available():
        return None
    h = host_view(x)
    if h is None or h.dtype != np.float32 or h.ndim != 2 or not h.flags.c_contiguous:
        return None
    return h


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
    seed (:mod:`evalrun.watermark.engine.seed_tables`), except where the sampler computes its
    step from the seed words directly (:meth:`~evalrun.watermark.engine.sampler.Sampler.apply_words`:
    the compiled vocabulary kernels, for float32 scores in host memory), which costs less than
    building a row; scores are computed in their own dtype and on their own device. Providers that sample themselves call :meth:`choose`, which hands
    back the tokens the scheme picked instead of one-hot scores.
    """

    def __init__(self, scheme: NativeParts, key_word: int, vocab_size: int, temperature: float,
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
            assert skips is not None  # every is True when skips is None
            rows = [b for b in range(batch) if not skips[b]]
            words = [words[b] for b in rows]
            logits = scores[ops.i64(rows)]
        result = s.apply_words(ops, logits, tau, self.vocab_size, hops, words) if host else None
        if result is None:
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
        return [w for w, _ in found], ([k for _, k in found] if r.skip > 0 else None)  # type: ignore[misc]  # no None is left in found

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
            index: list[int] | None = [width] * int(input_ids.shape[0])
        else:
            index = previous_tokens(input_ids, width)
            if index is None:
                return None
        table = self._mask_table(hops, width)
        if table is None:
            return None
        out = scores if reuse else ops.copy(scores)
        assert self.scheme.sampler.mask_bias is not None  # the caller takes this path only with a mask_bias
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
