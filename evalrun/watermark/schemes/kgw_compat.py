"""Reference-compatible KGW green lists: ``kgw:seeding=lefthash|selfhash,...``.

Reproduces, on the same token ids, the green lists, green counts and z-scores of the public
reference implementation by Kirchenbauer et al. (github.com/jwkirchenbauer/lm-watermarking,
files ``extended_watermark_processor.py`` and ``alternative_prf_schemes.py``), so results can
be cross-checked against published code. The facts carried over from those files:

* seeding (``alternative_prf_schemes.seeding_scheme_lookup``): ``lefthash`` (alias
  ``simple_1``) is the ``additive_prf`` over the last ``context`` tokens (default 1) without
  self-salting; ``selfhash`` (alias ``algorithm-3``) is the ``anchored_minhash_prf`` over a
  window of ``context`` tokens (default 4) whose last token is the candidate itself
  (self-salting). ``context`` other than the default is the reference's freeform
  ``ff-<prf>-<context>-<self_salt>-<hash_key>`` scheme.
* ``additive_prf(ids) = hash_key * sum(ids)`` (exact integer arithmetic);
  ``anchored_minhash_prf(ids) = min(hash_key * hashint(ids) * hashint(ids[-1]))`` computed in
  torch int64, so products wrap around 2**64 and negative wrapped values win the minimum;
  ``hashint(x) = fixed_table[x % 1_000_003] + 1`` with ``fixed_table`` the CPU
  ``torch.randperm(1_000_003)`` of a generator seeded with 2971215073.
* green list (``WatermarkBase._get_greenlist_ids``): a CPU ``torch.Generator`` seeded with
  ``prf % (2**64 - 1)``, ``torch.randperm(vocab_size)``, green = its first
  ``int(vocab_size * gamma)`` entries.
* generation (``WatermarkLogitsProcessor``): ``lefthash`` adds ``delta`` to the whole green
  list of the last ``context`` tokens; ``selfhash`` sorts the logits (descending), tests the
  first 41 candidates (the ``fixed_compute`` tail rule: stop after index 40) each with its own
  self-salted green list, and adds ``delta`` only to the candidates found in their own list.
* detection (``WatermarkDetector._score_sequence``): n-grams of ``context + 1 - self_salt``
  tokens over the scored text (the first ``context - self_salt`` tokens are not targets; the
  reference requires more than ``context`` tokens), repeated n-grams counted once by default
  (``ignore_repeated_ngrams=True``; ``repeats=count`` counts every n-gram),
  ``z = (green - gamma*T) / sqrt(T*gamma*(1-gamma))`` and ``p = scipy.stats.norm.sf(z)``
  (:func:`evalrun.watermark.nulls.z_scores`, :func:`~evalrun.watermark.nulls.normal_p`).

Deviations, all outside the reference's domain: a sequence too short to score gives
``num_tokens_scored=0`` and ``p_value=1`` instead of raising; a generation row whose prompt is
shorter than the context is left unbiased instead of raising; the generator is always the CPU
one (the reference uses the device of ``input_ids``). ``extra`` adds the exact binomial
p-value (green probability ``int(V*gamma)/V``) next to the reference's normal one.

Speed, with results unchanged: detection draws each distinct green list once per call. Lefthash
green lists (one per context, whatever the candidate) are kept as packed bits in the bounded
process-wide seed-table cache, so a file of many texts draws each at most once; selfhash seeds
rarely recur, so each distinct (seed, candidate) pair's membership is traced through torch's
shuffle without building the permutation
(:func:`evalrun.kernels.fisher_yates.traced_members`: at most ``int(V*gamma)`` mt19937 draws
instead of ``V`` draws and swaps, eight generators at a time in the compiled kernel). Pairs
recur (a seed hangs on the candidate and on the one window token that minimises the anchored
hash; about one n-gram in four is seeded by its candidate alone), so decided pairs are kept
across calls in a bounded memo (:mod:`evalrun.watermark.engine.membership_memo`), and one call's
texts are taken in slices of about :data:`SLICE_NGRAMS` n-grams (array passes that stay in
cache). Permutations themselves (green lists, the hashint table) come
from the compiled kernel where it was built (``kernels/fisher_yates.c``, bit for bit as
``torch.randperm``, tested against it), so detection does not import torch there; from torch
otherwise. ``benchmarks/bench_detect_tokens.py`` measures both against MarkLLM.

The watermark key is the reference's hash key (15485863 in all published runs): a decimal
integer string in the int64 range; nothing else is accepted.
"""

from __future__ import annotations

import functools
import math
import re
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, check_keys, spec_float, spec_int
from evalrun.kernels.backend import get_ops
from evalrun.kernels.fisher_yates import (
    RANDPERM_SMALL_N,
    compiled_available,
    packed_prefix_masks,
    randperm_prefixes,
    traced_members,
)
from evalrun.kernels.token_stats import first_occurrence
from evalrun.watermark.base import Detection, WatermarkScheme, check_temperature, finite_param, token_id_array
from evalrun.watermark.base import token_id_arrays as checked_arrays
from evalrun.watermark.engine import nulls
from evalrun.watermark.engine.counting import cumulative_counts
from evalrun.watermark.engine.mask_tables import add_packed, previous_tokens
from evalrun.watermark.engine.membership_memo import membership_memo
from evalrun.watermark.engine.processing import add_rows, host_view
from evalrun.watermark.engine.scores import REPEATS
from evalrun.watermark.engine.seed_tables import seed_tables

WHAT = "--watermark"
#: the reference's hash key (``seeding_scheme_lookup``: "large prime")
REFERENCE_HASH_KEY = 15485863
#: ``alternative_prf_schemes.hashint`` table: size and generator seed ("fib47 is prime")
HASHINT_TABLE_SIZE = 1_000_003
HASHINT_TABLE_SEED = 2971215073
#: selfhash generation tests logits ranks 0..40 (``tail_rule="fixed_compute"``)
SELFHASH_CANDIDATES = 41
#: ``_seed_rng``: ``prf_key % (2**64 - 1)``
SEED_MODULUS = 2**64 - 1
#: green lists drawn per call of :func:`permutation_prefixes` when filling the cache
PREFIX_BATCH = 64

SEEDINGS = ("lefthash", "selfhash")
DEFAULT_CONTEXT = {"lefthash": 1, "selfhash": 4}
PRF_NAMES = {"lefthash": "additive_prf", "selfhash": "anchored_minhash_prf"}
ALLOWED_KEYS = frozenset({"seeding", "gamma", "delta", "context", "repeats", "z_threshold"})
MAX_CONTEXT = 32
_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is installed wherever this runs in CI
        raise SpecError(
            f"{WHAT} kgw:seeding=...: reference-compatible KGW needs torch (install evalrun[hf])"
        ) from None
    return torch


def parse_hash_key(key: str | None, *, what: str = "kgw (reference-compatible)") -> int:
    """The reference's integer hash key from the secret ``key`` string (never echoed)."""
    if key is None or not isinstance(key, str) or not key.strip():
        raise SpecError(
            f"{what}: a watermark key is required: the reference's integer hash key, "
            f"e.g. {REFERENCE_HASH_KEY}"
        )
    text = key.strip()
    if not _INT_RE.fullmatch(text):
        raise SpecError(
            f"{what}: the watermark key must be a decimal integer (the reference's hash key, "
            f"e.g. {REFERENCE_HASH_KEY}); got a non-integer string of {len(text)} characters"
        )
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise SpecError(f"{what}: the watermark key must fit in a signed 64-bit integer")
    return value


def greenlist_size(vocab_size: int, gamma: float) -> int:
    """``int(vocab_size * gamma)``: the reference's rounding (truncation of the float product)."""
    return int(vocab_size * gamma)


def permutation_prefixes(seeds: Sequence[int], n: int, size: int) -> np.ndarray:
    """``[len(seeds), size]`` int64: the first ``size`` entries of the CPU ``torch.randperm(n)``
    of a generator seeded with each seed (torch keeps the low 32 bits). The compiled kernel
    draws them bit for bit where it was built; torch itself otherwise."""
    low = np.asarray(seeds, dtype=np.uint64).reshape(-1) & np.uint64(0xFFFFFFFF)
    if compiled_available() and n < RANDPERM_SMALL_N:
        return randperm_prefixes(low, n, size)
    torch = _torch()
    gen = torch.Generator(device="cpu")
    out = np.empty((len(low), size), dtype=np.int64)
    for row, seed in enumerate(low.tolist()):
        gen.manual_seed(seed)
        out[row] = torch.randperm(n, device="cpu", generator=gen)[:size].numpy()
    return out


def packed_green_masks(seeds: Sequence[int], n: int, size: int) -> np.ndarray:
    """``[len(seeds), ceil(n / 8)]`` uint8: ``np.packbits`` of the membership mask of each
    :func:`permutation_prefixes` row (the compiled kernel packs them itself)."""
    if compiled_available() and n < RANDPERM_SMALL_N:
        low = np.asarray(seeds, dtype=np.uint64).reshape(-1) & np.uint64(0xFFFFFFFF)
        return packed_prefix_masks(low, n, size)
    prefixes = permutation_prefixes(seeds, n, size)
    mask = np.zeros((len(prefixes), n), dtype=bool)
    np.put_along_axis(mask, prefixes, True, axis=1)
    return np.packbits(mask, axis=1)


@functools.lru_cache(maxsize=1)
def _hashint_table() -> np.ndarray:
    """``fixed_table + 1`` of ``alternative_prf_schemes`` (public constant, not secret)."""
    table = permutation_prefixes([HASHINT_TABLE_SEED], HASHINT_TABLE_SIZE, HASHINT_TABLE_SIZE)[0]
    table += 1
    table.setflags(write=False)
    return table


def hashint(ids: np.ndarray | Sequence[int]) -> np.ndarray:
    """The reference's ``hashint``: a fixed permutation of residues mod 1_000_003, plus one."""
    arr = np.asarray(ids, dtype=np.int64)
    if arr.size and 0 <= arr.min() and arr.max() < HASHINT_TABLE_SIZE:
        return _hashint_table()[arr]  # token ids: the remainder is the id itself
    return _hashint_table()[np.remainder(arr, HASHINT_TABLE_SIZE)]


def prf_seeds(windows: np.ndarray, seeding: str, hash_key: int) -> list[int]:
    """Generator seed (``prf % (2**64 - 1)``) for each row of ``windows`` [N, context].

    Each row holds the tokens the PRF sees, oldest first; for ``selfhash`` the last one is the
    candidate (self-salting) and also the anchor.
    """
    return prf_seed_array(windows, seeding, hash_key).tolist()


def prf_seed_array(windows: np.ndarray, seeding: str, hash_key: int) -> np.ndarray:
    """:func:`prf_seeds` as a uint64 array (every seed is below ``2**64 - 1``): the batched
    path keeps a million selfhash seeds out of Python integers."""
    w = np.asarray(windows, dtype=np.int64)
    if w.ndim != 2:
        raise ValueError("windows must be a 2-D array [N, context]")
    if seeding == "lefthash":
        # additive_prf: salt_key * input_ids.sum().item() -- an int64 sum, then a Python product
        sums = w.sum(axis=1).tolist()
        return np.fromiter(((hash_key * s) % SEED_MODULUS for s in sums), dtype=np.uint64,
                           count=len(sums))
    if seeding == "selfhash":
        # anchored_minhash_prf: (salt_key * hashint(ids) * hashint(ids[-1])).min() in int64;
        # numpy array arithmetic wraps modulo 2**64 exactly like torch's int64 tensors.
        # (int64 products commute modulo 2**64, so salting the anchor first changes nothing;
        # a column at a time beats a reduction along rows of four)
        h = hashint(w)
        anchor = np.int64(hash_key) * h[:, -1]
        raw = h[:, 0] * anchor
        for col in range(1, w.shape[1]):
            np.minimum(raw, h[:, col] * anchor, out=raw)
        # r mod (2**64 - 1) of an int64 r: r itself when r >= 0, else r + 2**64 - 1, which is
        # r's two's-complement bit pattern minus one
        return raw.view(np.uint64) - (raw < 0)
    raise ValueError(f"unknown seeding {seeding!r}")


class GreenLists:
    """Green lists of one (vocab size, gamma) by generator seed: CPU ``torch.randperm``
    (:func:`permutation_prefixes`).

    Keeps a bounded LRU of boolean masks; it is owned by one call or one processor (which
    holds the key anyway), never by a scheme object.
    """

    def __init__(self, vocab_size: int, gamma: float, capacity: int = 256) -> None:
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        self.vocab_size = int(vocab_size)
        self.size = greenlist_size(self.vocab_size, gamma)
        self.capacity = capacity
        self._masks: OrderedDict[int, np.ndarray] = OrderedDict()

    def ids(self, seed: int) -> np.ndarray:
        """Green token ids in the reference's order (the permutation's first entries)."""
        return permutation_prefixes([seed], self.vocab_size, self.size)[0]

    def mask(self, seed: int) -> np.ndarray:
        """Boolean mask over the vocabulary (read-only, cached)."""
        found = self._masks.get(seed)
        if found is not None:
            self._masks.move_to_end(seed)
            return found
        out = np.zeros(self.vocab_size, dtype=bool)
        out[self.ids(seed)] = True
        out.setflags(write=False)
        self._masks[seed] = out
        if len(self._masks) > self.capacity:
            self._masks.popitem(last=False)
        return out

    def packed_rows(self, seeds: Sequence[int]) -> list[np.ndarray]:
        """Packed green masks (``np.packbits``, ``ceil(V / 8)`` bytes) of 32-bit ``seeds``,
        kept in the process-wide seed-table cache (bounded in bytes, least recently used
        first out), so a green list is drawn once per process however many texts ask."""
        space = ("kgw-compat-packed", self.vocab_size, self.size)

        def build(missing: list[int]) -> list[np.ndarray]:
            out: list[np.ndarray] = []
            for lo in range(0, len(missing), PREFIX_BATCH):  # bounded temporaries
                for row in packed_green_masks(missing[lo: lo + PREFIX_BATCH],
                                              self.vocab_size, self.size):
                    row = row.copy()  # evicted alone: no view keeps the batch alive
                    row.setflags(write=False)
                    out.append(row)
            return out

        return seed_tables().rows(space, seeds, build)

    def membership(self, seeds: Sequence[int] | np.ndarray, targets: np.ndarray, *,
                   cache: bool = False, seed_of: np.ndarray | None = None) -> np.ndarray:
        """``targets[i] in greenlist(seeds[i])`` for all i (``seeds[seed_of[i]]`` when
        ``seed_of`` is given), each distinct green list drawn once and each distinct pair
        decided once.

        Generator seeds that agree in their low 32 bits draw the same permutation (torch's
        mt19937 is seeded with ``seed & 0xffffffff``), so pairs are grouped by those bits.
        A green list asked about for few targets is not built:
        :func:`~evalrun.kernels.fisher_yates.traced_members` replays the first ``size``
        steps of torch's shuffle from the raw mt19937 draws and follows each target; one
        asked about for many targets (or already held) is built whole
        (:func:`permutation_prefixes`), as the reference does.

        With ``cache`` every green list is built and kept (:meth:`packed_rows`): for seeds
        that recur across calls (lefthash contexts: at most ``V`` per context token) a bit
        lookup then replaces any drawing."""
        targets = np.asarray(targets, dtype=np.int64)
        flags = np.zeros(len(targets), dtype=bool)
        if len(targets) == 0 or self.size == 0:
            return flags
        # seeds are < 2**64 - 1, so they fit uint64 exactly
        low = np.asarray(seeds, dtype=np.uint64) & np.uint64(0xFFFFFFFF)
        valid = (targets >= 0) & (targets < self.vocab_size)
        if cache:
            uniq, inverse = np.unique(low, return_inverse=True)
            inverse = inverse.reshape(-1)
            if seed_of is not None:
                inverse = inverse[seed_of]
            order = np.argsort(inverse)  # pairs grouped by green list, in any order inside
            bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
            # targets grouped by seed; one gather of packed bytes per distinct seed
            t = np.where(valid, targets, 0)[order]
            byte = np.empty(len(t), dtype=np.uint8)
            for i, row in enumerate(self.packed_rows(uniq.tolist())):
                lo, hi = bounds[i], bounds[i + 1]
                byte[lo:hi] = row[t[lo:hi] >> 3]
            flags[order] = ((byte >> (7 - (t & 7)).astype(np.uint8)) & 1).astype(bool)
            flags &= valid
            return flags
        # each distinct (green list, target) pair is decided once: selfhash seeds hang on the
        # candidate and the one window token that minimises the hash, so natural text repeats
        # pairs far more often than whole n-grams (a million Austen tokens: 844k distinct
        # 4-grams, 182k distinct pairs), and pairs decided by earlier calls are remembered.
        asked_rows = np.flatnonzero(valid)
        if len(asked_rows) == 0:
            return flags
        pair_low = low if seed_of is None else low[seed_of]
        distinct, back = np.unique(pair_low[asked_rows] * np.uint64(self.vocab_size)
                                   + targets[asked_rows].astype(np.uint64), return_inverse=True)
        found = membership_memo(self.vocab_size, self.size).decide(distinct, self._decide)
        flags[asked_rows] = found[back.reshape(-1)]
        return flags

    def _decide(self, keys: np.ndarray) -> np.ndarray:
        """Membership of the sorted, distinct pair keys ``(seed & 0xffffffff) * V + target``.
        Sorted green list major, the keys come grouped by green list: those asked about for
        many targets (or already held) are built, the others traced."""
        list_low, target = np.divmod(keys, np.uint64(self.vocab_size))
        starts = np.flatnonzero(np.r_[True, list_low[1:] != list_low[:-1]])
        uniq = list_low[starts]
        bounds = np.r_[starts, len(keys)]
        asked = np.diff(bounds)
        list_ix = np.repeat(np.arange(len(uniq)), asked)
        build = asked > TRACE_MAX_TARGETS
        if self._masks:
            build |= np.isin(uniq, np.fromiter(self._masks, dtype=np.uint64))
        if self.vocab_size >= RANDPERM_SMALL_N:
            build[:] = True
        found = np.zeros(len(keys), dtype=bool)
        for i in np.flatnonzero(build).tolist():
            lo, hi = bounds[i], bounds[i + 1]
            found[lo:hi] = self.mask(int(uniq[i]))[target[lo:hi]]
        traced = np.flatnonzero(~build[list_ix])
        found[traced] = traced_members(list_low[traced], target[traced], self.vocab_size,
                                       self.size)
        return found


#: n-grams a selfhash detection call takes at a time (whole texts): its array passes (sorts,
#: gathers) then run in cache, and pairs recurring across slices are remembered
#: (:mod:`evalrun.watermark.engine.membership_memo`)
SLICE_NGRAMS = 1 << 16

#: green lists asked about for at most this many targets are traced, not built (a numpy
#: trace costs about a quarter of a ``torch.randperm`` of 32,000 plus a little per target, a
#: compiled one a fortieth per target)
TRACE_MAX_TARGETS = 48


def _unique_rows(rows: np.ndarray, vocab_size: int,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_inverse=True)`` and an argsort of ``inverse`` (equal
    rows side by side, in any order), fast when each row packs into one int64 (base
    ``vocab_size`` digits; the rows come back unpacked from the digits): the sort that finds
    the distinct rows also serves :func:`first_occurrence`."""
    n, width = rows.shape
    if width * math.log2(max(vocab_size, 2)) < 62 and n:
        packed = np.zeros(n, dtype=np.int64)
        for col in range(width):
            packed = packed * vocab_size + rows[:, col]
        order = np.argsort(packed)
        srt = packed[order]
        new = np.empty(n, dtype=bool)
        new[0] = True
        np.not_equal(srt[1:], srt[:-1], out=new[1:])
        inverse = np.empty(n, dtype=np.intp)
        inverse[order] = np.cumsum(new) - 1
        values = srt[new]
        uniq = np.empty((len(values), width), dtype=np.int64)
        for col in range(width - 1, -1, -1):
            values, uniq[:, col] = np.divmod(values, vocab_size)
        return uniq, inverse, order
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return uniq, inverse, np.argsort(inverse)


def _canonical_float(value: float) -> str:
    return repr(float(value))


class KGWCompat(WatermarkScheme):
    """Kirchenbauer et al.'s reference KGW (``lefthash`` / ``selfhash``), bit for bit."""

    green_list = True

    @property
    def shared_context(self) -> int:
        """``lefthash`` reads ``context`` tokens, ``selfhash`` ``context - 1`` (it seeds with
        the candidate token itself)."""
        return self.context - int(self.seeding == "selfhash")

    def __init__(self, *, seeding: str, gamma: float, delta: float, context: int,
                 repeats: str = "ignore", z_threshold: float = 4.0) -> None:
        if seeding not in SEEDINGS:
            raise SpecError(f"{WHAT} kgw: seeding={seeding!r} unknown; expected lefthash or selfhash")
        self.seeding = seeding
        self.gamma = float(gamma)
        self.delta = float(delta)
        self.context = int(context)
        self.repeats = repeats
        self.z_threshold = float(z_threshold)
        self.self_salt = seeding == "selfhash"
        #: tokens per scored n-gram (``context_width + 1 - self_salt``)
        self.ngram_len = self.context + 1 - int(self.self_salt)
        self.spec = Spec(name="kgw", params={
            "seeding": seeding,
            "gamma": _canonical_float(self.gamma),
            "delta": _canonical_float(self.delta),
            "context": str(self.context),
            "repeats": repeats,
            "z_threshold": _canonical_float(self.z_threshold),
        })

    def __repr__(self) -> str:
        return f"KGWCompat({self.spec})"

    # -- green lists ------------------------------------------------------------------------
    def greenlist_ids(self, context_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        """Green list seeded by ``context_ids`` (the last ``context`` tokens are used; for
        ``selfhash`` the last one is the candidate), in the reference's order."""
        ids = np.asarray(context_ids, dtype=np.int64)
        if ids.ndim != 1 or len(ids) < self.context:
            raise ValueError(f"need at least {self.context} context tokens for {self.seeding}")
        seed = prf_seeds(ids[-self.context:][None, :], self.seeding, parse_hash_key(key))[0]
        return GreenLists(vocab_size, self.gamma).ids(seed)

    def check_key(self, key: str) -> None:
        """The key must be the reference's hash key: a decimal integer in the int64 range."""
        super().check_key(key)
        parse_hash_key(key, what=f"--key for {self.spec}")

    def _flat_flags(self, seqs: list[np.ndarray], hash_key: int, vocab_size: int,
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(green, first, counts)``: the green and first-occurrence flags of the n-grams of
        all sequences laid end to end, and each sequence's number of n-grams (0 where the
        reference cannot score it).

        In one slice every distinct n-gram is looked up once, one green list per seed;
        first occurrences are within each sequence, so slicing changes no flag. Selfhash
        takes whole sequences together up to about :data:`SLICE_NGRAMS` n-grams (its pairs
        recur across slices through the memo); lefthash takes the whole batch at once, since
        it visits each distinct context's green list once per slice."""
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        counts = np.where(lengths > self.context, lengths - self.ngram_len + 1, 0)
        # a slice starts at each sequence whose first n-gram opens a new slice-sized window
        per_slice = SLICE_NGRAMS if self.self_salt else max(int(counts.sum()), 1)
        window = (np.cumsum(counts) - counts) // per_slice
        cuts = np.r_[0, np.flatnonzero(window[1:] != window[:-1]) + 1, len(seqs)]
        parts = [self._slice_flags(seqs[lo:hi], lengths[lo:hi], counts[lo:hi], hash_key,
                                   vocab_size) for lo, hi in zip(cuts[:-1], cuts[1:])]
        if len(parts) == 1:
            return parts[0][0], parts[0][1], counts
        return (np.concatenate([g for g, _ in parts]), np.concatenate([f for _, f in parts]),
                counts)

    def _slice_flags(self, seqs: list[np.ndarray], lengths: np.ndarray, counts: np.ndarray,
                     hash_key: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_flat_flags`' green and first-occurrence flags of one slice."""
        L = self.ngram_len
        total = int(counts.sum())
        if total == 0:
            return np.zeros(0, bool), np.zeros(0, bool)
        flat = np.concatenate(seqs).astype(np.int64, copy=False)
        starts = np.cumsum(lengths) - lengths
        gram_starts = np.cumsum(counts) - counts
        pos = np.arange(total, dtype=np.int64) + np.repeat(starts - gram_starts, counts)
        grams = flat[pos[:, None] + np.arange(L)]
        uniq, inverse, order = _unique_rows(grams, vocab_size)
        segment = np.repeat(np.arange(len(seqs), dtype=np.int64), counts)
        first = np.asarray(first_occurrence(get_ops("numpy"), inverse, segment, order=order))
        if self.self_salt:  # the window is the whole n-gram
            windows, window_of = uniq, None
        else:  # lefthash: one seed per distinct context, whatever the candidate
            windows, window_of, _ = _unique_rows(uniq[:, :-1], vocab_size)
        seeds = prf_seed_array(windows, self.seeding, hash_key)
        lists = GreenLists(vocab_size, self.gamma, capacity=0)
        # lefthash seeds recur: their green lists are kept across calls; selfhash pairs are
        # remembered (:mod:`evalrun.watermark.engine.membership_memo`)
        green_u = lists.membership(seeds, uniq[:, -1], cache=not self.self_salt,
                                   seed_of=window_of)
        return green_u[inverse], first

    def _ngram_flags(self, seqs: list[np.ndarray], hash_key: int, vocab_size: int,
                     ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per sequence: (green flag of every n-gram, first-occurrence flag of every n-gram)."""
        green, first, counts = self._flat_flags(seqs, hash_key, vocab_size)
        cuts = np.cumsum(counts)[:-1]
        return list(zip(np.split(green, cuts), np.split(first, cuts)))

    # -- detection --------------------------------------------------------------------------
    # z-scores: nulls.z_scores evaluates the reference's _compute_z_score in its operation
    # order, so the reference's values are reproduced bit for bit (the known-value fixtures).
    def _counts(self, green: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cumulative (scored n-grams, green n-grams) after each n-gram."""
        return cumulative_counts(green, first, count_repeats=self.repeats == "count")

    def _detection(self, green: np.ndarray, first: np.ndarray, vocab_size: int) -> Detection:
        if len(green) == 0:
            return Detection(num_tokens_scored=0, score=0.0, p_value=1.0, num_green_tokens=0,
                             z_score=0.0, extra={"green_fraction": 0.0, "binomial_p_value": 1.0,
                                                 "prediction": False})
        totals, counts = self._counts(green, first)
        total, count = int(totals[-1]), int(counts[-1])
        # the nulls are elementwise numpy functions: scalars in, scalars out
        z = float(nulls.z_scores(count, total, self.gamma))  # type: ignore[arg-type]
        p = float(nulls.normal_p(z))  # type: ignore[arg-type]
        p_binom = float(nulls.binomial_p(count, total,  # type: ignore[arg-type]
                                         greenlist_size(vocab_size, self.gamma) / vocab_size))
        return self._detection_of(total, count, z, p, p_binom)

    def _detection_of(self, total: int, count: int, z: float, p: float,
                      p_binom: float) -> Detection:
        return Detection(
            num_tokens_scored=total, score=z, p_value=p, num_green_tokens=count, z_score=z,
            extra={"green_fraction": count / total, "binomial_p_value": p_binom,
                   "prediction": bool(z > self.z_threshold)},
        )

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int) -> Detection:
        ids = token_id_array(token_ids, vocab_size)
        green, first = self._ngram_flags([ids], parse_hash_key(key), vocab_size)[0]
        return self._detection(green, first, vocab_size)

    def detect_many(self, sequences: Sequence[Sequence[int]], key: str, vocab_size: int,  # type: ignore[override]  # takes no backend options
                     ) -> list[Detection]:
        """:meth:`detect` for many sequences, bit for bit: each distinct green list drawn
        once, counts and statistics computed for all sequences in array passes."""
        seqs = checked_arrays(sequences, vocab_size)
        green, first, counts = self._flat_flags(seqs, parse_hash_key(key), vocab_size)
        if self.repeats != "count":
            green = green & first
        cum = np.zeros(len(green) + 1, dtype=np.int64)
        ends = np.cumsum(counts)
        np.cumsum(green, out=cum[1:])
        count = cum[ends] - cum[ends - counts]
        if self.repeats == "count":
            total = counts
        else:
            np.cumsum(first, out=cum[1:])
            total = cum[ends] - cum[ends - counts]
        z = nulls.z_scores(count, total, self.gamma)
        p = nulls.normal_p(z)
        p_binom = nulls.binomial_p(count, total,
                                   greenlist_size(vocab_size, self.gamma) / vocab_size)
        return [self._detection_of(int(n), int(c), float(zi), float(pi), float(bi))
                if n else self._detection(np.zeros(0, bool), np.zeros(0, bool), vocab_size)
                for n, c, zi, pi, bi in zip(total.tolist(), count.tolist(), z.tolist(),
                                            p.tolist(), p_binom.tolist())]

    def green_token_mask(self, token_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        """Green flag of every scored token (one per n-gram, repeats included)."""
        ids = token_id_array(token_ids, vocab_size)
        return self._ngram_flags([ids], parse_hash_key(key), vocab_size)[0][0]

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        """Normal p-value of each prefix (the reference's ``z_score_at_T``, in float64); prefixes
        the reference cannot score get 1."""
        return self.prefix_p_values_many([token_ids], key, vocab_size)[0]

    def prefix_p_values_many(self, token_id_arrays: Sequence[Sequence[int]], key: str,  # type: ignore[override]  # takes no backend options
                             vocab_size: int) -> list[np.ndarray]:
        """:meth:`prefix_p_values` of many sequences, each distinct green list drawn once."""
        seqs = checked_arrays(token_id_arrays, vocab_size)
        flags = self._ngram_flags(seqs, parse_hash_key(key), vocab_size)
        return [self._prefix_p(ids, green, first) for ids, (green, first) in zip(seqs, flags)]

    def _prefix_p(self, ids: np.ndarray, green: np.ndarray, first: np.ndarray) -> np.ndarray:
        out = np.ones(len(ids), dtype=np.float64)
        if len(green) == 0:
            return out
        totals, counts = self._counts(green, first)
        # prefix token_ids[: j + 1] holds n-grams 0 .. j + 1 - L; it is scored when j >= context
        j = np.arange(self.context, len(ids))
        k = j + 1 - self.ngram_len
        out[j] = nulls.normal_p(nulls.z_scores(counts[k], totals[k], self.gamma))
        return out

    # -- generation -------------------------------------------------------------------------
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> "KGWCompatLogitsProcessor":
        return KGWCompatLogitsProcessor(self, parse_hash_key(key), vocab_size, temperature)


class KGWCompatLogitsProcessor:
    """Batched reference ``WatermarkLogitsProcessor``: ``(input_ids [B,T], scores [B,V]) ->
    scores``; delta is added before temperature, then the scores are divided by the
    temperature (when > 0), so the caller samples at temperature 1."""

    def __init__(self, scheme: KGWCompat, hash_key: int, vocab_size: int, temperature: float) -> None:
        check_temperature(temperature)
        self.scheme = scheme
        self._hash_key = hash_key
        self.vocab_size = int(vocab_size)
        self.temperature = float(temperature)
        self.green = GreenLists(self.vocab_size, scheme.gamma)
        #: dense mask table by (width, dtype, device) of the scores; None where none applies
        self._mask_tables: dict[tuple[Any, ...], Any] = {}

    def __repr__(self) -> str:
        return f"KGWCompatLogitsProcessor({self.scheme.spec}, vocab_size={self.vocab_size})"

    def green_mask(self, input_ids: Any, scores: Any) -> Any:
        """Boolean torch mask [B, W] of the positions that receive delta."""
        torch = _torch()
        ids = torch.as_tensor(input_ids).detach().cpu().long()
        sc = torch.as_tensor(scores).detach().cpu()
        if ids.dim() == 1:
            ids = ids[None, :]
        if sc.dim() == 1:
            sc = sc[None, :]
        batch, width = sc.shape
        mask = np.zeros((batch, width), dtype=bool)
        c = self.scheme.context
        seeding = self.scheme.seeding
        if seeding == "lefthash":
            if ids.shape[1] >= c:
                windows = ids[:, ids.shape[1] - c:].numpy()
                seeds = prf_seeds(windows, seeding, self._hash_key)
                w = min(width, self.vocab_size)
                for b, seed in enumerate(seeds):
                    mask[b, :w] = self.green.mask(seed)[:w]
        else:
            if ids.shape[1] >= c - 1:
                m = min(SELFHASH_CANDIDATES, width)
                # per-row sort, as the reference sorts scores[b_idx] (keeps its tie order)
                cands = np.stack([sc[b].sort(dim=-1, descending=True).indices[:m].numpy()
                                  for b in range(batch)]).astype(np.int64)
                prefix = ids[:, ids.shape[1] - (c - 1):].numpy() if c > 1 else np.zeros((batch, 0), np.int64)
                windows = np.concatenate(
                    [np.repeat(prefix[:, None, :], m, axis=1), cands[:, :, None]], axis=2
                ).reshape(batch * m, c)
                seeds = prf_seeds(windows, seeding, self._hash_key)
                ok = self.green.membership(seeds, cands.reshape(-1)).reshape(batch, m)
                rows = np.repeat(np.arange(batch), m).reshape(batch, m)
                mask[rows[ok], cands[ok]] = True
        return torch.from_numpy(mask)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        torch = _torch()
        as_numpy = isinstance(scores, np.ndarray)
        out, _ = self.choose(input_ids, torch.from_numpy(scores) if as_numpy else scores)
        return out.numpy() if as_numpy else out

    def choose(self, input_ids: Any, scores: Any, *, reuse: bool = False) -> tuple[Any, None]:
        """``(scores, None)``, the provider-facing form of ``__call__`` (this scheme never
        picks tokens itself). With ``reuse`` the caller gives ``scores`` up and they are
        biased in place."""
        out = self._dense_step(input_ids, scores, reuse)
        rows = self._lefthash_rows(input_ids, scores) if out is None else None
        if rows is not None:
            out = scores if reuse else scores.clone()
            add_rows(out, rows)
        elif out is None:
            mask = self.green_mask(input_ids, scores).to(scores.device)
            if scores.dim() == 1:
                mask = mask[0]
            out = _torch().where(mask, scores + self.scheme.delta, scores)
        if self.temperature > 0 and self.temperature != 1:
            out /= self.temperature
        return out, None

    def _dense_step(self, input_ids: Any, scores: Any, reuse: bool) -> Any | None:
        """Lefthash with one token of context on scores in host memory: the bias through the
        dense table of this key's green masks, one row per previous token
        (:mod:`evalrun.watermark.engine.mask_tables`); None when that does not apply."""
        if self.scheme.seeding != "lefthash" or self.scheme.context != 1 or scores.dim() != 2 \
                or getattr(input_ids, "ndim", 0) != 2 or int(input_ids.shape[1]) < 1:
            return None
        width = int(scores.shape[1])
        kind = (width, scores.dtype, scores.device)
        table = self._mask_tables.get(kind, self)  # self: not looked up yet
        if table is self or (table is not None and table.evicted):
            table = None
            if host_view(scores[:0]) is not None:
                space = ("kgw-compat-mask", self.scheme.spec.canonical(), self._hash_key,
                         self.vocab_size, width)
                table = seed_tables().dense(space, width, width,
                                            lambda: self._mask_builder(width))
            self._mask_tables[kind] = table
        index = previous_tokens(input_ids, width) if table is not None else None
        if index is None:
            return None
        out = scores if reuse else scores.clone()
        add_packed(out, table.packed(index), self.scheme.delta)
        return out

    def _mask_builder(self, width: int) -> Any:
        """Green masks ``[m, width]`` of the previous tokens ``index [m]`` (one permutation
        each, as the reference draws them; columns past the vocabulary stay red)."""
        w = min(width, self.vocab_size)

        def build(index: np.ndarray) -> np.ndarray:
            masks = np.zeros((len(index), width), dtype=bool)
            seeds = prf_seeds(np.asarray(index, dtype=np.int64)[:, None], "lefthash",
                              self._hash_key)
            for i, seed in enumerate(seeds):
                ids = self.green.ids(seed)
                masks[i, ids[ids < w]] = True
            return masks

        return build

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
        space = ("kgw-compat", self.scheme.spec.canonical(), self._hash_key, self.vocab_size,
                 width, str(scores.device), str(scores.dtype), host is not None)

        def build(missing: list[int]) -> list[Any]:
            if host is not None:
                # every missing green list in one kernel call, each row made in the scores'
                # dtype directly: delta rounded to it on the green ids, 0 elsewhere (what
                # rounding where(mask, delta, 0.0) gives)
                prefixes = permutation_prefixes(missing, self.vocab_size, self.green.size)
                host_rows = []
                for ids in prefixes:
                    row = np.zeros(width, dtype=host.dtype)
                    row[ids[ids < w]] = self.scheme.delta
                    host_rows.append(row)
                return host_rows
            rows = []
            for seed in missing:
                row = np.zeros(width, dtype=np.float64)
                row[:w] = np.where(self.green.mask(seed)[:w], self.scheme.delta, 0.0)
                rows.append(torch.from_numpy(row).to(device=scores.device, dtype=scores.dtype))
            return rows

        return seed_tables().rows(space, seeds, build)


def build(spec: Spec) -> KGWCompat:
    """Validate ``kgw:seeding=...`` (or ``kgw_compat:seeding=...``, the same scheme) and fill
    in the reference defaults; the canonical spec is ``kgw:...,seeding=...`` either way, so
    stored results keep their watermark text."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    seeding = spec.params.get("seeding")
    if seeding not in SEEDINGS:
        raise SpecError(f"{WHAT} {spec}: seeding={seeding!r} unknown; expected one of {', '.join(SEEDINGS)}")
    gamma = finite_param(spec, "gamma", spec_float(spec, "gamma", 0.25, what=WHAT, lo=0.0, hi=1.0))
    if not 0.0 < gamma < 1.0:
        raise SpecError(f"{WHAT} {spec}: gamma={spec.params['gamma']} must lie strictly between 0 and 1")
    delta = finite_param(spec, "delta", spec_float(spec, "delta", 2.0, what=WHAT, lo=0.0))
    context = spec_int(spec, "context", DEFAULT_CONTEXT[seeding], what=WHAT, lo=1, hi=MAX_CONTEXT)
    repeats = spec.params.get("repeats", "ignore")
    if repeats not in REPEATS:
        raise SpecError(f"{WHAT} {spec}: repeats={repeats!r} unknown; expected ignore or count")
    z_threshold = finite_param(spec, "z_threshold", spec_float(spec, "z_threshold", 4.0, what=WHAT))
    return KGWCompat(seeding=seeding, gamma=gamma, delta=delta, context=context, repeats=repeats,
                     z_threshold=z_threshold)
