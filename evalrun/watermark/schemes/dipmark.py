"""DiPmark (Wu et al., "A Resilient and Accessible Distribution-Preserving Watermark for Large
Language Models", ICML 2024), as MarkLLM implements it (THU-BPM/MarkLLM at 112fa74,
``watermark/dip/dip.py``, ``config/DIP.json``): ``dipmark:gamma=...,alpha=...,...``.

Parameters and defaults (MarkLLM's): ``gamma=0.5`` (green quantile), ``alpha=0.45``
(reweighting strength, ``0 <= alpha <= 0.5``), ``prefix_length=5`` (context ids hashed; 0 means
the whole history), ``z_threshold=1.513`` (MarkLLM's decision threshold, reported only),
``ignore_history_generation=0`` and ``ignore_history_detection=0``, ``compat=none|markllm``.

Randomness. A position's context is its last ``prefix_length`` ids (fewer at the start of a
text; the whole history for 0), and each context has a permutation of the vocabulary.

* ``compat=markllm``: the context as int64 little-endian bytes ``c`` gets the seed
  ``int.from_bytes(sha256(c + hash_key), "big") % (2**32 - 1)`` and the permutation
  ``torch.randperm(V, generator=torch.Generator().manual_seed(seed))``. ``--key`` is MarkLLM's
  integer config ``key`` and ``hash_key`` its 128-byte expansion
  ``random.Random(key).getrandbits(1024).to_bytes(128, "big")`` (the expansion MarkLLM's
  ``DIPConfig`` lost in commit 26d976e; without it MarkLLM's ``detect_watermark`` raises
  AttributeError on ``hash_key``).
* native (``compat=none``): the keyed-hash kernels of :mod:`evalrun.kernels.keyed_hash`, so
  detection never builds a permutation. The key word is
  :func:`~evalrun.watermark.randomness.derive_key` of ``--key`` tagged for this scheme; a
  context's seed word is the SplitMix64 ``pair`` hash folded over its ids newest first,
  starting from the key word; a token's position in the context's permutation is
  ``feistel_rank(seed, token, V)``, a keyed bijection of ``[0, V)`` (4-round Feistel network
  with cycle walking) evaluated per token in O(1). Detection costs a few hashes per token instead of a
  ``randperm(V)``; generation ranks all V tokens and sorts them into the permutation.

Generation (MarkLLM's ``reweight_logits``, written from the paper's definition): permute the
temperature-scaled distribution, take its CDF ``F`` in permuted order, and give the j-th permuted
token the probability ``G(F_j) - G(F_{j-1})`` with ``G(x) = max(x - alpha, 0) + max(x - (1 -
alpha), 0)``: mass moves towards the end of the permutation, the "green" part. A context already
used in this generation is left unwatermarked (unless ``ignore_history_generation=1``); prompts
shorter than ``prefix_length`` are left as they are. The processor is per generation (it keeps
that history), never shared between rows.

Detection. A token's quantile is ``q = (position in the permutation + 1) / V`` in float32, and
it is green when ``q >= gamma`` (float32). evalrun's null (exact, under the usual random-oracle
idealisation of the keyed hash, of the Feistel permutation and of ``randperm``): for a text fixed
independently of the key, a token's permutation position at a context is uniform on ``[0, V)``
and independent across distinct contexts (distinct seeds), so each token whose context is new in
the text (the first token has none and is not scored; later repeats of a context -- native: of
its seed word -- are dropped whatever ``ignore_history_detection`` says) is green with
probability exactly ``p = #{k in 1..V : float32(k / V) >= gamma} / V``.
The green count G of n such tokens is Binomial(n, p): the p-value is
``nulls.binomial_p(G, n, p)``, the z-score ``(G - p n) / sqrt(n p (1 - p))`` (the score).
Seeds of distinct contexts collide with probability about ``n**2 / 2**33`` (compat; native
``n**2 / 2**65``), which is ignored. ``detect_many`` scores all texts in one vectorised pass
(native) and equals ``detect`` text by text.

MarkLLM's score (``extra["markllm_score"]`` in compat mode, the number its
``detect_watermark`` returns): ``z = (G - (1 - gamma) n_m) / sqrt(n_m)`` in float32, where n_m
is the text length less the dropped repeats (the unscorable first token is counted, with
``q = 0``). That is the DiPmark paper's own score (Wu et al., its detection section:
``Phi = (|green| - (1 - gamma) n) / sqrt(n)``, tested there with the Hoeffding bound
``P(Phi >= t) <= exp(-2 t**2)``), not a MarkLLM invention; MarkLLM's only deviation is counting
the unscorable first token. evalrun reports it but tests with the exact binomial above, which
the Hoeffding bound only approximates from above. ``markllm_is_watermarked`` is
``markllm_score > z_threshold``.
"""

from __future__ import annotations

import hashlib
import math
import random
import threading
from typing import Any, Sequence

import numpy as np

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, check_keys, spec_float, spec_int
from evalrun._util.threads import map_blocks
from evalrun.kernels import fisher_yates, vocab_rows
from evalrun.kernels.backend import NUMPY
from evalrun.kernels.keyed_hash import code, feistel_rank, pair, tag
from evalrun.kernels.token_stats import first_occurrence
from evalrun.watermark.base import (
    BatchedScheme,
    Detection,
    SchemeProcessor,
    finite_param,
    token_id_arrays,
)
from evalrun.watermark.engine import nulls
from evalrun.watermark.engine.detection import _Layout as Layout
from evalrun.watermark.engine.markllm_compat import MarkLLMKeyed, compat_mode
from evalrun.watermark.engine.randomness import derive_key

WHAT = "--watermark"
NAME = "dipmark"
ALLOWED_KEYS = frozenset({"gamma", "alpha", "prefix_length", "z_threshold",
                          "ignore_history_generation", "ignore_history_detection", "compat"})
_NATIVE_TAG = b"evalrun:dipmark:v1\0"
_SEED_MOD = 2**32 - 1
#: domain tag of this scheme's native key word
TAG_DIPMARK = 0x4D1B_7E29_C0F5_3A87


def markllm_hash_key(key: int) -> bytes:
    """MarkLLM's 128-byte DiP hash key for its integer config ``key``."""
    return random.Random(key).getrandbits(1024).to_bytes(128, "big")


def native_hash_key(key: str) -> bytes:
    """A 32-byte secret for an evalrun string key, the suffix of :func:`context_seed`'s hash
    (never echoed): the sha256/``randperm`` keying with a string key, which other schemes
    reuse. dipmark's own native mode keys with :func:`native_key_word` instead."""
    return hashlib.sha256(_NATIVE_TAG + key.encode("utf-8")).digest()


def context_seed(context: np.ndarray, hash_key: bytes) -> int:
    """Seed of a position's permutation from its context ids (int64 little endian)."""
    code = np.ascontiguousarray(context, dtype="<i8").tobytes()
    return int.from_bytes(hashlib.sha256(code + hash_key).digest(), "big") % _SEED_MOD


def native_key_word(key: str) -> int:
    """The 64-bit key word of native mode: :func:`derive_key` tagged for this scheme."""
    return int(tag(NUMPY, NUMPY.u64([derive_key(key)]), TAG_DIPMARK)[0])


def native_seeds(key_word: int, ids: np.ndarray, local: np.ndarray, prefix_length: int) -> np.ndarray:
    """Native seed word of every position of texts laid end to end (``local``: each position's
    index in its own text): ``pair`` folded over the position's context ids newest first, from
    ``key_word``. The context is the last ``prefix_length`` ids of its own text (fewer at the
    start, all for 0), so each text gets the seeds it gets alone."""
    seeds = np.full(len(ids), key_word, dtype=np.uint64)
    depth = int(local.max()) if len(local) else 0
    if prefix_length:
        depth = min(depth, prefix_length)
    codes = code(NUMPY, ids)
    for back in range(1, depth + 1):
        at = np.flatnonzero(local >= back)
        seeds[at] = pair(NUMPY, seeds[at], codes[at - back])
    return seeds


def native_ranks(seeds: np.ndarray, tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    """Position of each token in its seed's native permutation (int64 in ``[0, V)``)."""
    return np.asarray(feistel_rank(NUMPY, seeds, tokens, vocab_size)).astype(np.int64)


def permutation(seed: int, vocab_size: int) -> Any:
    """``torch.randperm(vocab_size)`` from a generator seeded with ``seed`` (a CPU tensor)."""
    import torch

    return torch.randperm(vocab_size, generator=torch.Generator().manual_seed(seed))


def quantiles(vocab_size: int) -> np.ndarray:
    """MarkLLM's float32 quantile ``(k + 1) / V`` of every permutation position k."""
    return np.arange(1, vocab_size + 1, dtype=np.float32) / np.float32(vocab_size)


def green_probability(vocab_size: int, gamma: float) -> float:
    """Exact probability that a uniformly placed token is green: ``#{q_k >= gamma} / V``."""
    return int((quantiles(vocab_size) >= np.float32(gamma)).sum()) / vocab_size


def dip_reweight(logits: Any, perm: Any, alpha: float) -> Any:
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


class DiPmark(BatchedScheme, MarkLLMKeyed):
    """DiPmark with MarkLLM's keying (``compat=markllm``) or evalrun's keyed hash."""

    markllm_key_field = "key"

    green_list = True

    def __init__(self, *, gamma: float = 0.5, alpha: float = 0.45, prefix_length: int = 5,
                 z_threshold: float = 1.513, ignore_history_generation: bool = False,
                 ignore_history_detection: bool = False, compat: str = "none") -> None:
        compat = compat_mode(NAME, compat)
        self.gamma = float(gamma)
        self.alpha = float(alpha)
        self.prefix_length = int(prefix_length)
        self.z_threshold = float(z_threshold)
        self.ignore_history_generation = bool(ignore_history_generation)
        self.ignore_history_detection = bool(ignore_history_detection)
        self.compat = compat
        self.spec = Spec(name=NAME, params={
            "alpha": repr(self.alpha), "compat": compat, "gamma": repr(self.gamma),
            "ignore_history_detection": str(int(self.ignore_history_detection)),
            "ignore_history_generation": str(int(self.ignore_history_generation)),
            "prefix_length": str(self.prefix_length), "z_threshold": repr(self.z_threshold),
        })

    # ---- keys -----------------------------------------------------------------------------
    def hash_key(self, key: str) -> bytes:
        """compat=markllm: the secret bytes MarkLLM appends to every context before hashing (the
        native scheme keys its hash kernels with :func:`native_key_word` instead)."""
        self.check_key(key)
        if self.compat != "markllm":
            raise ValueError(f"--watermark {self.spec}: only compat=markllm hashes contexts with sha256")
        return markllm_hash_key(self.markllm_key(key))

    def _context(self, ids: np.ndarray, end: int) -> np.ndarray:
        """The context of position ``end``: the ids before it, at most ``prefix_length``."""
        start = 0 if self.prefix_length == 0 else max(0, end - self.prefix_length)
        return ids[start:end]

    # ---- detection ------------------------------------------------------------------------
    def _flags(self, ids: np.ndarray, hash_key: bytes, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """compat=markllm, per position: (first occurrence of its context, green). Position 0
        is neither."""
        n = len(ids)
        new = np.zeros(n, dtype=bool)
        green = np.zeros(n, dtype=bool)
        q = quantiles(vocab_size)
        gamma = np.float32(self.gamma)
        seen: dict[bytes, int] = {}
        for i in range(1, n):
            context = self._context(ids, i)
            code = np.ascontiguousarray(context, dtype="<i8").tobytes()
            if code not in seen:
                new[i] = True
                seen[code] = context_seed(context, hash_key)
            perm = permutation(seen[code], vocab_size).numpy()
            pos = int(np.flatnonzero(perm == ids[i])[0])
            green[i] = bool(q[pos] >= gamma)
        return new, green

    def _native_flags(self, lay: Layout, key: str, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Native :meth:`_flags` of every text of ``lay`` at once (a context's first
        occurrence is its seed word's, per text)."""
        seeds = native_seeds(native_key_word(key), lay.flat, lay.local, self.prefix_length)
        at = np.flatnonzero(lay.local >= 1)
        new = np.zeros(lay.size, dtype=bool)
        green = np.zeros(lay.size, dtype=bool)
        if len(at):
            new[at] = np.asarray(first_occurrence(NUMPY, seeds[at], lay.segment[at]), dtype=bool)
            ranks = native_ranks(seeds[at], lay.flat[at], vocab_size)
            green[at] = quantiles(vocab_size)[ranks] >= np.float32(self.gamma)
        return new, green

    def _flags_many(self, token_id_seqs: Sequence[Sequence[int]], key: str,
                    vocab_size: int) -> tuple[Layout, np.ndarray, np.ndarray]:
        """The texts laid end to end, and the (new context, green) flags of every position."""
        self.check_key(key)
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        lay = Layout(token_id_arrays(token_id_seqs, vocab_size))
        if self.compat != "markllm":
            return (lay, *self._native_flags(lay, key, vocab_size))
        hash_key = self.hash_key(key)
        pairs = [self._flags(ids, hash_key, vocab_size) for ids in lay.split(lay.flat)]
        if not pairs:
            return lay, np.zeros(0, dtype=bool), np.zeros(0, dtype=bool)
        return lay, np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs])

    def markllm_score(self, new: np.ndarray, green: np.ndarray) -> float:
        """MarkLLM's ``score`` (float32 arithmetic as in its ``score_sequence``)."""
        length = len(new)
        if self.ignore_history_detection:
            g, n = int(green.sum()), length
        else:
            dropped = int((~new[1:]).sum()) if length > 1 else 0
            g, n = int((green & new).sum()), length - dropped
        if n == 0:
            return float("nan")
        f32 = np.float32
        return float((f32(g) - f32((1 - self.gamma) * n)) / f32(math.sqrt(n)))

    def detect_batch(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                     vocab_size: int) -> list[Detection]:
        """:meth:`detect` of every text; native mode flags all texts in one vectorised pass."""
        lay, new, green = self._flags_many(token_id_arrays, key, vocab_size)
        p_green = green_probability(vocab_size, self.gamma)
        n, g = lay.totals(new.astype(np.int64)), lay.totals((new & green).astype(np.int64))
        z = nulls.z_scores(g, n, p_green)
        p = nulls.binomial_p(g, n, p_green)
        normal = nulls.normal_p(z)
        news, greens = (lay.split(new), lay.split(green)) if self.compat == "markllm" else ([], [])
        out = []
        for i, (n_i, g_i, z_i, p_i, q_i) in enumerate(zip(n.tolist(), g.tolist(), z.tolist(),
                                                          p.tolist(), normal.tolist())):
            extra: dict[str, Any] = {"green_fraction": g_i / n_i if n_i else 0.0,
                                     "green_probability": p_green, "normal_p_value": q_i}
            if self.compat == "markllm":
                score = self.markllm_score(news[i], greens[i]) if lay.lengths[i] else None
                extra["markllm_score"] = score
                extra["markllm_is_watermarked"] = bool(score is not None and score > self.z_threshold)
            out.append(Detection(num_tokens_scored=n_i, score=z_i, p_value=p_i,
                                 num_green_tokens=g_i, z_score=z_i, extra=extra))
        return out

    def prefix_batch(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                     vocab_size: int) -> list[np.ndarray]:
        """:meth:`prefix_p_values` of every text, from one pass over all of them."""
        lay, new, green = self._flags_many(token_id_arrays, key, vocab_size)
        totals = lay.int_cumsum(new.astype(np.int64))
        counts = lay.int_cumsum((new & green).astype(np.int64))
        p_green = green_probability(vocab_size, self.gamma)
        return lay.split(np.asarray(nulls.binomial_p(counts, totals, p_green), dtype=np.float64))

    # ---- generation -----------------------------------------------------------------------
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> "DiPmarkLogitsProcessor":
        if self.compat == "markllm":
            return DiPmarkLogitsProcessor(self, vocab_size, temperature, hash_key=self.hash_key(key))
        self.check_key(key)
        return DiPmarkLogitsProcessor(self, vocab_size, temperature, key_word=native_key_word(key))


class DiPmarkLogitsProcessor(SchemeProcessor):
    """Divides by the temperature (when > 0), then reweights the first ``vocab_size`` columns
    of each row with DiPmark under that row's context permutation. Keeps, per row, the
    contexts used so far (MarkLLM's generation history); one instance per generation.
    ``hash_key`` for compat=markllm's permutations, ``key_word`` for native ones."""

    scheme: DiPmark

    def __init__(self, scheme: DiPmark, vocab_size: int, temperature: float, *,
                 hash_key: bytes | None = None, key_word: int | None = None) -> None:
        super().__init__(scheme, vocab_size, temperature)
        self._hash_key = hash_key
        self._key_word = key_word
        self._history: dict[int, set[bytes]] = {}

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

    def _marked_rows(self, ids: np.ndarray, batch: int) -> tuple[list[int], list[np.ndarray]]:
        """The rows this step reweights and their contexts: all rows once the history holds
        ``prefix_length`` ids, less those whose context this generation already used (which
        are recorded as used here, unless ``ignore_history_generation``)."""
        scheme = self.scheme
        rows: list[int] = []
        contexts: list[np.ndarray] = []
        if ids.shape[-1] < scheme.prefix_length:
            return rows, contexts
        for row in range(batch):
            context = scheme._context(ids[row], ids.shape[-1])
            code = np.ascontiguousarray(context, dtype="<i8").tobytes()
            if not scheme.ignore_history_generation:
                history = self._history.setdefault(row, set())
                if code in history:
                    continue
                history.add(code)
            rows.append(row)
            contexts.append(context)
        return rows, contexts

    def _divisor(self) -> float:
        """What the kernel divides the scores by: the temperature, or 0 for none (x / 1.0
        is x, bit for bit, so temperature 1 is no division; nor is 0, greedy)."""
        return self.temperature if self.temperature > 0 and self.temperature != 1 else 0.0

    def _fast(self, raw: Any, width: int) -> bool:
        """Whether :func:`_reweighted_rows` applies: float32/float64 CPU rows, the kernel built."""
        import torch

        return (vocab_rows.compiled_available() and raw.device.type == "cpu" and raw.ndim == 2
                and raw.dtype in (torch.float32, torch.float64) and width > 0)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        raw, ids, as_numpy = self.torch_inputs(input_ids, scores)
        scheme = self.scheme
        width = min(int(raw.shape[-1]), self.vocab_size)
        rows, contexts = self._marked_rows(ids, int(raw.shape[0]))
        if self._fast(raw, width):
            out = _reweighted_rows(raw, [self._divisor()] * int(raw.shape[0]), rows,
                                   [self] * len(rows), contexts, width)
            return out.numpy() if as_numpy else out
        x = raw.to(torch.float64, copy=True)  # the caller's scores are left untouched
        if self.temperature > 0:
            x = x / self.temperature
        for row, context in zip(rows, contexts):
            perm = self._permutation(context, width).to(x.device)
            x[row, :width] = dip_reweight(x[row, :width], perm, scheme.alpha)
        out = x.to(raw.dtype)
        return out.numpy() if as_numpy else out

    @classmethod
    def call_rows(cls, processors: Sequence["DiPmarkLogitsProcessor"], contexts: Sequence[Any],
                  scores: Any) -> Any:
        """``torch.cat([p(c, scores[k:k + 1]) for k, (p, c) in ...])`` for generations of one
        row each (the hf provider's: one processor per generation), bit for bit, with the
        rows spread over torch's threads (:func:`_reweighted_rows`). Each processor keeps its
        own key, temperature and history. One call per processor where their reweighting
        differs (alpha, vocabulary, keying) or the kernel does not apply."""
        import torch

        if not processors:
            return scores.clone()
        first = processors[0]
        width = min(int(scores.shape[-1]), first.vocab_size)
        alike = all(type(p) is type(first) and p.scheme.alpha == first.scheme.alpha
                    and p.vocab_size == first.vocab_size
                    and (p._hash_key is None) == (first._hash_key is None) for p in processors)
        if not alike or not first._fast(scores, width):
            return torch.cat([p(c, scores[k:k + 1]) for k, (p, c) in enumerate(zip(processors, contexts))])
        rows: list[int] = []
        marked: list[np.ndarray] = []
        for k, (proc, context) in enumerate(zip(processors, contexts)):
            ids = np.asarray(context.detach().cpu().numpy() if hasattr(context, "detach") else context,
                             dtype=np.int64)
            _, context_of = proc._marked_rows(ids, 1)
            if context_of:  # this generation's one row is reweighted this step
                rows.append(k)
                marked.append(context_of[0])
        return _reweighted_rows(scores, [p._divisor() for p in processors], rows,
                                [processors[k] for k in rows], marked, width)


def _seeds(processors: Sequence[DiPmarkLogitsProcessor], contexts: list[np.ndarray]) -> np.ndarray:
    """The seed of every context's permutation, each keyed by its row's processor: compat,
    the 32-bit ``context_seed``; native, the ``native_seeds`` word of the position after the
    context (its ids folded newest first, from the processor's key word; contexts may differ
    in length with ``prefix_length=0``)."""
    if processors[0]._hash_key is not None:
        keys = [p._hash_key for p in processors]
        assert all(k is not None for k in keys)  # call_rows keeps the modes apart
        return np.asarray([context_seed(c, k) for k, c in zip(keys, contexts) if k is not None],
                          dtype=np.uint32)
    seeds = np.asarray([p._key_word for p in processors], dtype=np.uint64)
    lengths = np.asarray([len(c) for c in contexts], dtype=np.int64)
    depth = int(lengths.max())
    ctx = np.zeros((len(contexts), depth), dtype=np.int64)
    for i, c in enumerate(contexts):
        ctx[i, depth - len(c):] = c
    for back in range(1, depth + 1):
        seeds = np.where(lengths >= back, pair(NUMPY, seeds, code(NUMPY, ctx[:, -back])), seeds)
    return seeds


def _order(seed: np.ndarray, width: int, vocab_size: int, ranks: np.ndarray) -> tuple[np.ndarray, bool]:
    """The permutation of the first ``width`` tokens for ``seed`` (a one-element array from
    :func:`_seeds`), and whether it is given as :meth:`DiPmarkLogitsProcessor._permutation`
    gives it (the token at each rank: ``True``) or as its inverse (each token's rank:
    ``False``). Native: the Feistel ranks from the vocabulary kernel, into ``ranks`` (int64
    ``[width]``; sorted into the permutation only when ``width`` is short of the
    vocabulary); compat: ``torch.randperm`` bit for bit from the Fisher-Yates kernel
    (:func:`evalrun.kernels.fisher_yates.randperm_prefixes`) where it was built."""
    if seed.dtype == np.uint32:
        if fisher_yates.compiled_available() and 0 < width < fisher_yates.RANDPERM_SMALL_N:
            return fisher_yates.randperm_prefixes(seed, width, width)[0], True
        return permutation(int(seed[0]), width).numpy(), True
    vocab_rows.ranks(seed, width, vocab_size, out=ranks.reshape(1, -1))
    if width == vocab_size:
        return ranks, False
    return np.argsort(ranks, kind="stable"), True


def _reweighted_rows(raw: Any, divisors: Sequence[float], rows: list[int],
                     processors: Sequence[DiPmarkLogitsProcessor], contexts: list[np.ndarray],
                     width: int) -> Any:
    """The processors' result for float32 or float64 CPU scores ``raw [B, *]``: every row as
    ``raw / divisors[b]`` rounded back to the scores' dtype (no division for 0), and the
    rows ``rows`` (keyed by ``processors``, one per row, and ``contexts``) reweighted by
    :func:`dip_reweight`'s float64 arithmetic: per row, torch's own logsumexp, softmax,
    cumsum and log, and the permuting, the elementwise mapping and the rounding in the
    vocabulary kernel (``log(0) = -inf`` put in directly: zeros cost torch's log a slow
    path). One block of rows per thread torch uses, each row start to end while it sits in
    the core's cache. The bits are those of one call per row: torch cuts a long row's sum
    into as many chunks as the asking thread's OpenMP team has threads, and a pool thread
    keeps the team size torch had when it first ran torch code, so each block on a pool
    thread sets torch's current thread count there first (tests hold this, also after the
    count changed)."""
    import torch

    whole = rows == list(range(int(raw.shape[0]))) and width == int(raw.shape[-1])
    if any(divisors):
        x = raw.to(torch.float64, copy=True)
        x /= torch.tensor([d or 1.0 for d in divisors], dtype=torch.float64).reshape(-1, 1)
        out = x.to(raw.dtype)
    else:  # float64(raw) rounds back to raw exactly (signalling NaNs aside: no model makes one)
        # every value is written below when every row is reweighted over its whole width
        x, out = None, torch.empty_like(raw) if whole else raw.clone()
    if not rows:
        return out
    alpha, vocab = processors[0].scheme.alpha, processors[0].vocab_size
    seeds = _seeds(processors, contexts)
    rn, on = raw.numpy(), out.numpy()
    threads, caller = torch.get_num_threads(), threading.get_ident()

    def block(a: int, b: int) -> None:
        if threading.get_ident() != caller:
            torch.set_num_threads(threads)  # this thread's OpenMP team (see above)
        permuted = np.empty(width, dtype=np.float64)
        zero = np.empty(width, dtype=bool)
        ranks = np.empty(width, dtype=np.int64)
        for i in range(a, b):
            row = rows[i]
            lse = torch.logsumexp(raw[row, :width].to(torch.float64) if x is None else x[row, :width],
                                  dim=0)
            order, is_perm = _order(seeds[i:i + 1], width, vocab, ranks)
            # the row's float64 logits (raw / divisor, as x holds them) in permuted order
            vocab_rows.permute(rn[row, :width], order, is_perm, permuted, divisor=divisors[row])
            probs = torch.softmax(torch.from_numpy(permuted), dim=0)
            cdf = torch.cumsum(probs, dim=0)
            weights, _ = vocab_rows.dip_weights(cdf.numpy(), alpha, out=probs.numpy(), zero=zero)
            logs = torch.log(torch.from_numpy(weights), out=cdf)
            vocab_rows.dip_finish(logs.numpy(), zero, float(lse), order, is_perm, on[row, :width])

    map_blocks(block, len(rows))
    return out


def _flag(spec: Spec, key: str) -> bool:
    return bool(spec_int(spec, key, 0, what=WHAT, lo=0, hi=1))


def build(spec: Spec) -> DiPmark:
    """Validate ``dipmark:...`` and fill MarkLLM's defaults (module docstring)."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    gamma = finite_param(spec, "gamma", spec_float(spec, "gamma", 0.5, what=WHAT, lo=0.0, hi=1.0))
    if not 0.0 < gamma < 1.0:
        raise SpecError(f"{WHAT} {spec}: gamma={spec.params['gamma']} must lie strictly between 0 and 1")
    alpha = finite_param(spec, "alpha", spec_float(spec, "alpha", 0.45, what=WHAT, lo=0.0, hi=0.5))
    prefix_length = spec_int(spec, "prefix_length", 5, what=WHAT, lo=0, hi=1 << 20)
    z_threshold = finite_param(spec, "z_threshold", spec_float(spec, "z_threshold", 1.513, what=WHAT))
    compat = compat_mode(spec, spec.params.get("compat"))
    return DiPmark(gamma=gamma, alpha=alpha, prefix_length=prefix_length, z_threshold=z_threshold,
                   ignore_history_generation=_flag(spec, "ignore_history_generation"),
                   ignore_history_detection=_flag(spec, "ignore_history_detection"),
                   compat=compat)
