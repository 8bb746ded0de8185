"""SynthID-Text (Dathathri et al., Nature 2024): tournament sampling over n-gram keyed
g-values, ``synthid:ngram_len=5,score=mean|weighted_mean,...``, ``--key 654,400,836,...``.

Generation has the semantics of transformers' ``SynthIDTextWatermarkLogitsProcessor``
(``transformers/generation/logits_process.py``; configured by
``SynthIDTextWatermarkingConfig`` in ``generation/configuration_utils.py``), reproduced here
from its definition:

* sampling table: ``sampling_table_size`` bits drawn by ``torch.randint(0, 2, ...)`` from a CPU
  generator seeded with ``sampling_table_seed``. That is the lowest bit of each 32-bit output
  of MT19937 initialised with ``init_genrand(seed mod 2**32)``; :func:`sampling_table` reads
  the same outputs through numpy's legacy ``RandomState`` so detection needs no torch.
* hashing (``accumulate_hash``): ``h <- (h + x) * 6364136223846793005 + 1`` in wrapping
  int64 arithmetic, folded from ``h = 1`` over the ``ngram_len - 1`` context tokens, then the
  candidate token, then once more per key (one key per tournament layer). The g-value of layer
  ``d`` is ``table[h_d mod sampling_table_size]`` (``mod`` of the signed value, as torch's
  ``%``).
* tournament (``update_scores``): ``p = softmax(scores)``, then for each layer
  ``p <- p * (1 + g_d - sum(g_d * p))``; the processor returns ``log p`` (non-finite entries
  replaced by the dtype's lowest value). The arithmetic is torch's, in the scores' dtype and in
  the same order, so our scores equal the reference's bit for bit.
* per-generation state (``SynthIDTextWatermarkState``): the context is the last
  ``ngram_len - 1`` *generated* tokens, zero-filled on the left (the prompt is never part of
  it); with ``skip_first_ngram_calls`` the first ``ngram_len - 1`` steps are left alone. Each
  watermarked step's context hash is checked against the last ``context_history_size`` hashes
  (a window that starts full of zeros) and then pushed; a repeated context leaves the step's
  scores as they came in.
* temperature: transformers applies its watermark after every other processor, the
  temperature warper included (DeepMind's own processor divides by the temperature first too),
  so the processor divides by the temperature and then runs the tournament; the provider
  samples the result at temperature 1 (greedy decoding: no division, argmax). Reference
  semantics with ``top_k=0`` and ``top_p=1`` (evalrun's providers apply neither).

Unlike transformers' processor, whose state advances once per call, ours derives its state
from the ids it is given: the prompt length is fixed at the first call and everything else
(the step, the context, the history window) is a function of the tokens after it, memoised
per row. Repeating a call, or calling after a step was skipped, therefore gives the same
scores as one call per step; one processor serves one generation (one fixed set of rows).

Detection scores the generated token ids (prompt excluded) as the reference detector
(``SynthIDTextWatermarkDetector.__call__`` in ``transformers/generation/watermarking.py``):
g-values of every n-gram (``compute_g_values``), masked by ``compute_context_repetition_mask``
(a fresh zero-filled window over the text's own contexts) and, with ``eos_token_id``, by
``compute_eos_token_mask`` (n-grams ending at or after the first EOS). The scores are
google-deepmind/synthid-text's ``mean_score`` and ``weighted_mean_score``
(``src/synthid_text/detector_mean.py``): the mean of the unmasked g-values, and the mean
with layer weights ``linspace(10, 1, depth)`` normalised to sum to ``depth``.

Null (text independent of the keys): the hash lands anywhere in the table, so each unmasked
g-value is a Bernoulli(q) bit, q the table's fraction of ones (0.49962 for the default table,
seed 0), independent across layers and across the distinct contexts the repetition mask
leaves (up to hash collisions: the table index keeps only the low bits of the 64-bit hash, so
with the default table two distinct n-grams share their g-values with probability 2**-16;
1,000 random 1,000-token texts gave a null z-score variance of 0.98). ``mean``: the sum of the n*depth bits is exactly Binomial(n*depth, q); the p-value
is its upper tail. ``weighted_mean``: the weights are proportional to the integers
``a_d = 10(depth-1) - 9d``, so the score is a function of ``T = sum_d a_d * G_d`` (``G_d``
the layer's count of ones, Binomial(n, q)); the p-value is the normal tail of ``T`` with its
exact mean ``n q sum(a)`` and variance ``n q (1-q) sum(a^2)`` (one layer: the exact binomial,
as for ``mean``). Its accuracy, as the ratio of the normal tail to the exact lattice tail
(:func:`weighted_tail_exact`, q of the default table), measured over depth 2..30 and
n = 2..100: at p = 0.02 within 1% for depth >= 3 and n*depth >= 180 (within 2.5% for depth 2
and n*depth >= 80); further out the normal tail is conservative (too large): at p = 1e-6 by
a factor 1.03 (depth 30, n = 60), 1.07 (depth 9, n = 100), 1.5 (depth 30, n = 5), 4.7
(depth 9, n = 5). Short texts are therefore under-claimed in the far tail, never over-claimed
there; tests/watermark/schemes/test_synthid.py pins these bounds.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Sequence

import numpy as np

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, check_keys, spec_int
from evalrun._util.threads import map_blocks, run_together
from evalrun.kernels import vocab_rows
from evalrun.watermark.base import Detection, WatermarkScheme, check_temperature, token_id_array
from evalrun.watermark.engine import nulls

WHAT = "--watermark"
SCORES = ("mean", "weighted_mean")
ALLOWED_KEYS = frozenset({"ngram_len", "sampling_table_size", "sampling_table_seed",
                          "context_history_size", "skip_first_ngram_calls", "depth", "score",
                          "eos_token_id"})
#: transformers' ``SynthIDTextWatermarkingConfig.validate`` bound
MAX_TABLE = 2**24
#: ``accumulate_hash``'s linear congruential parameters (newlib/musl)
MULTIPLIER = 6364136223846793005
INCREMENT = 1
_MASK64 = (1 << 64) - 1
_INT_RE = re.compile(r"[+-]?[0-9]+")
_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


# ------------------------------------------------------------------------------------------
# keys, table, hashes
# ------------------------------------------------------------------------------------------
def parse_keys(key: Any, *, depth: int | None = None, table_size: int | None = None,
               scheme: Any = "synthid") -> tuple[int, ...]:
    """The tournament keys from ``--key`` text ``"654,400,836"``: int64 integers, ``depth`` of
    them when given, no two giving the same layer of g-values (equal keys; with a table of
    ``table_size`` = 2**k entries the index keeps the hash's low k bits, so keys equal modulo
    2**k as well). Errors name ``--key`` and positions, never the values."""
    where = f"--key for {scheme}"
    if not isinstance(key, str) or not key.strip():
        raise SpecError(f"{where}: expected comma-separated integer keys, one per layer "
                        "(e.g. --key 654,400,836)")
    keys: list[int] = []
    for pos, part in enumerate(key.split(","), start=1):
        text = part.strip()
        if not _INT_RE.fullmatch(text):
            raise SpecError(f"{where}: item {pos} is not a decimal integer "
                            "(expected comma-separated integer keys)")
        value = int(text)
        if not -(2**63) <= value < 2**63:
            raise SpecError(f"{where}: item {pos} is outside the int64 range")
        keys.append(value)
    power_of_two = table_size is not None and table_size & (table_size - 1) == 0
    layers = [k % table_size for k in keys] if power_of_two else keys  # type: ignore[operator]  # power_of_two implies a table_size
    for pos, layer in enumerate(layers, start=1):
        if layers.index(layer) != pos - 1:
            why = ("equal keys" if keys.index(keys[pos - 1]) != pos - 1 else
                   f"keys equal modulo sampling_table_size={table_size}")
            raise SpecError(f"{where}: item {pos} gives the same g-values layer as item "
                            f"{layers.index(layer) + 1} ({why})")
    if depth is not None and len(keys) != depth:
        raise SpecError(f"{where}: {len(keys)} key(s) given but depth={depth}; give one key "
                        "per tournament layer")
    return tuple(keys)


@functools.lru_cache(maxsize=8)
def sampling_table(size: int, seed: int) -> np.ndarray:
    """transformers' sampling table (``torch.randint(0, 2, (size,))`` from a CPU generator
    seeded with ``seed``) as read-only uint8 bits, computed without torch."""
    raw = np.random.RandomState(seed % 2**32).randint(0, 2**32, size, dtype=np.uint32)
    table = (raw & 1).astype(np.uint8)
    table.setflags(write=False)
    return table


def _u64(values: Any) -> np.ndarray:
    """Integers (int64 range) as uint64 with two's-complement wrap-around."""
    return np.asarray(values, dtype=np.int64).astype(np.uint64)


def fold(h: np.ndarray, data: np.ndarray) -> np.ndarray:
    """``accumulate_hash``: fold the last axis of ``data`` into ``h`` (uint64, wrapping)."""
    h = np.array(h, dtype=np.uint64, copy=True)
    data = _u64(data)
    for i in range(data.shape[-1]):
        h += data[..., i]
        h *= np.uint64(MULTIPLIER)
        h += np.uint64(INCREMENT)
    return h


def fold_int(h: int, data: Sequence[int]) -> int:
    """:func:`fold` for one hash, in Python integers (the processor's per-step context)."""
    for x in data:
        h = ((h + int(x)) * MULTIPLIER + INCREMENT) & _MASK64
    return h


def layer_g_values(hashes: np.ndarray, keys: np.ndarray, table: np.ndarray) -> np.ndarray:
    """g-values ``[..., depth]`` (uint8) of n-gram hashes ``[...]`` (uint64) for ``keys``
    (uint64): one more fold per key, then the table entry at the signed hash mod its size."""
    h = hashes[..., None] + keys
    h *= np.uint64(MULTIPLIER)
    h += np.uint64(INCREMENT)
    size = len(table)
    if size & (size - 1) == 0:  # a power of two: the signed floor mod keeps the low bits
        return table[h & np.uint64(size - 1)]
    return table[np.mod(h.view(np.int64), np.int64(size))]


def repetition_flags(context_hashes: Sequence[int] | np.ndarray, history: int) -> np.ndarray:
    """``compute_context_repetition_mask`` inverted: True where a context hash occurs among
    the ``history`` hashes pushed before it, in a window that starts full of zeros."""
    h = np.asarray(context_hashes, dtype=np.uint64)
    n = len(h)
    repeated = np.zeros(n, dtype=bool)
    if n == 0 or history == 0:
        return repeated
    order = np.argsort(h, kind="stable")
    same = h[order[1:]] == h[order[:-1]]
    previous = np.full(n, -1, dtype=np.int64)
    previous[order[1:][same]] = order[:-1][same]
    steps = np.arange(n)
    repeated = (previous >= 0) & (steps - previous <= history)
    repeated |= (h == 0) & (steps < history)
    return repeated


def lattice_weights(depth: int) -> np.ndarray:
    """Integers proportional to ``linspace(10, 1, depth)``: ``10(depth-1) - 9d``, divided by
    their gcd (``[1]`` for one layer)."""
    if depth == 1:
        return np.ones(1, dtype=np.int64)
    a = 10 * (depth - 1) - 9 * np.arange(depth, dtype=np.int64)
    return a // np.gcd.reduce(a)


def deepmind_weights(depth: int) -> np.ndarray:
    """``weighted_mean_score``'s default weights: ``linspace(10, 1, depth)`` scaled to sum to
    ``depth``."""
    w = np.linspace(10, 1, depth)
    return w * (depth / np.sum(w))


def weighted_tail_exact(n: int, depth: int, q: float, t: np.ndarray | int) -> np.ndarray:
    """Exact ``P[T >= t]`` for ``T = sum_d a_d Binomial(n, q)`` (independent layers,
    :func:`lattice_weights`) by convolution: the reference the normal p-value of
    ``weighted_mean`` is measured against (O(n^2 * sum(a)^2): small n only)."""
    a = lattice_weights(depth)
    token = np.zeros(int(a.sum()) + 1)
    token[0] = 1.0
    for ad in a:
        shifted = np.zeros_like(token)
        shifted[ad:] = token[:len(token) - ad] * q
        token = token * (1 - q) + shifted
    total = np.ones(1)
    for _ in range(n):
        total = np.convolve(total, token)
    sf = np.cumsum(total[::-1])[::-1]
    t = np.asarray(t, dtype=np.int64)
    return np.where(t <= 0, 1.0, np.where(t < len(sf), sf[np.clip(t, 0, len(sf) - 1)], 0.0))


# ------------------------------------------------------------------------------------------
# the scheme
# ------------------------------------------------------------------------------------------
class SynthID(WatermarkScheme):
    """SynthID-Text with transformers' hashing and DeepMind's mean / weighted-mean scores."""

    def __init__(self, *, ngram_len: int = 5, sampling_table_size: int = 2**16,
                 sampling_table_seed: int = 0, context_history_size: int = 1024,
                 skip_first_ngram_calls: bool = False, depth: int | None = None,
                 score: str = "mean", eos_token_id: int | None = None) -> None:
        if score not in SCORES:
            raise SpecError(f"{WHAT} synthid: score={score!r} unknown; expected mean or weighted_mean")
        self.ngram_len = int(ngram_len)
        self.sampling_table_size = int(sampling_table_size)
        self.sampling_table_seed = int(sampling_table_seed)
        self.context_history_size = int(context_history_size)
        self.skip_first_ngram_calls = bool(skip_first_ngram_calls)
        self.depth = None if depth is None else int(depth)
        self.score = score
        self.eos_token_id = None if eos_token_id is None else int(eos_token_id)
        params = {
            "ngram_len": str(self.ngram_len),
            "sampling_table_size": str(self.sampling_table_size),
            "sampling_table_seed": str(self.sampling_table_seed),
            "context_history_size": str(self.context_history_size),
            "skip_first_ngram_calls": "true" if self.skip_first_ngram_calls else "false",
            "score": score,
        }
        if self.depth is not None:
            params["depth"] = str(self.depth)
        if self.eos_token_id is not None:
            params["eos_token_id"] = str(self.eos_token_id)
        self.spec = Spec(name="synthid", params=params)

    def __repr__(self) -> str:
        return f"SynthID({self.spec})"

    @property
    def table(self) -> np.ndarray:
        return sampling_table(self.sampling_table_size, self.sampling_table_seed)

    @property
    def null_q(self) -> float:
        """Probability of a one under the null: the table's fraction of ones."""
        return float(self.table.mean())

    def keys(self, key: str) -> tuple[int, ...]:
        return parse_keys(key, depth=self.depth, table_size=self.sampling_table_size,
                          scheme=self.spec)

    def check_key(self, key: str) -> None:
        """``--key`` must be comma-separated int64 integers giving distinct g-value layers
        (:func:`parse_keys`; ``depth`` of them when the spec gives ``depth``); messages name
        ``--key``, never a value."""
        super().check_key(key)
        self.keys(key)

    # -- detection ----------------------------------------------------------------------------
    def g_values_and_mask(self, token_ids: Sequence[int], key: str,
                          vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """g-values ``[L - ngram_len + 1, depth]`` (uint8) of every n-gram of the text and the
        mask of the ones the detector scores (bool): the reference's ``compute_g_values``,
        ``compute_context_repetition_mask`` and, with ``eos_token_id``, its EOS mask."""
        keys = _u64(self.keys(key))
        ids = token_id_array(token_ids, vocab_size)
        n = self.ngram_len
        count = max(len(ids) - n + 1, 0)
        if count == 0:
            return np.zeros((0, len(keys)), dtype=np.uint8), np.zeros(0, dtype=bool)
        contexts = np.lib.stride_tricks.sliding_window_view(ids[:-1], n - 1)
        context_hashes = fold(np.ones(count, dtype=np.uint64), contexts)
        ngram_hashes = fold(context_hashes, ids[n - 1:, None])
        g = layer_g_values(ngram_hashes, keys, self.table)
        mask = ~repetition_flags(context_hashes, self.context_history_size)
        if self.eos_token_id is not None:
            hits = np.flatnonzero(ids == self.eos_token_id)
            if len(hits):
                mask[max(int(hits[0]) - (n - 1), 0):] = False
        return g, mask

    def _prefix_stats(self, token_ids: Sequence[int], key: str,
                      vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Per prefix of the text: scored n-grams, sum of their g-values, and their weighted
        sum in lattice units (:func:`lattice_weights`); and the depth."""
        g, mask = self.g_values_and_mask(token_ids, key, vocab_size)
        depth = g.shape[1]
        lead = np.zeros(len(token_id_array(token_ids, vocab_size)) - len(g), dtype=np.int64)
        m = mask.astype(np.int64)
        ones = g.astype(np.int64).sum(axis=1) * m
        weighted = (g.astype(np.int64) @ lattice_weights(depth)) * m
        cum = [np.concatenate([lead, np.cumsum(x)]) for x in (m, ones, weighted)]
        return cum[0], cum[1], cum[2], depth

    def _p_values(self, n: np.ndarray, ones: np.ndarray, weighted: np.ndarray,
                  depth: int) -> np.ndarray:
        q = self.null_q
        if self.score == "mean" or depth == 1:  # one layer: the weighted mean is the mean
            return nulls.binomial_p(ones, n * depth, q)
        a = lattice_weights(depth)
        mean = n * q * float(a.sum())
        sd = np.sqrt(n * q * (1 - q) * float((a * a).sum()))
        z = np.where(n > 0, (weighted - mean) / np.where(n > 0, sd, 1.0), 0.0)
        return np.where(n > 0, nulls.normal_p(z), 1.0)

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int) -> Detection:
        g, mask = self.g_values_and_mask(token_ids, key, vocab_size)
        depth = g.shape[1]
        n = int(mask.sum())
        extra: dict[str, Any] = {"score_name": self.score, "depth": depth,
                                 "num_ngrams": len(g), "null_q": self.null_q}
        if n == 0:
            extra.update(mean_score=0.0, weighted_mean_score=0.0)
            return Detection(num_tokens_scored=0, score=0.0, p_value=1.0, extra=extra)
        scored = g[mask].astype(np.float64)
        mean = float(scored.sum() / (depth * n))
        weighted = float((scored * deepmind_weights(depth)).sum() / (depth * n))
        ones = int(scored.sum())
        lattice = int((g[mask].astype(np.int64) @ lattice_weights(depth)).sum())
        p = float(self._p_values(np.array([n]), np.array([ones]), np.array([lattice]), depth)[0])
        extra.update(mean_score=mean, weighted_mean_score=weighted,
                     null="binomial" if self.score == "mean" or depth == 1 else "normal")
        return Detection(num_tokens_scored=n, score=mean if self.score == "mean" else weighted,
                         p_value=p, extra=extra)

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        n, ones, weighted, depth = self._prefix_stats(token_ids, key, vocab_size)
        return np.asarray(self._p_values(n, ones, weighted, depth), dtype=np.float64)

    # -- generation ---------------------------------------------------------------------------
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> "SynthIDLogitsProcessor":
        return SynthIDLogitsProcessor(self, self.keys(key), temperature)


class _Row:
    """One generation's state, memoised from its generated tokens: per step, the context hash
    (None when skipped) and whether the tournament applies; the latest push of every hash."""

    def __init__(self) -> None:
        self.tokens = np.zeros(0, dtype=np.int64)
        self.hashes: list[int | None] = []
        self.active: list[bool] = []
        self.last: dict[int, int] = {}
        self.pushes = 0

    def _truncate(self, steps: int) -> None:
        self.hashes, self.active = self.hashes[:steps], self.active[:steps]
        self.last, self.pushes = {}, 0
        for h in self.hashes:
            if h is not None:
                self.last[h] = self.pushes
                self.pushes += 1

    def sync(self, generated: np.ndarray, scheme: SynthID) -> bool:
        """Bring the state up to step ``len(generated)``; True when that step is watermarked."""
        step = len(generated)
        common = min(len(self.tokens), step)
        if common and not np.array_equal(self.tokens[:common], generated[:common]):
            common = int(np.argmin(self.tokens[:common] == generated[:common]))
        valid = min(len(self.hashes), common + 1)  # step j reads generated[:j]
        if valid < len(self.hashes):
            self._truncate(valid)
        n, history = scheme.ngram_len, scheme.context_history_size
        padded = [0] * (n - 1) + generated.tolist()
        for j in range(len(self.hashes), step + 1):
            if scheme.skip_first_ngram_calls and j + 1 < n:
                self.hashes.append(None)
                self.active.append(False)
                continue
            h = fold_int(1, padded[j:j + n - 1])
            prev = self.last.get(h)
            repeated = (prev is not None and self.pushes - prev <= history) or (
                h == 0 and self.pushes < history)
            self.last[h] = self.pushes
            self.pushes += 1
            self.hashes.append(h)
            self.active.append(not repeated)
        self.tokens = generated.copy()
        return self.active[step]


def tournament_log_probs(scores: Any, g: Any) -> Any:
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


@functools.lru_cache(maxsize=8)
def rotated_table(size: int, seed: int) -> np.ndarray:
    """The sampling table rotated for :func:`evalrun.kernels.vocab_rows.tournament_layout`
    (read-only; one per table, shared)."""
    rotated = vocab_rows.tournament_layout(sampling_table(size, seed), np.zeros(0, np.uint64),
                                           np.zeros(1, np.uint64))[0]
    rotated.setflags(write=False)
    return rotated


@functools.lru_cache(maxsize=8)
def tournament_values(size: int, seed: int, width: int) -> np.ndarray:
    """:func:`rotated_table` as :func:`evalrun.kernels.vocab_rows.tournament_values` for rows
    of ``width`` (one per table and width, shared)."""
    return vocab_rows.tournament_values(rotated_table(size, seed), width)


def tournament_log_probs_rotated(scores: Any, rotated: np.ndarray, offsets: np.ndarray,
                                 values: np.ndarray | None = None, *,
                                 rows_alone: bool = False) -> Any:
    """:func:`tournament_log_probs` of float32 CPU ``scores [R, W]`` with the g-values as
    rotations of one permuted table (:func:`evalrun.kernels.vocab_rows.tournament_layout`,
    ``offsets [R, depth]``): the same torch softmax, masses (row sums of the same products)
    and log, each layer's products and update one kernel pass over the rows instead of four
    torch operations and a ``[R, W, depth]`` array of g-values. Where the kernel sums in
    torch's order (:func:`evalrun.kernels.vocab_rows.torch_sum_order`) it also takes the
    masses, all layers of a row in one call; ``values``: ``rotated`` as
    :func:`evalrun.kernels.vocab_rows.tournament_values` for this width (made when not given).
    ``rows_alone``: each row's numbers as this function gives them for that row alone (the
    masses summed as torch sums a single row), the same bits as one call per row."""
    import torch

    order = vocab_rows.torch_sum_order(1 if rows_alone else int(scores.shape[0]))
    if rows_alone and order is None and scores.shape[0] > 1:  # torch's sums, one row at a time
        return torch.cat([tournament_log_probs_rotated(scores[r:r + 1], rotated, offsets[r:r + 1], values)
                          for r in range(int(scores.shape[0]))])
    probs = torch.softmax(scores, dim=1).contiguous()
    p = probs.numpy()
    if order is not None:
        # the kernel sums as torch sums these rows: each row's layers in one call, while it is
        # in cache, and the rows on torch's threads
        ext = vocab_rows.tournament_values(rotated, p.shape[1]) if values is None else values
        parts = vocab_rows.split_parts(p.shape[1], order[1]) if p.shape[0] == 1 else 1
        if parts > 1:  # one long row: the chunks torch sums it in, on threads of their own at once
            state = vocab_rows.tournament_state()
            run_together(lambda k: vocab_rows.tournament_part(p, ext, offsets, order, k, state), parts)
        else:  # one block of rows per thread, one kernel call each (a build that reads the
            # g-values as floats converts them once a call)
            map_blocks(lambda a, b: vocab_rows.tournament(p[a:b], ext, offsets[a:b], order), p.shape[0])
    else:  # a torch whose sums the kernel does not follow
        green_p = np.empty_like(p)
        depth = int(offsets.shape[1])
        vocab_rows.tournament_layer(p, rotated, None, None, green_p, offsets[:, 0])
        for layer in range(depth):
            mass = torch.from_numpy(green_p).sum(dim=1, keepdim=True)
            vocab_rows.tournament_layer(p, rotated, offsets[:, layer], mass.numpy(), green_p,
                                        offsets[:, layer + 1] if layer + 1 < depth else None)
    # in place, one pass each: the values of torch.where(torch.isfinite(logs), logs, min)
    low = torch.finfo(probs.dtype).min
    return probs.log_().nan_to_num_(nan=low, posinf=low, neginf=low)


class SynthIDLogitsProcessor:
    """Batched processor ``(input_ids [B, T], scores [B, V]) -> scores`` for one generation of
    ``B`` rows: divides by the temperature (when > 0), then applies the tournament to the rows
    whose step is watermarked. Holds the keys in memory for the generation's lifetime."""

    def __init__(self, scheme: SynthID, keys: tuple[int, ...], temperature: float) -> None:
        check_temperature(temperature)
        self.scheme = scheme
        self._keys = _u64(keys)
        self.temperature = float(temperature)
        self.prompt_len: int | None = None
        self._rows: list[_Row] = []
        self._continuations: dict[int, np.ndarray] = {}

    def __repr__(self) -> str:
        return f"SynthIDLogitsProcessor({self.scheme.spec}, temperature={self.temperature})"

    def _g_values(self, context_hash: int, width: int) -> np.ndarray:
        """g-values ``[width, depth]`` of every candidate token after a context."""
        base = self._continuations.get(width)
        if base is None:
            base = self._continuations[width] = _u64(np.arange(width))
        ngram = base + np.uint64(context_hash)
        ngram *= np.uint64(MULTIPLIER)
        ngram += np.uint64(INCREMENT)
        return layer_g_values(ngram, self._keys, self.scheme.table)

    def _prepare(self, input_ids: Any, scores: Any) -> tuple[Any, bool, list[int], int]:
        """:meth:`__call__`'s checks and state update: the scores divided by the temperature
        (the caller's own tensor at temperature 1 and 0: x / 1.0 is x, bit for bit), whether
        they were divided, the rows whose step is watermarked and the step."""
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
        divided = self.temperature > 0 and self.temperature != 1
        if divided:
            scores = scores / self.temperature
        rows = [r for r, state in enumerate(self._rows)
                if state.sync(ids[r, self.prompt_len:], self.scheme)]
        return scores, divided, rows, ids.shape[1] - self.prompt_len

    def _rotated(self, scores: Any) -> bool:
        """Whether the tournament of these scores runs on the rotated table and the kernel."""
        import torch

        size = self.scheme.sampling_table_size
        return (vocab_rows.compiled_available() and scores.device.type == "cpu"
                and scores.dtype == torch.float32 and size & (size - 1) == 0)

    def _hash(self, row: int, step: int) -> int:
        """The context hash of a watermarked step (only skipped steps have none)."""
        h = self._rows[row].hashes[step]
        assert h is not None
        return h

    def _marked(self, scores: Any, hashes: Sequence[int]) -> Any:
        """The tournament's log-probabilities of prepared rows ``scores [n, V]`` whose contexts
        hash to ``hashes`` (a new tensor)."""
        import torch

        width = int(scores.shape[-1])
        if self._rotated(scores):
            table = (self.scheme.sampling_table_size, self.scheme.sampling_table_seed)
            offsets = vocab_rows.tournament_offsets(table[0], np.asarray(hashes, dtype=np.uint64),
                                                    self._keys)
            return tournament_log_probs_rotated(scores, rotated_table(*table), offsets,
                                                tournament_values(*table, width))
        g = np.stack([self._g_values(h, width) for h in hashes])
        return tournament_log_probs(scores, torch.from_numpy(g).to(scores.device))

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        as_numpy = isinstance(scores, np.ndarray)
        if as_numpy:
            scores = torch.from_numpy(scores)
        scores, divided, rows, step = self._prepare(input_ids, scores)
        if rows:
            hashes = [self._hash(r, step) for r in rows]
            if len(rows) == scores.shape[0]:  # every row, in order: the new tensor as it is
                marked = self._marked(scores, hashes)
                return marked.numpy() if as_numpy else marked
            index = torch.tensor(rows, dtype=torch.long, device=scores.device)
            marked = self._marked(scores[index], hashes)
            scores = scores if divided else scores.clone()  # the caller's scores stay as they were
            scores[index] = marked
        return scores.numpy() if as_numpy else scores

    @classmethod
    def call_rows(cls, processors: Sequence["SynthIDLogitsProcessor"], contexts: Sequence[Any],
                  scores: Any) -> Any:
        """``torch.cat([p(c, scores[k:k + 1]) for k, (p, c) in ...])`` for generations of one
        row each (the hf provider's: one processor per generation), bit for bit, in one pass:
        softmax, log and the rows' tournaments on a ``[R, V]`` tensor at once, each row's sums
        in the order torch sums a single row (per row, softmax and log give the same bits on
        one row or many; tests hold this). Falls back on one call per processor where the
        rows' tables or depths differ or the kernel does not apply."""
        import torch

        parts = [p._prepare(c, scores[k:k + 1]) for k, (p, c) in enumerate(zip(processors, contexts))]
        out = torch.cat([part[0] for part in parts]) if parts else scores[:0]
        active = [k for k, part in enumerate(parts) if part[2]]
        if not active:
            return out
        first = processors[active[0]]
        table = (first.scheme.sampling_table_size, first.scheme.sampling_table_seed)
        same = all((processors[k].scheme.sampling_table_size, processors[k].scheme.sampling_table_seed,
                    len(processors[k]._keys)) == (*table, len(first._keys)) for k in active)
        if not same or not first._rotated(out):
            for k in active:  # the states are up to date: the tournaments alone, row by row
                out[k:k + 1] = processors[k]._marked(out[k:k + 1], [processors[k]._hash(0, parts[k][3])])
            return out
        offsets = np.concatenate([vocab_rows.tournament_offsets(
            table[0], np.asarray([processors[k]._hash(0, parts[k][3])], dtype=np.uint64),
            processors[k]._keys) for k in active])
        marked = tournament_log_probs_rotated(
            out[active] if len(active) < len(parts) else out, rotated_table(*table), offsets,
            tournament_values(*table, int(out.shape[-1])), rows_alone=True)
        if len(active) == len(parts):
            return marked
        out[active] = marked
        return out


# ------------------------------------------------------------------------------------------
# spec
# ------------------------------------------------------------------------------------------
def _spec_bool(spec: Spec, key: str, default: bool) -> bool:
    raw = spec.params.get(key)
    if raw is None:
        return default
    value = _BOOLS.get(raw.strip().lower())
    if value is None:
        raise SpecError(f"{WHAT} {spec}: {key}={raw!r} is not a boolean (true or false)")
    return value


def build(spec: Spec) -> SynthID:
    """Validate ``synthid:ngram_len=5,score=mean,...`` and fill in transformers' defaults."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    score = spec.params.get("score", "mean")
    if score not in SCORES:
        raise SpecError(f"{WHAT} {spec}: score={score!r} unknown; expected mean or weighted_mean")
    depth = spec_int(spec, "depth", 0, what=WHAT, lo=1) if "depth" in spec.params else None
    eos = (spec_int(spec, "eos_token_id", 0, what=WHAT, lo=0)
           if "eos_token_id" in spec.params else None)
    return SynthID(
        ngram_len=spec_int(spec, "ngram_len", 5, what=WHAT, lo=2, hi=1024),
        sampling_table_size=spec_int(spec, "sampling_table_size", 2**16, what=WHAT, lo=2,
                                     hi=MAX_TABLE),
        sampling_table_seed=spec_int(spec, "sampling_table_seed", 0, what=WHAT, lo=-(2**63),
                                     hi=2**64 - 1),
        context_history_size=spec_int(spec, "context_history_size", 1024, what=WHAT, lo=0,
                                      hi=2**31 - 1),
        skip_first_ngram_calls=_spec_bool(spec, "skip_first_ngram_calls", False),
        depth=depth, score=score, eos_token_id=eos,
    )
