"""Verbatim copies of the logits processors as they were before the vocabulary kernels
(evalrun at commit 3201803, 2026-11-29): the identity tests run them next to today's
processors on the same inputs and require the same tokens and the same processed scores, bit
for bit (tests/watermark/test_processor_identity.py).

Each class subclasses today's processor for its constructor and state and overrides the step
with the old code; the old sampler steps of the native engine (``apply`` and ``seed_table``)
are copied as functions. Do not edit the copied bodies: they are the reference.
"""

# ruff: noqa
# mypy: ignore-errors
from __future__ import annotations

from typing import Any

import numpy as np

from evalrun.kernels.backend import NUMPY, Ops, is_torch
from evalrun.kernels.green import green_mask
from evalrun.kernels.keyed_hash import code, feistel_rank, neg_log_uniform, pair, range_codes
from evalrun.kernels.token_stats import bit_uniforms, exp_gumbel, its_uniform
from evalrun.watermark.engine.mask_tables import add_packed, previous_tokens
from evalrun.watermark.engine.processing import (
    MEMO_LIMIT,
    WatermarkProcessor,
    _like,
    add_rows,
    host_view,
    only_token,
    sampling_probs,
    scores_ops,
)
from evalrun.watermark.engine.seed_tables import seed_tables
from evalrun.watermark.schemes.binary import _walk_lists, huffman_tree
from evalrun.watermark.engine.randomness import Randomness, derive_key
from evalrun.watermark.schemes.dipmark import (
    DiPmarkLogitsProcessor,
    context_seed,
    native_ranks,
    native_seeds,
    permutation,
)
from evalrun.watermark.schemes.entropy_green import GreenBiasProcessor, GreenLists, MARKLLM
from evalrun.watermark.schemes.exp_gumbel import ExpGumbelLogitsProcessor
from evalrun.watermark.schemes.kgw_compat import KGWCompatLogitsProcessor, _torch, prf_seeds
from evalrun.watermark.schemes.morphmark import MorphMarkLogitsProcessor, context_values
from evalrun.watermark.schemes.permute_flip import MOD, PermuteFlipLogitsProcessor
from evalrun.watermark.schemes.synthid import (
    INCREMENT,
    MULTIPLIER,
    SynthIDLogitsProcessor,
    _Row,
    _u64,
    layer_g_values,
)
from evalrun.watermark.schemes.waterfall import WaterfallLogitsProcessor, _context_seed
from evalrun.watermark.schemes.waterfall import permutation as waterfall_permutation


class PinnedWatermarkProcessor(WatermarkProcessor):
    """Today's native processor with the step of 3201803 (seed tables, the samplers' old
    ``apply``)."""

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
        result = _APPLY[s.name](s, ops, self._table(hops, ops, host, words, scores), logits, tau,
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

    def _mask_table(self, hops: Ops, width: int) -> Any:
        """The dense table of this key's green masks, one row per previous token (row
        ``width`` for the padding context of an empty history), or None when too large.
        Rows of skipped contexts are empty: a skipped position adds no bias."""
        table = self._mask_tables.get(width)
        if table is None or table.evicted:
            space = ("pinned-mask", self.scheme.spec.canonical(), self._key_word, width)
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
            masks = hops.to_numpy(green_mask(hops, seeds[hops.i64(index)], width, s.gamma))
            if skipped is not None:
                masks[skipped[index]] = False
            return masks

        return build

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
                "pinned", self.scheme.spec.canonical(), self._key_word, self.vocab_size, width, home.name,
                device, dtype)

        def build(missing: list[int]) -> list[Any]:
            block = _SEED_TABLE[s.name](s, hops, hops.u64(missing), width, self.vocab_size)
            if kind == "float":
                block = home.cast_like(block, host_view(scores[:1]) if host else scores)
            elif kind == "index":
                block = home.i64(block)
            else:
                block = NUMPY.f64(block)
            return [home.copy(block[i]) for i in range(len(missing))]

        return seed_tables().rows(space, words, build)


def _apply_kgw(self, ops: Ops, rows: list[Any], logits: Any, temperature: float, vocab_size: int,
          hash_ops: Ops, words: list[int]) -> Any:
    add_rows(logits, rows)
    if temperature > 0 and temperature != 1:
        logits /= temperature
    return logits


def _seed_table_kgw(self, ops: Ops, seeds: Any, width: int, vocab_size: int) -> Any:
    """``delta`` at the green columns of each seed, 0 elsewhere."""
    return ops.where(green_mask(ops, seeds, width, self.gamma), self.delta, 0.0)


def _apply_exp(self, ops: Ops, rows: list[Any], logits: Any, temperature: float, vocab_size: int,
          hash_ops: Ops, words: list[int]) -> Any:
    x = logits if int(logits.shape[1]) == vocab_size else logits[:, :vocab_size]
    if temperature != 1:
        x /= temperature
    add_rows(x, rows)
    h = host_view(x)  # numpy's argmax is several times faster than torch's on CPU
    return ops.argmax(x, axis=1) if h is None else NUMPY.argmax(h, axis=1)


def _seed_table_exp(self, ops: Ops, seeds: Any, width: int, vocab_size: int) -> Any:
    return exp_gumbel(ops, seeds, vocab_size)


def _apply_its(self, ops: Ops, rows: list[Any], logits: Any, temperature: float, vocab_size: int,
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
    u = ops.f64(_its_uniforms(self, hash_ops, words))
    k = ops.searchsorted(cdf, u[:, None])[:, 0]  # ranks whose cdf lies below u
    ranks = ops.to_numpy(k).tolist()  # checked in Python: an array test costs more here
    if vocab_size in ranks:
        # rounding can leave the last cdf entry just under u: take the last rank with
        # positive probability
        positions = ops.arange(vocab_size)[None, :]
        last = ops.amax(ops.where(permuted > 0, positions, -1), axis=1)
        ranks = ops.to_numpy(ops.where(k > last, last, k)).tolist()
    return np.array([int(row[kb]) for row, kb in zip(rows, ranks)], dtype=np.int64)


def _seed_table_its(self, ops: Ops, seeds: Any, width: int, vocab_size: int) -> Any:
    """The token at each rank of the seed's permutation (the inverse of ``pi_s``)."""
    tokens = ops.arange(vocab_size)[None, :]
    ranks = ops.i64(feistel_rank(ops, seeds[:, None], tokens, vocab_size))
    return ops.put_along(ops.zeros(tuple(ranks.shape), "i64"), ranks,
                         tokens + ops.zeros(tuple(ranks.shape), "i64"), axis=1)


def _apply_binary(self, ops: Ops, rows: list[Any], logits: Any, temperature: float, vocab_size: int,
          hash_ops: Ops, words: list[int]) -> Any:
    tree = huffman_tree(vocab_size)
    probs = sampling_probs(ops, logits, temperature, vocab_size)
    work = self.workspace
    ordered = ops.take_along(probs, self._leaf_order(ops, tree), axis=1,
                             out=work.get(ops, "ordered", probs))
    cum = ops.to_numpy(ops.cumsum(ordered, axis=1, dtype="f64",  # mass of leaves <= j
                                  out=work.get(ops, "cum", probs, "f64")))
    lo, mid, hi, left, right = _walk_lists(vocab_size)
    tokens = []
    for b in range(int(cum.shape[0])):
        # one row's walk touches ~depth entries: scalar reads beat [B]-wide array steps
        c, u = cum[b].item, rows[b].item
        node = tree.root
        while True:
            base = c(lo[node] - 1) if lo[node] else 0.0
            total = c(hi[node] - 1) - base
            p0 = (c(mid[node] - 1) - base) / total if total > 0 else 0.5
            child = right[node] if u(node) >= p0 else left[node]
            if child < 0:
                tokens.append(-child - 1)
                break
            node = child
    return np.array(tokens, dtype=np.int64)


def _seed_table_binary(self, ops: Ops, seeds: Any, width: int, vocab_size: int) -> Any:
    """The uniform ``u = h_s(x)`` of every internal node ``x`` of the tree."""
    nodes = ops.arange(vocab_size - 1)[None, :]
    return bit_uniforms(ops, seeds[:, None], nodes)


def _its_uniforms(self, hash_ops: Ops, words: list[int]) -> list[float]:
    """The uniform ``u`` of each seed word, memoised per word like the seed tables."""
    memo: dict[int, float] = self.__dict__.setdefault("_pinned_u_memo", {})
    missing = [w for w in dict.fromkeys(words) if w not in memo]
    if missing:
        found = hash_ops.to_numpy(its_uniform(hash_ops, hash_ops.u64(missing))).tolist()
        if len(memo) + len(missing) > MEMO_LIMIT:
            memo.clear()
        memo.update(zip(missing, found))
    return [memo[w] for w in words]


_APPLY = {"kgw": _apply_kgw, "exp": _apply_exp, "its": _apply_its, "binary": _apply_binary}
_SEED_TABLE = {"kgw": _seed_table_kgw, "exp": _seed_table_exp, "its": _seed_table_its,
               "binary": _seed_table_binary}


def pinned_dip_reweight(logits: Any, perm: Any, alpha: float) -> Any:
    """DiPmark's reweighting of one row of logits (1-D float tensor over the vocabulary) under
    the permutation ``perm``: new log-probabilities shifted by the row's logsumexp, so the
    row keeps its total mass (-inf where a token gets no mass)."""
    import torch

    x = logits.to(torch.float64)
    lse = torch.logsumexp(x, dim=0)
    probs = torch.softmax(x[perm], dim=0)
    cdf = torch.cumsum(probs, dim=0)
    cdf = cdf / cdf[-1]
    mapped = torch.clamp(cdf - alpha, min=0.0) + torch.clamp(cdf - (1.0 - alpha), min=0.0)
    new = torch.diff(mapped, prepend=mapped.new_zeros(1)).clamp(min=0.0)
    out = torch.empty_like(x)
    out[perm] = torch.log(new) + lse
    return out


class PinnedDiPmark(DiPmarkLogitsProcessor):
    """DiPmark's (and Unbiased's) processor of 3201803."""

    #: the old processor had no ``choose``: the provider sampled its scores
    choose = None
    #: nor ``call_rows``: the provider called it once per generation
    call_rows = None

    def _permutation(self, context: np.ndarray, width: int) -> Any:
        """The context's permutation of the first ``width`` tokens (a CPU int64 tensor)."""
        import torch

        if self._hash_key is not None:
            return permutation(context_seed(context, self._hash_key), width)
        assert self._key_word is not None
        # the seed of the position after the context: the context plus a placeholder token
        ids = np.append(context.astype(np.int64), 0)
        seed = native_seeds(self._key_word, ids, np.arange(len(ids)), self.scheme.prefix_length)[-1:]
        ranks = native_ranks(seed, np.arange(width, dtype=np.int64), self.vocab_size)
        return torch.from_numpy(np.argsort(ranks, kind="stable"))

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        raw, ids, as_numpy = self.torch_inputs(input_ids, scores)
        x = raw.to(torch.float64, copy=True)  # the caller's scores are left untouched
        if self.temperature > 0:
            x = x / self.temperature
        scheme = self.scheme
        width = min(int(x.shape[-1]), self.vocab_size)
        if ids.shape[-1] >= scheme.prefix_length:
            for row in range(int(x.shape[0])):
                context = scheme._context(ids[row], ids.shape[-1])
                code = np.ascontiguousarray(context, dtype="<i8").tobytes()
                if not scheme.ignore_history_generation:
                    history = self._history.setdefault(row, set())
                    if code in history:
                        continue
                    history.add(code)
                perm = self._permutation(context, width).to(x.device)
                x[row, :width] = pinned_dip_reweight(x[row, :width], perm, scheme.alpha)
        out = x.to(raw.dtype)
        return out.numpy() if as_numpy else out


class PinnedPermuteFlip(PermuteFlipLogitsProcessor):
    """PF's processor of 3201803."""

    #: the old processor had no ``choose``: the provider sampled its scores
    choose = None

    def _contexts(self, input_ids: Any, batch: int) -> list[list[int]]:
        ids = input_ids.detach().cpu().numpy() if hasattr(input_ids, "detach") else np.asarray(input_ids)
        ids = ids.reshape(batch, -1) if ids.size else np.zeros((batch, 0), dtype=np.int64)
        n = self.scheme.ngram
        return [row[max(len(row) - n, 0):].astype(np.int64).tolist() for row in ids]

    def _choose_native(self, logits: np.ndarray, contexts: list[list[int]]) -> np.ndarray:
        assert self._key_word is not None
        x = logits[:, :self.vocab_size].astype(np.float64) / self.temperature
        x -= x.max(axis=1, keepdims=True)
        logp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
        chosen = np.zeros(len(contexts), dtype=np.int64)
        codes = range_codes(NUMPY, self.vocab_size)
        for b, ctx in enumerate(contexts):
            s = self.scheme._native_seeds(np.asarray([ctx], dtype=np.int64).reshape(1, -1),
                                          self._key_word)
            noise = neg_log_uniform(NUMPY, pair(NUMPY, s[0], codes))  # -log r_v, Exp(1)
            chosen[b] = int(np.argmax(logp[b] + noise))
        return chosen

    def _choose_compat(self, logits: Any, contexts: list[list[int]]) -> np.ndarray:
        """MarkLLM's ``sample_next`` step for step (sorted probabilities, top_p = 1)."""
        torch = _torch()
        assert self._salt is not None
        chosen = np.zeros(len(contexts), dtype=np.int64)
        rows = torch.as_tensor(logits).detach().cpu()[:, :self.vocab_size].float()
        for b, ctx in enumerate(contexts):
            if len(ctx) < self.scheme.ngram:
                ctx = []  # MarkLLM slices an empty window before the n-gram is complete
            s = self.scheme.seed
            for i in ctx:
                s = (s * self._salt + i) % MOD
            probs = torch.softmax(rows[b] / self.temperature, dim=-1)
            probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
            probs_sum = torch.cumsum(probs_sort, dim=-1)
            probs_sort[probs_sum - probs_sort > 1.0] = 0.0
            probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
            rs = self.scheme._compat_uniforms(s, self.vocab_size)[probs_idx]
            best = torch.argmax(probs_sort.log() - rs.log(), dim=-1)
            chosen[b] = int(probs_idx[best])
        return chosen

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.temperature == 0:
            return scores
        one_d = getattr(scores, "ndim", 2) == 1
        batch = 1 if one_d else int(scores.shape[0])
        contexts = self._contexts(input_ids, batch)
        is_np = isinstance(scores, np.ndarray)
        if self._salt is not None:
            chosen = self._choose_compat(scores.reshape(batch, -1) if is_np else scores.reshape(batch, -1),
                                         contexts)
        else:
            host = scores if is_np else scores.detach().float().cpu().numpy()
            chosen = self._choose_native(np.asarray(host).reshape(batch, -1), contexts)
        if is_np:
            out = np.full(scores.shape, -np.inf, dtype=scores.dtype).reshape(batch, -1)
            out[np.arange(batch), chosen] = 0.0
            return out.reshape(scores.shape)
        import torch

        out_t = torch.full_like(scores.reshape(batch, -1), float("-inf"))
        out_t[torch.arange(batch), torch.as_tensor(chosen, device=scores.device)] = 0.0
        return out_t.reshape(scores.shape)


class PinnedExpGumbel(ExpGumbelLogitsProcessor):
    """EXPGumbel's processor of 3201803 (its own row cache)."""

    #: the old processor had no ``choose``: the provider sampled its scores
    choose = None

    def gumbel_row(self, r: int) -> Any:
        """MarkLLM's ``gumbel[r]``: ``-log(clamp(-log(U[r]), min=eps))`` in float32 torch;
        native: the float64 ``exp_gumbel`` noise of row r's seed word."""

        return self._gumbel.get_or_build(r, lambda: self._noise(r))

    def _noise(self, r: int) -> Any:
        import torch

        if self.stream is not None:
            u = torch.from_numpy(self.stream.row(r))
            return -torch.log(torch.clamp(-torch.log(u), min=self.eps))
        assert self._key_word is not None
        seed = pair(NUMPY, self._key_word, code(NUMPY, np.array([r], dtype=np.int64)))
        return torch.from_numpy(np.asarray(exp_gumbel(NUMPY, seed, self.vocab_size))[0])

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        V = self.vocab_size
        width = int(scores.shape[-1])
        n = min(width, V)
        out = torch.full_like(scores, float("-inf"))
        hist = input_ids.detach().cpu().long()
        for b in range(scores.shape[0]):
            logits = scores[b, :n].detach().float().cpu()
            if hist.shape[1] < self.prefix_length:
                choice = int(torch.argmax(logits))
            else:
                r = int(hist[b, -self.prefix_length:].sum()) % self.rows
                choice = int(torch.argmax(logits / self.temperature + self.gumbel_row(r)[:n]))
            out[b, choice] = 0.0
        return out


class PinnedMorphMark(MorphMarkLogitsProcessor):
    """MorphMark's processor of 3201803."""

    #: the old processor had no ``choose``: the provider sampled its scores
    choose = None

    def _mask_row(self, history: list[int]) -> np.ndarray:
        s = self.scheme
        if len(history) < s.prefix_length:
            return np.zeros(self.vocab_size, dtype=bool)
        # the context of the next position: the last prefix_length ids, a dummy target after
        c = int(context_values(np.asarray(history[-s.prefix_length:] + [0], dtype=np.int64),
                               self.vocab_size, s.prefix_length, s.f_scheme)[0])
        seed = self._seed_of.get(c)
        if seed is None:
            seed = self._seed_of[c] = s.seeds([c], self._key, self.vocab_size)[0]
        if s.compat != "markllm":
            return np.asarray(green_mask(NUMPY, NUMPY.u64([seed]), self.vocab_size, s.gamma)[0])
        return self._lists.mask(seed)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        as_numpy = isinstance(scores, np.ndarray)
        sc = torch.from_numpy(np.array(scores)) if as_numpy else scores
        ids = np.asarray(input_ids.tolist() if hasattr(input_ids, "tolist") else input_ids)
        width = int(sc.shape[-1])
        k = self.scheme.prefix_length
        masks = np.zeros((sc.shape[0], width), dtype=bool)
        active = np.zeros(sc.shape[0], dtype=bool)
        for row in range(sc.shape[0]):
            if ids.shape[-1] >= k:
                n = min(width, self.vocab_size)
                masks[row, :n] = self._mask_row(ids[row].tolist())[:n]
                active[row] = True
        green = torch.from_numpy(masks).to(sc.device)
        probs = torch.softmax(sc, dim=-1)
        p_green = (probs * green).sum(dim=-1, keepdim=True)
        beta = self.scheme.boost(p_green) * (1 - p_green)
        beta = beta * torch.from_numpy(active).to(sc.device).unsqueeze(-1)
        red_mass = (probs * ~green).sum(dim=-1, keepdim=True)
        # MarkLLM: green p += p / P_G * beta, red p -= p / P_R * beta (0/0 -> 0)
        up = torch.nan_to_num(probs / p_green * beta, nan=0.0)
        down = torch.nan_to_num(probs / red_mass * beta, nan=0.0)
        probs = torch.where(green, probs + up, probs - down)
        probs = torch.clamp(torch.nan_to_num(probs, nan=0.0), min=0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
        out = torch.log(probs)
        if self.temperature > 0:
            out = out / self.temperature
        return out.numpy() if as_numpy else out


def pinned_green_rows(self, input_ids: np.ndarray, key: str, vocab_size: int,
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


class PinnedGreenBias(GreenBiasProcessor):
    """SWEET's and EWD's processor of 3201803 (the green rows and the gate of the scheme's
    own methods, copied below)."""

    #: the old processor had no ``choose``: the provider sampled its scores
    choose = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        raw, ids, as_numpy = self.torch_inputs(input_ids, scores)
        out = raw.clone()
        width = min(int(out.shape[-1]), self.vocab_size)
        if ids.shape[-1] >= self.scheme.prefix_length:
            lists = self._lists.get(width)
            if lists is None and self.scheme.compat == MARKLLM:
                lists = self._lists[width] = GreenLists(width, self.scheme.gamma)
            mask = torch.from_numpy(pinned_green_rows(self.scheme, ids, self._key, width, lists)).to(out.device)
            mask = mask & self.scheme.gate(raw[:, :width])
            out[:, :width] = out[:, :width] + mask.to(out.dtype) * self.scheme.delta
        if self.temperature > 0 and self.temperature != 1:
            out = out / self.temperature
        return out.numpy() if as_numpy else out


class PinnedWaterfall(WaterfallLogitsProcessor):
    """Waterfall's processor of 3201803."""

    #: the old processor had no ``choose``: the provider sampled its scores
    choose = None

    def _rows(self, contexts: list[tuple[int, ...]], scores: Any) -> list[Any]:
        host = host_view(scores[:0])
        space = ("pinned-waterfall-row", self.scheme.spec.canonical(), self._owner, self.n,
                 str(scores.dtype), str(getattr(scores, "device", "")), host is not None)
        n = self.n
        # a context with a token >= N is the identity: one shared seed (n ** w is unused)
        seeds = [n ** len(c) if any(t >= n for t in c) else _context_seed(c, n)
                 for c in contexts]
        by_seed = dict(zip(seeds, contexts))

        def build(missing: list[int]) -> list[Any]:
            out = []
            for s in missing:
                row = self.phi[waterfall_permutation(self._owner, by_seed[s], n)]
                if host is not None:
                    out.append(row.astype(host.dtype))
                else:
                    import torch

                    out.append(torch.from_numpy(row).to(device=scores.device, dtype=scores.dtype))
            return out

        return seed_tables().rows(space, seeds, build)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.temperature > 0 and self.temperature != 1:
            out = scores / self.temperature  # the reference's TemperatureLogitsWarper
        else:
            out = scores.copy() if isinstance(scores, np.ndarray) else scores.clone()
        length = int(input_ids.shape[-1])
        if self._start is None or length < self._start:
            self._start = length
        w = self.scheme.n_gram - 1
        if self.scheme.kappa == 0 or length < self._start + w:
            return out
        if int(out.shape[-1]) < self.n:
            raise ValueError(f"waterfall: scores have {out.shape[-1]} columns, fewer than "
                             f"the {self.n} the perturbation covers")
        ids = input_ids.tolist() if hasattr(input_ids, "tolist") else list(input_ids)
        if out.ndim == 1:
            ids = [ids]
        rows = self._rows([tuple(int(t) for t in row[len(row) - w:]) for row in ids], out)
        host = host_view(out)
        target = out if host is None else host
        if out.ndim == 1:
            target[: self.n] += rows[0]
            return out
        for b, row in enumerate(rows):
            view = target[b, : self.n]
            view += row
        return out


def pinned_tournament_log_probs(scores: Any, g: Any) -> Any:
    """Log of the tournament-reweighted distribution of ``softmax(scores)`` ``[B, V]`` for
    g-values ``g`` ``[B, V, depth]``: layer by layer, each token's probability is multiplied by
    ``1 + g - (mass of the tokens with g = 1)``. torch, in the dtype of ``scores``."""
    import torch

    probs = torch.softmax(scores, dim=1)
    for layer in range(g.shape[-1]):
        bits = g[:, :, layer]
        mass = (bits * probs).sum(dim=1, keepdim=True)
        probs = probs * (1 + bits - mass)
    logs = torch.log(probs)
    return torch.where(torch.isfinite(logs), logs, torch.finfo(logs.dtype).min)


class PinnedSynthID(SynthIDLogitsProcessor):
    """SynthID's processor of 3201803."""

    #: the old processor had no ``choose``: the provider sampled its scores
    choose = None
    #: nor ``call_rows``: the provider called it once per generation
    call_rows = None

    def _g_values(self, context_hash: int, width: int) -> np.ndarray:
        """g-values ``[width, depth]`` of every candidate token after a context."""
        base = self._continuations.get(width)
        if base is None:
            base = self._continuations[width] = _u64(np.arange(width))
        ngram = base + np.uint64(context_hash)
        ngram *= np.uint64(MULTIPLIER)
        ngram += np.uint64(INCREMENT)
        return layer_g_values(ngram, self._keys, self.scheme.table)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        as_numpy = isinstance(scores, np.ndarray)
        if as_numpy:
            scores = torch.from_numpy(scores)
        ids = (input_ids.detach().cpu().numpy() if hasattr(input_ids, "detach")
               else np.asarray(input_ids)).astype(np.int64, copy=False)
        if ids.ndim != 2 or scores.ndim != 2 or ids.shape[0] != scores.shape[0]:
            raise ValueError("expected input_ids [B, T] and scores [B, V] with the same B")
        if self.prompt_len is None:
            self.prompt_len = ids.shape[1]
            self._rows = [_Row() for _ in range(ids.shape[0])]
        if ids.shape[0] != len(self._rows):
            raise ValueError(f"this processor serves {len(self._rows)} row(s) (one generation); "
                             f"got {ids.shape[0]}")
        if ids.shape[1] < self.prompt_len:
            raise ValueError("input_ids are shorter than the prompt this processor started with")
        if self.temperature > 0:
            scores = scores / self.temperature
        rows = [r for r, state in enumerate(self._rows)
                if state.sync(ids[r, self.prompt_len:], self.scheme)]
        if rows:
            width = int(scores.shape[-1])
            step = ids.shape[1] - self.prompt_len
            g = np.stack([self._g_values(self._rows[r].hashes[step], width) for r in rows])
            index = torch.tensor(rows, dtype=torch.long, device=scores.device)
            marked = pinned_tournament_log_probs(scores[index],
                                          torch.from_numpy(g).to(scores.device))
            scores = scores.clone() if self.temperature <= 0 else scores
            scores[index] = marked
        return scores.numpy() if as_numpy else scores


class PinnedKGWCompat(KGWCompatLogitsProcessor):
    """The reference-compatible kgw processor with the per-seed rows of 3201803."""

    def _lefthash_rows(self, input_ids: Any, scores: Any) -> list[Any] | None:
        """Each row's delta-on-green bias ``[W]`` (0 elsewhere) from the process-wide
        seed-table cache, for lefthash with a full context and 2-D scores; None otherwise
        (the caller then builds the mask)."""
        torch = _torch()
        c = self.scheme.context
        ids = torch.as_tensor(input_ids)
        if self.scheme.seeding != "lefthash" or scores.dim() != 2 or ids.dim() != 2 \
                or ids.shape[1] < c:
            return None
        seeds = prf_seeds(ids[:, ids.shape[1] - c:].tolist(), "lefthash", self._hash_key)
        width = int(scores.shape[1])
        w = min(width, self.vocab_size)
        host = host_view(scores[:0])  # rows in numpy when the scores are in host memory
        space = ("pinned-kgw-compat", self.scheme.spec.canonical(), self._hash_key, self.vocab_size,
                 width, str(scores.device), str(scores.dtype), host is not None)

        def build(missing: list[int]) -> list[Any]:
            rows = []
            for seed in missing:
                row = np.zeros(width, dtype=np.float64)
                row[:w] = np.where(self.green.mask(seed)[:w], self.scheme.delta, 0.0)
                rows.append(row.astype(host.dtype) if host is not None else
                            torch.from_numpy(row).to(device=scores.device, dtype=scores.dtype))
            return rows

        return seed_tables().rows(space, seeds, build)
