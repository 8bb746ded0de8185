"""Unbiased watermark (Hu et al., "Unbiased Watermark for Large Language Models", ICLR 2024),
gamma-reweight, as MarkLLM implements it (THU-BPM/MarkLLM at 112fa74,
``watermark/unbiased/unbiased.py``, ``watermark/unbiased/strategy.py``,
``config/Unbiased.json``): ``unbiased:n_grid=...,prefix_length=...,...``.

Parameters and defaults (MarkLLM's): ``type=gamma`` (the only reweighting offered: MarkLLM's
delta-reweight is refused), ``n_grid=10`` (grid of the likelihood-ratio score), ``prefix_length=5``
(context ids hashed, >= 1: MarkLLM's detector breaks at 0), ``p_threshold=0.0005`` (MarkLLM's
decision threshold, reported only), ``ignore_history_generation=1``,
``ignore_history_detection=1``, ``compat=none|markllm``, and evalrun's ``permutations=0``
(the null: see below).

Randomness, in both modes: DiPmark's MarkLLM-compatible construction (the helpers of
:mod:`evalrun.watermark.schemes.dipmark`; native DiPmark has its own keyed-hash ranks since, but Unbiased
keeps MarkLLM's so one code path serves both modes, the detector reading the model dominating
its cost anyway). A position's context is its last ``prefix_length`` ids; its permutation is
``torch.randperm(V)`` seeded with ``sha256(context as int64 LE + hash_key) mod 2**32 - 1``.

* ``compat=markllm``: ``--key`` is MarkLLM's integer config ``key``, ``hash_key`` its expansion
  ``random.seed(key); random.getrandbits(1024)`` as 128 big-endian bytes. MarkLLM's
  ``UnbiasedConfig`` draws those bits without ever seeding ``random``, so its key changes with
  every process and nothing it generates can be detected by another process; evalrun uses the
  stable expansion (the one its reference data were made with).
* native (``compat=none``): ``hash_key`` is dipmark's :func:`native_hash_key` of the key behind
  this scheme's own domain tag, a 32-byte keyed hash.

Generation (gamma-reweight, which is DiPmark's reweighting at ``alpha=0.5``, so generation is
DiPmark's processor): in permuted order a token keeps, of its probability, the part of its CDF
interval lying above 1/2, and the row is renormalised; averaged over permutations this is the
original distribution, hence "unbiased".

Detection reads the model (``needs_model``): for each scored token, P is the model's
next-token distribution and Q its reweighting under the token's permutation, and the
token's score is ``log Q(x) - log P(x)`` clamped into the interval MarkLLM's ``_get_max_llr``
derives for each grid query ``(dist_p, dist_q) = (0, k / n_grid)``, k = 0..n_grid (the robust
likelihood-ratio score of the paper). Per query the scores are summed, and the best sum is the
score ``t``.

evalrun's p-value (``Detection.p_value``): ``min(1, n_grid / sum_k exp(S_k))`` over the per-query
sums S_k, k = 1..n_grid. Under the null each ``exp(S_k)`` has expectation at most 1 (the
paper's Theorem 9, the martingale argument behind its ``P(S_k >= t) <= exp(-t)``), so their
mean is an e-value and Markov's inequality makes its inverse a valid p-value. It is never
above the paper's union bound ``n_grid * exp(-max_k S_k)`` (which MarkLLM uses) and is below
it by up to the factor n_grid when several queries score alike; still a bound, not a tail
probability (on 200 uniform random texts the tests find none under 0.1, and most at 1). It
holds only when the scored tokens' permutations are fresh, so only tokens whose context is new
in the text are scored, whatever ``ignore_history_detection`` says, the last token included.
The k = 0 query (the unclamped ratio, hugely negative as soon as one token has Q = 0) is left
out of the mean.
``score`` is the best sum ``max_k S_k``. Seeds of distinct contexts collide with probability
about ``n**2 / 2**33``, which is ignored.

``permutations=N`` (N >= 1) replaces the bound by an exact permutation test: the same score
is computed under N null hash keys fixed by the spec (sha256 of a tag, the canonical spec and
the index; never the secret key), and the p-value is ``(1 + #{null scores >= t}) / (N + 1)``.
For a text fixed independently of the key, the secret hash key and the null keys are
exchangeable draws (keyed hashes as random functions), so the p-value is exact -- conservative
only through ties, which the clamping makes common at 0 (the queries whose interval is empty
score 0, so the best sum is never below 0). Its resolution is 1/(N + 1) and each null key
costs one more pass of the scoring (not of the model): N = 49 reaches 0.02, N = 999 0.001.

MarkLLM's score (``extra["markllm_score"]`` in compat mode, what its ``detect_watermark``
returns), in its float32 arithmetic: it scores positions ``prefix_length .. n - 1`` but never
reweights the last one (its loop stops one row early), so the final token always has Q = P and
contributes nothing; repeated contexts are reweighted again when
``ignore_history_detection=1`` and given Q = P otherwise; its max includes the k = 0 query while
its factor stays n_grid. ``markllm_is_watermarked`` is ``markllm_score < p_threshold``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy.special import logsumexp

from evalrun._util.errors import SpecError
from evalrun._util.lru import LRU
from evalrun._util.specs import Spec, check_keys, spec_float, spec_int
from evalrun.watermark.base import (
    Detection,
    TokenLogits,
    checked_logits,
    require_logits,
    token_id_array,
)
from evalrun.watermark.engine import nulls
from evalrun.watermark.engine.markllm_compat import MarkLLMKeyed, compat_mode
from evalrun.watermark.schemes.dipmark import (
    DiPmark,
    DiPmarkLogitsProcessor,
    context_seed,
    markllm_hash_key,
    native_hash_key,
    permutation,
)

WHAT = "--watermark"
NAME = "unbiased"
ALLOWED_KEYS = frozenset({"type", "n_grid", "prefix_length", "p_threshold",
                          "ignore_history_generation", "ignore_history_detection", "compat",
                          "permutations"})
_NULL_TAG = b"evalrun:unbiased:null\0"
_NATIVE_TAG = "evalrun:unbiased:v1\0"
#: logits per chunk of the detector's rows (bounds its memory on long texts)
_CHUNK_ELEMENTS = 1 << 24
_WHY = "Unbiased's likelihood ratios"
#: recent texts' token scores (see :meth:`Unbiased._score`), least recently used out first
_SCORED: "LRU[tuple[Any, ...], _Scored]" = LRU(256)


def grid_queries(n_grid: int) -> list[tuple[float, float]]:
    """MarkLLM's grid: ``(log dist_p, log dist_q)`` for dist_p = 0 and dist_q = k / n_grid,
    k = 0..n_grid, in that order (index k is query k)."""
    with np.errstate(divide="ignore"):
        logs = np.log(np.array([k / n_grid for k in range(n_grid + 1)], dtype=np.float64))
    return [(float("-inf"), float(q)) for q in np.sort(logs)]


def gamma_reweight(logits: Any, perms: Any) -> Any:
    """Gamma-reweighted logits of each row of ``logits`` ([N, V] tensor) under the row's
    permutation (``perms``, [N, V]): each token's logit plus the log of the fraction of its
    permuted-CDF interval above 1/2 (-inf where none is). Not renormalised (the rows lose half
    their mass); computed in the input's dtype with MarkLLM's arithmetic, so that float32 rows
    give MarkLLM's numbers."""
    import torch

    permuted = logits.gather(-1, perms)
    log_cdf = torch.logcumsumexp(permuted, dim=-1)
    cdf = torch.exp(log_cdf - log_cdf[..., -1:])
    probs = torch.softmax(permuted, dim=-1)
    above = cdf > 0.5
    cut = torch.argmax(above.to(torch.int), dim=-1, keepdim=True)  # first token past 1/2
    part = ((cdf.gather(-1, cut) - 0.5) / probs.gather(-1, cut)).clamp(0, 1)
    share = above.to(logits.dtype).scatter_(-1, cut, part)
    shift = torch.empty_like(share).scatter_(-1, perms, torch.log(share))
    return logits + shift


def _ratio(numerator: Any, denominator: Any) -> Any:
    """Log-ratio with MarkLLM's NaN guard (NaN to 0, +-inf to the largest finite floats)."""
    import torch

    return torch.nan_to_num(numerator - denominator, nan=0.0)


def _max_llr(p: Any, q: Any, queries: Sequence[tuple[float, float]]) -> Any:
    """Upper clamp of each row's log-ratio ``q - p`` per query ([N, V] log-probabilities in,
    [N, len(queries)] out): MarkLLM's ``_get_max_llr``, one pass over the queries for all rows."""
    import torch

    order = torch.argsort(_ratio(q, p), dim=-1, descending=True)
    p = p.gather(-1, order)
    q = q.gather(-1, order)
    llr = _ratio(q, p)
    cum_q = torch.logcumsumexp(q, dim=-1)
    cum_p = torch.logcumsumexp(p, dim=-1)
    neg_inf = torch.tensor(float("-inf"), dtype=q.dtype)
    last = torch.tensor(q.shape[-1] - 1)
    head = llr[..., 1:]
    out = []
    for dist_p, dist_q in queries:
        shrunk_q = torch.where(cum_q <= dist_q, neg_inf, cum_q + torch.log(-torch.expm1(dist_q - cum_q)))
        grown_p = torch.logaddexp(cum_p, torch.tensor(dist_p, dtype=p.dtype))
        bound = _ratio(shrunk_q, grown_p)
        # the first j >= 1 whose own ratio falls below the bound of the tokens before it
        # gives bound[j - 1]; when there is none, the bound over all tokens
        below = head < bound[..., :-1]
        cut = torch.where(below.any(dim=-1), torch.argmax(below.to(torch.int), dim=-1), last)
        out.append(bound.gather(-1, cut[:, None]))
    return torch.cat(out, dim=-1)


def clamped_llr(old: Any, new: Any, labels: Any, queries: Sequence[tuple[float, float]]) -> Any:
    """Per row and query, ``log Q(label) - log P(label)`` clamped into MarkLLM's
    ``[min_llr, max_llr]`` (both 0 where the interval is empty): P = softmax(old),
    Q = softmax(new), rows [N, V], labels [N]; returns [N, len(queries)]."""
    import torch

    q = torch.log_softmax(new, dim=-1)
    p = torch.log_softmax(old, dim=-1)
    high = _max_llr(p, q, queries)
    low = -_max_llr(q, p, [(b, a) for a, b in queries])
    empty = high < low
    high = high.masked_fill(empty, 0.0)
    low = low.masked_fill(empty, 0.0)
    at = labels[:, None]
    return torch.clamp(_ratio(q.gather(-1, at), p.gather(-1, at)), low, high)


@dataclass(frozen=True)
class _Scored:
    """One text's token scores: evalrun's (new contexts) and, in compat mode, MarkLLM's."""

    positions: np.ndarray  # evalrun's scored positions (ascending)
    scores: np.ndarray  # [len(positions), n_grid] float32: queries k = 1..n_grid
    markllm: np.ndarray | None  # [max(0, n - prefix_length), n_grid + 1] float32
    null: np.ndarray | None = None  # [permutations, len(positions), n_grid]: under the null keys


class Unbiased(MarkLLMKeyed):
    """Unbiased gamma-reweight with MarkLLM's keying (``compat=markllm``) or evalrun's."""

    needs_model = True

    def __init__(self, *, n_grid: int = 10, prefix_length: int = 5, p_threshold: float = 0.0005,
                 ignore_history_generation: bool = True, ignore_history_detection: bool = True,
                 compat: str = "none", permutations: int = 0) -> None:
        compat = compat_mode(NAME, compat)
        if n_grid < 1 or prefix_length < 1 or permutations < 0:
            raise ValueError(f"{NAME}: n_grid and prefix_length must be >= 1, permutations >= 0")
        self.permutations = int(permutations)
        self.n_grid = int(n_grid)
        self.prefix_length = int(prefix_length)
        self.p_threshold = float(p_threshold)
        self.ignore_history_generation = bool(ignore_history_generation)
        self.ignore_history_detection = bool(ignore_history_detection)
        self.compat = compat
        self.queries = grid_queries(self.n_grid)
        self.spec = Spec(name=NAME, params={
            "compat": compat, "ignore_history_detection": str(int(self.ignore_history_detection)),
            "ignore_history_generation": str(int(self.ignore_history_generation)),
            "n_grid": str(self.n_grid), "p_threshold": repr(self.p_threshold),
            "permutations": str(self.permutations), "prefix_length": str(self.prefix_length),
            "type": "gamma",
        })

    @property
    def shared_context(self) -> int | None:
        """Without a generation history the processor reads only the last ``prefix_length``
        ids, ignores ``seed`` and keeps no state; with one it is per generation."""
        return self.prefix_length if self.ignore_history_generation else None

    # ---- keys -----------------------------------------------------------------------------
    def hash_key(self, key: str) -> bytes:
        """The secret bytes appended to every context before hashing (the key checked first)."""
        self.check_key(key)
        if self.compat == "markllm":
            return markllm_hash_key(self.markllm_key(key))
        return native_hash_key(_NATIVE_TAG + key)

    # ---- detection ------------------------------------------------------------------------
    def _token_scores(self, ids: np.ndarray, rows: np.ndarray, hash_key: bytes,
                      positions: np.ndarray, reweight: np.ndarray, perms: dict[bytes, int],
                      queries: Sequence[tuple[float, float]]) -> np.ndarray:
        """Clamped scores ([len(positions), len(queries)] float32) of the tokens at
        ``positions``, Q being the reweighted row where ``reweight`` says so and P elsewhere.
        Rows are processed in chunks; ``perms`` keeps the permutation seed of each context (the
        permutations themselves, V int64 each, are drawn per chunk: memory stays bounded)."""
        import torch

        vocab_size = rows.shape[1]
        out = np.zeros((len(positions), len(queries)), dtype=np.float32)
        step = max(1, _CHUNK_ELEMENTS // max(1, vocab_size))
        for start in range(0, len(positions), step):
            at = positions[start:start + step]
            old = torch.from_numpy(rows[at - 1])
            new = old.clone()
            marked = np.flatnonzero(reweight[start:start + step])
            if len(marked):
                stack = []
                for t in at[marked]:
                    context = ids[t - self.prefix_length:t]
                    code = context.astype("<i8").tobytes()
                    if code not in perms:
                        perms[code] = context_seed(context, hash_key)
                    stack.append(permutation(perms[code], vocab_size))
                index = torch.from_numpy(marked)
                new[index] = gamma_reweight(old[index], torch.stack(stack))
            labels = torch.from_numpy(ids[at])
            with torch.no_grad():
                out[start:start + len(at)] = clamped_llr(old, new, labels, queries).numpy()
        return out

    def _score(self, token_ids: Sequence[int], key: str, vocab_size: int,
               logits: TokenLogits | None) -> _Scored:
        """One text's token scores, kept for the next call on the same text, key and model
        (a grade stage asks for ``detect`` and then ``prefix_p_values``: one model pass and
        one scoring serve both). The memo holds a digest of the hash key, never the key."""
        model = require_logits(self, logits, _WHY)
        ids = token_id_array(token_ids, vocab_size)
        hash_key = self.hash_key(key)
        memo = (self.spec.canonical(), model.name, vocab_size, hashlib.sha256(hash_key).digest(), ids.tobytes())
        return _SCORED.get_or_build(memo, lambda: self._score_text(ids, hash_key, vocab_size, model))

    def _score_text(self, ids: np.ndarray, hash_key: bytes, vocab_size: int, model: TokenLogits) -> _Scored:
        n, k = len(ids), self.prefix_length
        if n <= k:
            return _Scored(np.zeros(0, dtype=np.int64), np.zeros((0, self.n_grid), dtype=np.float32),
                           np.zeros((0, self.n_grid + 1), dtype=np.float32)
                           if self.compat == "markllm" else None)
        rows = checked_logits(self, model, ids, vocab_size)
        positions = np.arange(k, n)
        codes = np.lib.stride_tricks.sliding_window_view(ids, k)[:-1]  # contexts of positions
        _, first = np.unique(codes, axis=0, return_index=True)
        new = np.zeros(len(positions), dtype=bool)
        new[first] = True
        perms: dict[bytes, int] = {}
        ours = self.queries[1:]
        at = positions[new]
        null = (np.stack([self._token_scores(ids, rows, other, at, new[new], {}, ours)
                          for other in self.null_keys()]) if self.permutations else None)
        if self.compat != "markllm":
            return _Scored(at, self._token_scores(ids, rows, hash_key, at, new[new], perms, ours), None, null)
        # MarkLLM never reweights the last token; without ignore_history_detection, not repeats
        marked = new | self.ignore_history_detection
        marked[-1] = False
        markllm = self._token_scores(ids, rows, hash_key, positions, marked, perms, self.queries)
        scores = markllm[new, 1:]
        if new[-1]:
            scores[-1] = self._token_scores(ids, rows, hash_key, positions[-1:], new[-1:], perms, ours)[0]
        return _Scored(at, scores, markllm, null)

    def markllm_token_scores(self, token_ids: Sequence[int], key: str, vocab_size: int, *,
                             logits: TokenLogits | None = None) -> np.ndarray:
        """MarkLLM's clamped token scores ([max(0, n - prefix_length), n_grid + 1] float32:
        positions prefix_length..n-1, queries k = 0..n_grid); compat mode only."""
        if self.compat != "markllm":
            raise ValueError(f"--watermark {self.spec}: MarkLLM's scores need compat=markllm")
        scored = self._score(token_ids, key, vocab_size, logits)
        assert scored.markllm is not None
        return scored.markllm

    def markllm_score(self, token_scores: np.ndarray) -> float:
        """MarkLLM's p-value ``n_grid * exp(-max_k sum)`` from its token scores, in float32
        as its ``score_sequence`` computes it."""
        with np.errstate(over="ignore"):  # MarkLLM's k = 0 sums reach -inf
            sums = np.sum(token_scores, axis=0)
        return float(np.float32(self.n_grid) * np.exp(-sums[int(np.argmax(sums))]))

    def null_keys(self) -> list[bytes]:
        """The hash keys of the permutation null: fixed by the spec, never by the secret key."""
        tag = _NULL_TAG + self.spec.canonical().encode()
        return [hashlib.sha256(tag + j.to_bytes(4, "little")).digest() for j in range(self.permutations)]

    def _p_value(self, sums: np.ndarray, null_best: np.ndarray | None = None) -> np.ndarray:
        """The p-value of per-query sums ``sums`` ([..., n_grid]): the bound of their mean
        e-value, ``min(1, n_grid / sum_k exp(S_k))`` (module docstring); with ``permutations``,
        the share of null keys whose best sums (``null_best``, [permutations, ...]) reach the
        best of ``sums`` instead."""
        if null_best is None:
            return np.minimum(1.0, np.exp(np.log(self.n_grid) - logsumexp(sums, axis=-1)))
        best = sums.max(axis=-1)
        return nulls.permutation_p_values((null_best >= best).sum(axis=0), self.permutations)

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int, *,
               logits: TokenLogits | None = None) -> Detection:
        scored = self._score(token_ids, key, vocab_size, logits)
        sums = scored.scores.astype(np.float64).sum(axis=0)
        best = int(np.argmax(sums))
        score = float(sums[best])
        # the Q radius k / n_grid of the best query (None when no token was scored)
        extra: dict[str, Any] = {"grid_point": (best + 1) / self.n_grid if len(scored.positions) else None}
        if scored.markllm is not None:
            value = self.markllm_score(scored.markllm) if len(token_ids) >= 2 else None
            extra["markllm_score"] = value
            extra["markllm_is_watermarked"] = bool(value is not None and value < self.p_threshold)
        null_best = (None if scored.null is None
                     else scored.null.astype(np.float64).sum(axis=1).max(axis=1))
        if null_best is not None:
            extra["permutations"] = self.permutations
        return Detection(num_tokens_scored=len(scored.positions), score=score,
                         p_value=float(self._p_value(sums, null_best)), extra=extra)

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int, *,
                        logits: TokenLogits | None = None) -> np.ndarray:
        scored = self._score(token_ids, key, vocab_size, logits)
        per_position = np.zeros((len(token_ids), self.n_grid), dtype=np.float64)
        per_position[scored.positions] = scored.scores
        if not len(per_position):
            return np.ones(0, dtype=np.float64)
        sums = np.cumsum(per_position, axis=0)
        null_best = None
        if scored.null is not None:
            null = np.zeros((self.permutations, len(token_ids), self.n_grid), dtype=np.float64)
            null[:, scored.positions] = scored.null
            null_best = np.cumsum(null, axis=1).max(axis=2)
        return self._p_value(sums, null_best)

    # ---- generation -----------------------------------------------------------------------
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> DiPmarkLogitsProcessor:
        """DiPmark's processor at ``alpha = 1/2`` (the gamma-reweight; its float64 arithmetic
        keeps each row's total mass), keyed with this scheme's hash key: temperature first,
        contexts of ``prefix_length`` ids, rows with a shorter history untouched, and MarkLLM's
        generation history unless ``ignore_history_generation``."""
        twin = DiPmark(alpha=0.5, prefix_length=self.prefix_length,
                       ignore_history_generation=self.ignore_history_generation)
        return DiPmarkLogitsProcessor(twin, vocab_size, temperature, hash_key=self.hash_key(key))


def _flag(spec: Spec, key: str) -> bool:
    return bool(spec_int(spec, key, 1, what=WHAT, lo=0, hi=1))


def build(spec: Spec) -> Unbiased:
    """Validate ``unbiased:...`` and fill MarkLLM's defaults (module docstring)."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    kind = spec.params.get("type", "gamma")
    if kind != "gamma":
        raise SpecError(f"{WHAT} {spec}: type={kind!r} is not supported; only type=gamma "
                        "(MarkLLM's delta-reweight is not implemented)")
    n_grid = spec_int(spec, "n_grid", 10, what=WHAT, lo=1, hi=10_000)
    prefix_length = spec_int(spec, "prefix_length", 5, what=WHAT, lo=1, hi=1 << 20)
    p_threshold = spec_float(spec, "p_threshold", 0.0005, what=WHAT, lo=0.0, hi=1.0)
    compat = compat_mode(spec, spec.params.get("compat"))
    permutations = spec_int(spec, "permutations", 0, what=WHAT, lo=0, hi=100_000)
    return Unbiased(n_grid=n_grid, prefix_length=prefix_length, p_threshold=p_threshold,
                    ignore_history_generation=_flag(spec, "ignore_history_generation"),
                    ignore_history_detection=_flag(spec, "ignore_history_detection"),
                    compat=compat, permutations=permutations)
