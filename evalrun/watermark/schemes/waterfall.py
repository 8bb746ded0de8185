"""Waterfall (Lau et al., 2024; the watermark WaterDrum verifies):
``waterfall:k_p=1,kappa=2``, with the owner's integer id as the key (``--key 7``).

Compatible with the reference code (github.com/aoi3142/Waterfall, PyPI ``waterfall`` 0.3.4) on
the same token ids. What that code does, and what is carried over here:

* Permutation (``permute.Permute.get_permutation``): for the owner ``id`` and the ``n_gram - 1``
  tokens before a position, ``numpy.random.RandomState((id, *previous)).permutation(N)``: the
  legacy Mersenne Twister seeded with the *tuple* (``init_by_array``, no hashing). If one of
  the previous tokens is ``>= N`` the identity is used. ``id`` must lie in ``[0, 2**32)``
  (RandomState rejects anything else), so that is the accepted key range.
* Perturbation (``WatermarkingFnFourier``): ``phi(n) = kappa * cos(2 pi k_p n / N)`` for
  ``k_p <= max_freq``, else ``kappa * sin(2 pi (k_p - max_freq) n / N)``, with
  ``max_freq = N // 2 - 1`` for even N and ``N // 2`` for odd N, so ``1 <= k_p <= 2 max_freq``
  (the DC and, for even N, the Nyquist frequency are never used). Note the sine *frequency* is
  ``k_p - max_freq``, not ``k_p``.
* Generation (``WatermarkerBase.PerturbationProcessor``): token t's logit gets
  ``phi[perm[t]]``, i.e. ``scores[:, :N] += phi[perm]`` added to the *logits* (cast to the
  scores' dtype) after the temperature (``Watermarker.generate`` puts the
  ``TemperatureLogitsWarper`` first) -- kappa is not divided by the temperature. The first
  ``n_gram - 1`` generated tokens are not perturbed: the processor records the length of
  ``input_ids`` at its first call and waits for ``n_gram - 1`` generated tokens, so the
  previous tokens are always generated ones, never the prompt's. Columns ``>= N`` are left
  alone. ``kappa = 0`` leaves the scores unchanged.
* Verification (``Watermarker.verify`` -> ``get_cumulative_token_count`` -> ``q``): for every
  position ``j >= n_gram - 1`` of the text (tokenized without special tokens), the index of
  token ``t = tokens[j]`` is ``perm[t]`` under the permutation of its previous tokens (no
  inverse permutation is involved: generation raised ``phi[perm[t]]``); scanning stops at the
  first ``t >= N`` (``break``, the rest of the text is ignored); repeated n-grams are all
  counted (no deduplication). The indices are counted into N bins, divided by their total
  (zero total -> 0), and ``scipy.fft.rfft`` is taken; without the DC (and Nyquist) term the
  real parts and the *negated* imaginary parts are concatenated, and component ``k_p`` is the
  q-score. That equals ``mean(cos(2 pi k_p idx / N))`` (``mean(sin(...))`` for the sine half),
  i.e. ``mean(phi[idx]) / kappa``: this module computes it directly (float64; the reference
  rounds it to float32 through ``complex64``, so values agree to ~1e-7).
* ``N`` is the tokenizer's ``vocab_size`` in the reference (the base vocabulary without added
  tokens), which can be smaller than a model's logit width; the spec key ``vocab`` sets it
  (default: the vocabulary size evalrun passes, the logit width or ``--vocab-size``).
* For N <= 255 the reference's generation indexes its torch ``phi`` with a ``uint8``
  permutation, which torch reads as a boolean mask (an error or a wrong perturbation); this
  module indexes by position, as it does for every larger N. Its verification is unaffected.
* Defaults: ``kappa = 2`` (``watermark_texts`` and the ``waterfall`` command; the
  ``Watermarker`` class alone defaults to 6), ``k_p = 1``, ``n_gram = 2``. ``n_gram`` may be
  2..8 as in the reference; its ``n_gram = 1`` is not accepted (its processor then reads the
  whole history as context while its verifier reads none).

p-value (the reference has none). For a text fixed independently of the key, a wrong owner id
gives fresh random permutations, so each scored index is uniform on ``{0..N-1}``. With
``f = phi / kappa`` this gives ``E f = 0`` and ``E f^2 = 1/2`` exactly for every allowed
``k_p`` (``2 freq`` is never a multiple of N). Positions sharing a context share its
permutation: a repeated (context, token) pair repeats the same index, and distinct tokens in
one context draw indices without replacement (covariance ``-1/(2(N-1))``). So the sum
``S = sum f(idx)`` has mean 0 (plus the fixed values of identity-permutation positions) and

    Var S = sum_c [ 1/2 sum_t m_ct^2 - (M_c^2 - sum_t m_ct^2) / (2 (N - 1)) ]

(``m_ct`` occurrences of token t after context c, ``M_c = sum_t m_ct``). The p-value is the
normal approximation ``P[N(0,1) >= z]``, ``z = (S - E S) / sqrt(Var S)``. ``f`` is bounded and
symmetric with negative excess kurtosis (-3/2 for i.i.d. terms), so the skewness term of the
Edgeworth expansion vanishes and the normal tail is *conservative* (too large) beyond
``z ~ sqrt(3)``. Measured against 2e6 simulated null texts per length (i.i.d. uniform indices,
k_p = 1, N = 8192), the true probability of a nominal p <= 0.05 / 0.01 / 0.001 is
0.0506 / 0.0080 / 0.000014 at n = 5 scored tokens, 0.0505 / 0.0090 / 0.00055 at n = 10,
0.0500 / 0.0094 / 0.00078 at n = 20, 0.0500 / 0.0099 / 0.00091 at n = 50 and
0.0499 / 0.0097 / 0.0010 at n = 100: conservative at 0.01 and below, at most ~1% (relative)
liberal at 0.05, and a few percent liberal nearer the centre (0.206 at nominal 0.2, n = 5).
``tests/watermark/schemes/test_waterfall.py`` re-checks this and the variance formula (with repeated
pairs, over thousands of wrong owner ids).

Permutations are cached per ``(id, context)`` in the process-wide seed-table cache
(:mod:`evalrun.watermark.engine.seed_tables`, bounded by ``EVALRUN_SEED_TABLE_MB``), stored in the
smallest unsigned dtype that holds N (as the reference does); generation caches the
perturbation rows ``phi[perm]`` in the scores' dtype instead. Detection finds the distinct
contexts of a text once, gathers every scored token's index with one array lookup per
distinct context, and scores every prefix with cumulative sums. :func:`verify_owners` scores
many owners (and many texts) in that one pass.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from typing import Any, Sequence

import numpy as np

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, check_keys, spec_float, spec_int
from evalrun._util.threads import map_rows
from evalrun.kernels import vocab_rows
from evalrun.watermark.base import Detection, WatermarkScheme, check_temperature, finite_param, token_id_array
from evalrun.watermark.engine import nulls
from evalrun.watermark.engine.processing import host_view
from evalrun.watermark.engine.seed_tables import seed_tables

WHAT = "--watermark"
ALLOWED_KEYS = frozenset({"k_p", "kappa", "n_gram", "vocab"})
#: ``watermark_texts(kappa=2.0)`` and ``waterfall --kappa`` (default 2.0) in the reference
DEFAULT_KAPPA = 2.0
DEFAULT_K_P = 1
DEFAULT_N_GRAM = 2
MAX_N_GRAM = 8
#: ``RandomState((id, ...))`` accepts 32-bit unsigned words only
MAX_OWNER_ID = 2**32 - 1
_INT_RE = re.compile(r"\+?[0-9]+")


# ------------------------------------------------------------------------------------------
# Keys, perturbation functions, permutations
# ------------------------------------------------------------------------------------------
def parse_owner_id(key: str | int | None) -> int:
    """The owner's id from the secret ``key`` (a decimal integer in ``[0, 2**32)``); the
    :class:`SpecError` names ``--key`` and never contains the key."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        value = int(key)
    else:
        text = key.strip() if isinstance(key, str) else ""
        if not text:
            raise SpecError("--key: the Waterfall key is the owner's id, a non-negative integer; "
                            "none was given")
        if not _INT_RE.fullmatch(text):
            raise SpecError("--key: the Waterfall key must be the owner's id, a non-negative "
                            f"decimal integer; got a string of {len(text)} characters")
        value = int(text)
    if not 0 <= value <= MAX_OWNER_ID:
        raise SpecError(f"--key: the Waterfall owner id must lie in [0, {MAX_OWNER_ID}] "
                        "(numpy's RandomState seeds with 32-bit words)")
    return value


def max_freq(n: int) -> int:
    """Highest frequency of the Fourier family over ``n`` bins (DC and Nyquist excluded)."""
    return n // 2 - 1 if n % 2 == 0 else n // 2


def check_k_p(k_p: int, n: int) -> None:
    """ValueError unless ``1 <= k_p <= 2 * max_freq(n)`` (the reference's assertion)."""
    top = 2 * max_freq(n)
    if not 1 <= k_p <= top:
        raise ValueError(f"waterfall: k_p={k_p} needs 1 <= k_p <= {top} for a vocabulary of {n}"
                         " tokens")


@functools.lru_cache(maxsize=32)
def unit_phi(n: int, k_p: int) -> np.ndarray:
    """``phi / kappa`` over ``n`` bins, computed with the reference's operations (float64,
    read-only): ``cos(arange(n) / n * 2 pi * k_p)``, or ``sin`` at ``k_p - max_freq``."""
    check_k_p(k_p, n)
    top = max_freq(n)
    if k_p <= top:
        out = np.cos(np.arange(n) / n * 2 * np.pi * k_p)
    else:
        out = np.sin(np.arange(n) / n * 2 * np.pi * (k_p - top))
    out.setflags(write=False)
    return out


def perturbation(n: int, k_p: int, kappa: float) -> np.ndarray:
    """The reference's ``phi`` (float64): :func:`unit_phi` times ``kappa``."""
    out = unit_phi(n, k_p).copy()
    out *= kappa
    return out


def index_dtype(n: int) -> np.dtype:
    """``numpy.min_scalar_type(n)``: the reference stores permutations in it."""
    return np.min_scalar_type(n)


_LOCAL = threading.local()


def permutation(owner: int, context: Sequence[int], n: int) -> np.ndarray:
    """``RandomState((owner, *context)).permutation(n)`` in :func:`index_dtype`, identity when
    a context token is ``>= n``. One RandomState per thread is reseeded instead of built anew
    (construction costs about as much as a third of a 50k-token shuffle)."""
    ctx = [int(c) for c in context]
    if any(c >= n for c in ctx):
        return np.arange(n, dtype=index_dtype(n))
    if any(c < 0 for c in ctx):
        raise ValueError("waterfall: token ids must be non-negative")
    rs = getattr(_LOCAL, "rs", None)
    if rs is None:
        rs = _LOCAL.rs = np.random.RandomState()
    rs.seed((owner, *ctx))
    return rs.permutation(n).astype(index_dtype(n), copy=False)


def legacy_state(owner: int, context: Sequence[int]) -> tuple[Any, ...]:
    """The state ``RandomState((owner, *context))`` starts from (its ``get_state()``), for
    tokens below the permutation's size (:func:`permutation`'s identity case aside)."""
    ctx = [int(c) for c in context]
    if any(c < 0 for c in ctx):
        raise ValueError("waterfall: token ids must be non-negative")
    return vocab_rows.legacy_state((owner, *ctx))


def _context_seed(context: Sequence[int], n: int) -> int:
    """One integer per context (all tokens < n): its digits in base n."""
    seed = 0
    for c in context:
        seed = seed * n + int(c)
    return seed


def permutations(owner: int, contexts: np.ndarray, n: int) -> list[np.ndarray]:
    """The permutation of every row of ``contexts [D, w]`` (tokens < n), from the
    process-wide seed-table cache (built for the missing ones)."""
    rows = [tuple(int(c) for c in row) for row in np.asarray(contexts).reshape(len(contexts), -1)]
    width = len(rows[0]) if rows else 0
    by_seed = {_context_seed(r, n): r for r in rows}
    space = ("waterfall-perm", owner, n, width)

    def build(missing: list[int]) -> list[np.ndarray]:
        out = []
        for seed in missing:
            perm = permutation(owner, by_seed[seed], n)
            perm.setflags(write=False)
            out.append(perm)
        return out

    return seed_tables().rows(space, [_context_seed(r, n) for r in rows], build)


# ------------------------------------------------------------------------------------------
# Verification
# ------------------------------------------------------------------------------------------
def _occurrence(labels: np.ndarray) -> np.ndarray:
    """1-based occurrence number of each entry among the equal entries before it."""
    if labels.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(labels, kind="stable")
    s = labels[order]
    pos = np.arange(len(s))
    start = np.ones(len(s), dtype=bool)
    start[1:] = s[1:] != s[:-1]
    first = np.maximum.accumulate(np.where(start, pos, 0))
    out = np.empty(len(s), dtype=np.int64)
    out[order] = pos - first + 1
    return out


class _Scored:
    """The scored positions of one or more texts: previous tokens, token, text label, and the
    grouping of the random-permutation positions by distinct context (computed once, reused
    for every owner)."""

    def __init__(self, texts: list[np.ndarray], n: int, n_gram: int) -> None:
        w = n_gram - 1
        ctxs, toks, labels, ignored = [], [], [], []
        for i, ids in enumerate(texts):
            if len(ids) <= w:
                ignored.append(0)
                continue
            tok = ids[w:]
            over = np.flatnonzero(tok >= n)
            stop = int(over[0]) if over.size else len(tok)  # the reference's ``break``
            ignored.append(len(tok) - stop)
            ctx = np.lib.stride_tricks.sliding_window_view(ids, w)[: len(ids) - w][:stop]
            ctxs.append(ctx)
            toks.append(tok[:stop])
            labels.append(np.full(stop, i, dtype=np.int64))
        self.n, self.w = n, w
        self.ctx = np.concatenate(ctxs) if ctxs else np.zeros((0, w), dtype=np.int64)
        self.tok = np.concatenate(toks) if toks else np.zeros(0, dtype=np.int64)
        self.text = np.concatenate(labels) if labels else np.zeros(0, dtype=np.int64)
        self.ignored = ignored
        self.random = (self.ctx < n).all(axis=1)
        rnd = np.flatnonzero(self.random)
        self.rnd = rnd
        if w == 1:
            keys = self.ctx[rnd, 0]
            self.contexts, inv = np.unique(keys, return_inverse=True)
            self.contexts = self.contexts[:, None]
        elif len(rnd):
            self.contexts, inv = np.unique(self.ctx[rnd], axis=0, return_inverse=True)
        else:
            self.contexts, inv = np.zeros((0, w), dtype=np.int64), np.zeros(0, dtype=np.int64)
        inv = np.asarray(inv).reshape(-1)
        self.context_label = inv
        order = np.argsort(inv, kind="stable")
        bounds = np.searchsorted(inv[order], np.arange(len(self.contexts) + 1))
        self.groups = [rnd[order[bounds[g]:bounds[g + 1]]] for g in range(len(self.contexts))]

    def __len__(self) -> int:
        return len(self.tok)

    def indices(self, owner: int) -> np.ndarray:
        """Index of every scored token under ``owner``'s permutations (int64)."""
        idx = self.tok.copy()  # identity where a previous token is >= N
        if len(self.contexts):
            for sel, perm in zip(self.groups, permutations(owner, self.contexts, self.n)):
                idx[sel] = perm[self.tok[sel]]
        return idx

    def variance_terms(self) -> tuple[np.ndarray, np.ndarray]:
        """Increments of ``sum_t m_ct^2`` and ``sum_c M_c^2`` at every scored position (0 at
        identity-permutation positions): an entry's k-th occurrence adds ``2k - 1``."""
        a = np.zeros(len(self), dtype=np.int64)
        b = np.zeros(len(self), dtype=np.int64)
        rnd = self.rnd
        if len(rnd):
            ctx_label = self.context_label
            if self.text.size and self.text.max() > 0:  # occurrences count within each text
                ctx_label = ctx_label + self.text[rnd] * len(self.contexts)
            pair = ctx_label * self.n + self.tok[rnd]
            a[rnd] = 2 * _occurrence(pair) - 1
            b[rnd] = 2 * _occurrence(ctx_label) - 1
        return a, b


def _null(values: np.ndarray, random: np.ndarray, a: np.ndarray, b: np.ndarray,
          n: int) -> tuple[np.ndarray, np.ndarray]:
    """(z, p) of every prefix from per-position values and variance increments."""
    s = np.cumsum(values)
    mean = np.cumsum(np.where(random, 0.0, values))
    ca, cb = np.cumsum(a), np.cumsum(b)
    var = 0.5 * ca - (cb - ca) / (2.0 * (n - 1))
    ok = var > 0
    z = np.where(ok, (s - mean) / np.sqrt(np.where(ok, var, 1.0)), 0.0)
    p = np.where(ok, nulls.normal_p(z), 1.0)
    return z, p


def _texts(token_ids: Any, vocab_size: int) -> tuple[list[np.ndarray], bool]:
    """(texts, several): one sequence, or a sequence of sequences (or a 2-D array)."""
    if getattr(token_ids, "ndim", None) == 2:
        return [token_id_array(row, vocab_size) for row in token_ids], True
    seq = token_ids if getattr(token_ids, "ndim", None) == 1 else list(token_ids)
    if len(seq) and all(isinstance(x, (list, tuple)) or getattr(x, "ndim", 0) == 1 for x in seq):
        return [token_id_array(x, vocab_size) for x in seq], True
    return [token_id_array(seq, vocab_size)], False


# ------------------------------------------------------------------------------------------
# The scheme
# ------------------------------------------------------------------------------------------
class Waterfall(WatermarkScheme):
    """Waterfall's keyed Fourier perturbation (see the module docstring)."""

    green_list = False

    def __init__(self, *, k_p: int = DEFAULT_K_P, kappa: float = DEFAULT_KAPPA,
                 n_gram: int = DEFAULT_N_GRAM, vocab: int | None = None) -> None:
        if k_p < 1:
            raise SpecError(f"{WHAT} waterfall: k_p={k_p} must be >= 1")
        if not (math.isfinite(kappa) and kappa >= 0):
            raise SpecError(f"{WHAT} waterfall: kappa={kappa} must be finite and >= 0")
        if not 2 <= n_gram <= MAX_N_GRAM:
            raise SpecError(f"{WHAT} waterfall: n_gram={n_gram} out of range [2, {MAX_N_GRAM}]")
        if vocab is not None and vocab < 3:
            raise SpecError(f"{WHAT} waterfall: vocab={vocab} must be >= 3")
        self.k_p = int(k_p)
        self.kappa = float(kappa)
        self.n_gram = int(n_gram)
        self.vocab = None if vocab is None else int(vocab)
        params = {"k_p": str(self.k_p), "kappa": repr(self.kappa), "n_gram": str(self.n_gram)}
        if self.vocab is not None:
            params["vocab"] = str(self.vocab)
        self.spec = Spec(name="waterfall", params=params)

    @property
    def shared_context(self) -> int:
        """The processor reads the previous ``n_gram - 1`` tokens and keeps no state."""
        return self.n_gram - 1

    def __repr__(self) -> str:
        return f"Waterfall({self.spec})"

    def check_key(self, key: str) -> None:
        """The owner's id: a decimal integer in ``[0, 2**32)``."""
        parse_owner_id(key)

    def bins(self, vocab_size: int) -> int:
        """N: the ``vocab`` spec key, else ``vocab_size``; ValueError when it does not fit."""
        n = int(vocab_size) if self.vocab is None else self.vocab
        if n > vocab_size:
            raise ValueError(f"waterfall: vocab={n} exceeds the vocabulary size {vocab_size}")
        check_k_p(self.k_p, n)
        return n

    # -------------------------------------------------------------- verification
    def _scores(self, token_ids: Any, owner_ids: Sequence[int], vocab_size: int,
                ) -> tuple[_Scored, list[np.ndarray], int, bool]:
        n = self.bins(vocab_size)
        texts, several = _texts(token_ids, vocab_size)
        scored = _Scored(texts, n, self.n_gram)
        table = unit_phi(n, self.k_p)
        values = [table[scored.indices(owner)] for owner in owner_ids]
        return scored, values, len(texts), several

    def verify_owners(self, token_ids: Any, owner_ids: Sequence[int | str], vocab_size: int, *,
                      p_values: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """q-scores of ``token_ids`` for each owner id: shape ``[K]`` for one sequence,
        ``[T, K]`` for a sequence of ``T`` sequences (the reference's ``verify(texts,
        id=[...])[:, :, 0]``). The scored positions and distinct contexts are found once;
        each owner then costs one permutation per distinct context (cached) and one gather.
        With ``p_values`` also the p-values, same shape."""
        owners = [parse_owner_id(o) for o in owner_ids]
        scored, values, n_texts, several = self._scores(token_ids, owners, vocab_size)
        text = scored.text
        counts = np.bincount(text, minlength=n_texts).astype(np.float64)
        scores = np.zeros((n_texts, len(owners)))
        pvals = np.ones((n_texts, len(owners)))
        if p_values:
            a, b = scored.variance_terms()
            ca = np.bincount(text, weights=a, minlength=n_texts)
            cb = np.bincount(text, weights=b, minlength=n_texts)
            var = 0.5 * ca - (cb - ca) / (2.0 * (scored.n - 1))
            ok = var > 0
        for k, vals in enumerate(values):
            sums = np.bincount(text, weights=vals, minlength=n_texts)
            scores[:, k] = sums / np.where(counts > 0, counts, 1.0)
            if p_values:
                fixed = np.bincount(text, weights=np.where(scored.random, 0.0, vals),
                                    minlength=n_texts)
                z = (sums - fixed) / np.sqrt(np.where(ok, var, 1.0))
                pvals[:, k] = np.where(ok, nulls.normal_p(z), 1.0)
        if not several:
            scores, pvals = scores[0], pvals[0]
        return (scores, pvals) if p_values else scores

    def _prefixes(self, token_ids: Any, key: str, vocab_size: int) -> dict[str, Any]:
        owner = parse_owner_id(key)
        texts = [token_id_array(token_ids, vocab_size)]
        n = self.bins(vocab_size)
        scored = _Scored(texts, n, self.n_gram)
        vals = unit_phi(n, self.k_p)[scored.indices(owner)]
        a, b = scored.variance_terms()
        z, p = _null(vals, scored.random, a, b, n)  # type: ignore[arg-type]  # all(axis=1) of a 2-D array is an array
        m = np.arange(1, len(vals) + 1, dtype=np.float64)
        return {"score": np.cumsum(vals) / m, "z": z, "p": p, "n": n, "scored": scored}

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int) -> Detection:
        res = self._prefixes(token_ids, key, vocab_size)
        scored: _Scored = res["scored"]
        extra: dict[str, Any] = {"null": "normal",
                                 "num_tokens_ignored": int(scored.ignored[0])}
        if len(scored) == 0:
            return Detection(num_tokens_scored=0, score=0.0, p_value=1.0, z_score=0.0,
                             extra=extra)
        return Detection(num_tokens_scored=len(scored), score=float(res["score"][-1]),
                         p_value=float(res["p"][-1]), z_score=float(res["z"][-1]), extra=extra)

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        """p-value after each token of ``token_ids`` (1.0 where nothing is scored yet; the
        first ``n_gram - 1`` tokens only give context, tokens after the reference's stop
        keep the last value)."""
        ids = token_id_array(token_ids, vocab_size)
        res = self._prefixes(ids, key, vocab_size)
        out = np.ones(len(ids), dtype=np.float64)
        w, m = self.n_gram - 1, len(res["p"])
        out[w:w + m] = res["p"]
        if m and w + m < len(ids):
            out[w + m:] = res["p"][-1]
        return out

    # -------------------------------------------------------------- generation
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> "WaterfallLogitsProcessor":
        return WaterfallLogitsProcessor(self, parse_owner_id(key), vocab_size, temperature)


class WaterfallLogitsProcessor:
    """Batched ``PerturbationProcessor``: ``(input_ids [B,T], scores [B,W]) -> scores``.

    The scores are divided by the temperature (when > 0 and not 1), then every row's
    ``phi[perm]`` of its previous ``n_gram - 1`` tokens is added to its first N columns in
    the scores' dtype, as the reference does after its temperature warper. One instance
    serves one generation: its first call records the length of ``input_ids``, and rows are
    perturbed from ``n_gram - 1`` generated tokens on (a call with a shorter ``input_ids``
    starts a new generation). ``seed`` is not used. The rows ``phi[perm]`` are kept in the
    process-wide seed-table cache per (owner, previous tokens, width, dtype, device)."""

    def __init__(self, scheme: Waterfall, owner: int, vocab_size: int, temperature: float) -> None:
        check_temperature(temperature)
        self.scheme = scheme
        self._owner = owner
        self.vocab_size = int(vocab_size)
        self.n = scheme.bins(vocab_size)
        self.temperature = float(temperature)
        self.phi = perturbation(self.n, scheme.k_p, scheme.kappa)
        self._start: int | None = None

    def __repr__(self) -> str:
        return f"WaterfallLogitsProcessor({self.scheme.spec}, N={self.n})"

    def _rows(self, contexts: list[tuple[int, ...]], scores: Any) -> list[Any]:
        host = host_view(scores[:0])
        space = ("waterfall-row", self.scheme.spec.canonical(), self._owner, self.n,
                 str(scores.dtype), str(getattr(scores, "device", "")), host is not None)
        n = self.n
        # a context with a token >= N is the identity: one shared seed (n ** w is unused)
        seeds = [n ** len(c) if any(t >= n for t in c) else _context_seed(c, n)
                 for c in contexts]
        by_seed = dict(zip(seeds, contexts))

        fast = host is not None and host.dtype == np.float32 and vocab_rows.compiled_available()

        def shuffled(s: int) -> np.ndarray:
            # phi[permutation] in float32 straight from the generator's state: the kernel
            # seeds and shuffles as numpy's RandomState does (the same row)
            return vocab_rows.legacy_permuted(legacy_state(self._owner, by_seed[s]), self.phi)

        def build(missing: list[int]) -> list[Any]:
            drawn = [s for s in missing if fast and s != n ** len(by_seed[s])]
            # the shuffles release the GIL: a step's rows are drawn on torch's threads at once
            rows = dict(zip(drawn, map_rows(shuffled, drawn)))
            out: list[Any] = []
            for s in missing:
                if s in rows:
                    out.append(rows[s])
                    continue
                row = self.phi[permutation(self._owner, by_seed[s], n)]
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


def verify_owners(token_ids: Any, owner_ids: Sequence[int | str], vocab_size: int, *,
                  k_p: int = DEFAULT_K_P, n_gram: int = DEFAULT_N_GRAM,
                  vocab: int | None = None) -> np.ndarray:
    """q-scores of one text (shape ``[K]``) or of several (``[T, K]``) for owners
    ``owner_ids``, in one pass: :meth:`Waterfall.verify_owners` of ``waterfall:k_p=...``."""
    return Waterfall(k_p=k_p, n_gram=n_gram, vocab=vocab).verify_owners(  # type: ignore[return-value]  # scores alone without p_values
        token_ids, owner_ids, vocab_size)


def build(spec: Spec) -> Waterfall:
    """Validate ``waterfall:k_p=...,kappa=...,n_gram=...,vocab=...`` (defaults 1, 2.0, 2,
    the vocabulary size passed at use)."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    k_p = spec_int(spec, "k_p", DEFAULT_K_P, what=WHAT, lo=1)
    kappa = finite_param(spec, "kappa", spec_float(spec, "kappa", DEFAULT_KAPPA, what=WHAT, lo=0.0))
    n_gram = spec_int(spec, "n_gram", DEFAULT_N_GRAM, what=WHAT, lo=2, hi=MAX_N_GRAM)
    vocab = spec_int(spec, "vocab", 0, what=WHAT, lo=3) if "vocab" in spec.params else None
    return Waterfall(k_p=k_p, kappa=kappa, n_gram=n_gram, vocab=vocab)
