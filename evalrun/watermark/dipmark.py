"""DiPmark (Wu et al., "A Resilient and Accessible Distribution-Preserving Watermark for Large
Language Models", ICML 2024), as MarkLLM implements it (THU-BPM/MarkLLM at 112fa74,
``watermark/dip/dip.py``, ``config/DIP.json``): ``dipmark:gamma=...,alpha=...,...``.

Parameters and defaults (MarkLLM's): ``gamma=0.5`` (green quantile), ``alpha=0.45``
(reweighting strength, ``0 <= alpha <= 0.5``), ``prefix_length=5`` (context ids hashed; 0 means
the whole history), ``z_threshold=1.513`` (MarkLLM's decision threshold, reported only),
``ignore_history_generation=0`` and ``ignore_history_detection=0``, ``compat=none|markllm``.

Randomness. A position's context is its last ``prefix_length`` ids (fewer at the start of a
text), as int64 little-endian bytes ``c``. Its seed is
``int.from_bytes(sha256(c + hash_key), "big") % (2**32 - 1)`` and its permutation of the
vocabulary is ``torch.randperm(V, generator=torch.Generator().manual_seed(seed))``.

* ``compat=markllm``: ``--key`` is MarkLLM's integer config ``key`` and ``hash_key`` its
  128-byte expansion ``random.Random(key).getrandbits(1024).to_bytes(128, "big")`` (the
  expansion MarkLLM's ``DIPConfig`` lost in commit 26d976e; without it MarkLLM's
  ``detect_watermark`` raises AttributeError on ``hash_key``).
* native (``compat=none``): ``hash_key = sha256(b"evalrun:dipmark:v1\\0" + key.encode())``, so
  each seed is a keyed hash (sha256 with the 32-byte secret as suffix) of the context.

Generation (MarkLLM's ``reweight_logits``, written from the paper's definition): permute the
temperature-scaled distribution, take its CDF ``F`` in permuted order, and give the j-th permuted
token the probability ``G(F_j) - G(F_{j-1})`` with ``G(x) = max(x - alpha, 0) + max(x - (1 -
alpha), 0)``: mass moves towards the end of the permutation, the "green" part. A context already
used in this generation is left unwatermarked (unless ``ignore_history_generation=1``); prompts
shorter than ``prefix_length`` are left as they are. The processor is per generation (it keeps
that history), never shared between rows.

Detection. A token's quantile is ``q = (position in the permutation + 1) / V`` in float32, and
it is green when ``q >= gamma`` (float32). evalrun's null (exact, under the usual random-oracle
idealisation of the keyed hash and of ``randperm``): for a text fixed independently of the key,
a token's permutation position at a context is uniform on ``[0, V)`` and independent across
distinct contexts, so each token whose context is new in the text (the first token has none and
is not scored; later repeats of a context are dropped whatever ``ignore_history_detection``
says) is green with probability exactly ``p = #{k in 1..V : float32(k / V) >= gamma} / V``.
The green count G of n such tokens is Binomial(n, p): the p-value is
``nulls.binomial_p(G, n, p)``, the z-score ``(G - p n) / sqrt(n p (1 - p))`` (the score).
Seeds of distinct contexts collide with probability about ``n**2 / 2**33``, which is ignored.

MarkLLM's score (``extra["markllm_score"]`` in compat mode, the number its
``detect_watermark`` returns): ``z = (G - (1 - gamma) n_m) / sqrt(n_m)`` in float32, where n_m
is the text length less the dropped repeats (the unscorable first token is counted, with
``q = 0``). Its denominator lacks ``sqrt(gamma (1 - gamma))`` (at gamma 0.5 it is half the
binomial z) and it uses ``1 - gamma`` where the green probability is ``p``; evalrun reports it
but does not use it. ``markllm_is_watermarked`` is ``markllm_score > z_threshold``.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any, Sequence

import numpy as np

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, check_keys, spec_float, spec_int
from evalrun.watermark import nulls
from evalrun.watermark.base import Detection, WatermarkScheme, check_temperature, finite_param, token_id_array
from evalrun.watermark.markllm_compat import check_key as check_markllm_key
from evalrun.watermark.markllm_compat import compat_mode

WHAT = "--watermark"
NAME = "dipmark"
ALLOWED_KEYS = frozenset({"gamma", "alpha", "prefix_length", "z_threshold",
                          "ignore_history_generation", "ignore_history_detection", "compat"})
_NATIVE_TAG = b"evalrun:dipmark:v1\0"
_SEED_MOD = 2**32 - 1


def markllm_hash_key(key: int) -> bytes:
    """MarkLLM's 128-byte DiP hash key for its integer config ``key``."""
    return random.Random(key).getrandbits(1024).to_bytes(128, "big")


def native_hash_key(key: str) -> bytes:
    """The secret suffix of every seed hash for an evalrun string key (never echoed)."""
    return hashlib.sha256(_NATIVE_TAG + key.encode("utf-8")).digest()


def context_seed(context: np.ndarray, hash_key: bytes) -> int:
    """Seed of a position's permutation from its context ids (int64 little endian)."""
    code = np.ascontiguousarray(context, dtype="<i8").tobytes()
    return int.from_bytes(hashlib.sha256(code + hash_key).digest(), "big") % _SEED_MOD


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


class DiPmark(WatermarkScheme):
    """DiPmark with MarkLLM's keying (``compat=markllm``) or evalrun's keyed hash."""

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

    def __repr__(self) -> str:
        return f"DiPmark({self.spec})"

    # ---- keys -----------------------------------------------------------------------------
    def check_key(self, key: str) -> None:
        """compat=markllm: an integer (MarkLLM's config key); native: any non-blank string."""
        super().check_key(key)
        check_markllm_key(self.spec, self.compat, key, "key")

    def hash_key(self, key: str) -> bytes:
        """The secret bytes appended to every context before hashing."""
        self.check_key(key)
        if self.compat == "markllm":
            return markllm_hash_key(int(key.strip()))
        return native_hash_key(key)

    def _context(self, ids: np.ndarray, end: int) -> np.ndarray:
        """The context of position ``end``: the ids before it, at most ``prefix_length``."""
        start = 0 if self.prefix_length == 0 else max(0, end - self.prefix_length)
        return ids[start:end]

    # ---- detection ------------------------------------------------------------------------
    def _flags(self, ids: np.ndarray, hash_key: bytes, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Per position: (first occurrence of its context, green). Position 0 is neither."""
        n = len(ids)
        new = np.zeros(n, dtype=bool)
        green = np.zeros(n, dtype=bool)
        q = quantiles(vocab_size)
        gamma = np.float32(self.gamma)
        seen: dict[bytes, int] = {}
        for i in range(1, n):
            code = np.ascontiguousarray(self._context(ids, i), dtype="<i8").tobytes()
            if code not in seen:
                new[i] = True
                seed = int.from_bytes(hashlib.sha256(code + hash_key).digest(), "big") % _SEED_MOD
                seen[code] = seed
            perm = permutation(seen[code], vocab_size).numpy()
            pos = int(np.flatnonzero(perm == ids[i])[0])
            green[i] = bool(q[pos] >= gamma)
        return new, green

    def _prefix_stats(self, token_ids: Sequence[int], key: str,
                      vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        ids = token_id_array(token_ids, vocab_size)
        new, green = self._flags(ids, self.hash_key(key), vocab_size)
        return ids, new, np.cumsum(new), np.cumsum(new & green)

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

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int) -> Detection:
        ids = token_id_array(token_ids, vocab_size)
        new, green = self._flags(ids, self.hash_key(key), vocab_size)
        p_green = green_probability(vocab_size, self.gamma)
        n, g = int(new.sum()), int((new & green).sum())
        z = float(nulls.z_scores(np.array([g]), np.array([n]), p_green)[0])
        p = float(nulls.binomial_p(np.array([g]), np.array([n]), p_green)[0])
        extra: dict[str, Any] = {
            "green_fraction": g / n if n else 0.0,
            "green_probability": p_green,
            "normal_p_value": float(nulls.normal_p(np.array([z]))[0]),
        }
        if self.compat == "markllm":
            score = self.markllm_score(new, green) if len(ids) else None
            extra["markllm_score"] = score
            extra["markllm_is_watermarked"] = bool(score is not None and score > self.z_threshold)
        return Detection(num_tokens_scored=n, score=z, p_value=p, num_green_tokens=g,
                         z_score=z, extra=extra)

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        _, _, totals, counts = self._prefix_stats(token_ids, key, vocab_size)
        if len(totals) == 0:
            return np.ones(0, dtype=np.float64)
        p_green = green_probability(vocab_size, self.gamma)
        return np.asarray(nulls.binomial_p(counts, totals, p_green), dtype=np.float64)

    # ---- generation -----------------------------------------------------------------------
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> "DiPmarkLogitsProcessor":
        return DiPmarkLogitsProcessor(self, self.hash_key(key), vocab_size, temperature)


class DiPmarkLogitsProcessor:
    """Divides by the temperature (when > 0), then reweights the first ``vocab_size`` columns
    of each row with DiPmark under that row's context permutation. Keeps, per row, the
    contexts used so far (MarkLLM's generation history); one instance per generation."""

    def __init__(self, scheme: DiPmark, hash_key: bytes, vocab_size: int, temperature: float) -> None:
        check_temperature(temperature)
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        self.scheme = scheme
        self.vocab_size = int(vocab_size)
        self.temperature = float(temperature)
        self._hash_key = hash_key
        self._history: dict[int, set[bytes]] = {}

    def __repr__(self) -> str:
        return f"DiPmarkLogitsProcessor({self.scheme.spec}, temperature={self.temperature})"

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        as_numpy = isinstance(scores, np.ndarray)
        raw = torch.from_numpy(np.asarray(scores)) if as_numpy else scores
        ids = np.asarray(input_ids if isinstance(input_ids, np.ndarray)
                         else input_ids.detach().cpu().numpy(), dtype=np.int64)
        x = raw.to(torch.float64)  # a copy: the caller's scores are left untouched
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
                seed = int.from_bytes(hashlib.sha256(code + self._hash_key).digest(), "big") % _SEED_MOD
                perm = permutation(seed, width).to(x.device)
                x[row, :width] = dip_reweight(x[row, :width], perm, scheme.alpha)
        out = x.to(raw.dtype)
        return out.numpy() if as_numpy else out


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
