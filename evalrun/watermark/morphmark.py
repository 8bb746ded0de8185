"""MorphMark (Wang et al., "MorphMark: Flexible Adaptive Watermarking for Large Language
Models", ACL 2025): a KGW-style green list whose boost grows with the green mass,
``morphmark:gamma=...,type=exp|linear|log,...``; the implementation followed is MarkLLM's
(THU-BPM/MarkLLM at 112fa74, ``watermark/morphmark/morphmark.py`` and
``config/MorphMark.json``).

Parameters and defaults (MarkLLM's config): ``gamma`` 0.5, ``type`` exp, ``k_linear`` 1.55,
``k_exp`` 1.3, ``k_log`` 2.15, ``p_0`` 0.15, ``ewd`` false (only false is implemented;
``ewd=true`` is refused), ``delta_ewd`` 1.25 (EWD's parameter, unused while ``ewd`` is false),
``prefix_length`` 1, ``f_scheme`` time (``additive`` also accepted), ``window_scheme`` left
(the only one MarkLLM implements), ``z_threshold`` 2.0, ``compat`` none (native) or markllm.

Context and green list. At position t the context value is ``c = prod(ids[t-k:t]) % V``
(``f_scheme=time``; ``additive`` sums instead) with ``k = prefix_length``. The green list is
the first ``int(V * gamma)`` entries of the CPU ``torch.randperm(V)`` of a generator seeded with
a per-context seed (drawn by :func:`evalrun.watermark.kgw_compat.permutation_prefixes`, bit for
bit torch's, without importing torch where the compiled kernel is built):

* ``compat=markllm``: ``--key`` is MarkLLM's integer ``hash_key`` and the seed is MarkLLM's
  ``(hash_key * prf[c]) % V`` with ``prf = torch.randperm(V)`` of a generator seeded with
  ``hash_key`` (Python integers, so no overflow). Reducing the seed modulo V means there are only
  V possible green lists and, when ``hash_key`` is prime and does not divide V, every key gives
  the *same* V lists (the key only decides which context gets which): kept here only to
  reproduce MarkLLM's numbers.
* native (``compat=none``, the default): the seed is keyed by evalrun's string key, without
  any reduction: the first 4 bytes (little endian) of ``blake2b(c as 8 little-endian bytes,
  key=sha256(b"evalrun morphmark v1\\0" + key UTF-8), digest_size=8)`` (torch's CPU generator
  keeps 32 seed bits, so 2**32 green lists, independent across contexts for any practical
  purpose).

Generation (``MorphMarkLogitsProcessor``): with ``p = softmax(scores)`` and the green mass
``P_G``, ``r = 0`` if ``P_G < p_0``, else ``exp(k_exp * P_G) - 1`` (``type=exp``),
``k_linear * P_G`` (linear) or ``log(k_log * P_G + 1)`` (log); ``beta = r * (1 - P_G)`` is moved
from the red tokens to the green ones in proportion to their probabilities; negative results
are clipped to 0, the row renormalised, and its log returned (then divided by the temperature,
as transformers' warper does after a custom processor). Each row uses its own green mass
(MarkLLM sums ``P_G`` and the renormalising weights over the whole batch, which is only right
for batch size 1).

Detection. MarkLLM's score (``extra["markllm_score"]`` in compat mode) is the z-score
``(G - gamma*T) / sqrt(T*gamma*(1-gamma))`` over all ``T = L - k`` positions after the first
``k`` tokens, repeats included, compared with ``z_threshold``; it treats repeated contexts as
independent, so repetitive text inflates it. evalrun's p-value scores only the positions
whose context value has not occurred before in the text (each green list used once): for a
text fixed independently of the key, the native seeds of distinct contexts are independent
uniform draws (keyed hash as a random function), so each scored token is green with
probability exactly ``int(V*gamma)/V`` independently and the green count is exactly
``Binomial(n, int(V*gamma)/V)``; the p-value is its survival function
(:func:`evalrun.watermark.nulls.binomial_p`; repeats dropped with
:mod:`evalrun.watermark.counting`). In compat mode the same binomial is only approximate:
the green lists come from MarkLLM's fixed family of V lists.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Sequence

import numpy as np

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, check_keys, spec_float, spec_int
from evalrun.watermark import nulls
from evalrun.watermark.base import Detection, WatermarkScheme, check_temperature, token_id_array
from evalrun.watermark.counting import cumulative_counts, first_occurrences
from evalrun.watermark.kgw_compat import GreenLists, permutation_prefixes
from evalrun.watermark.markllm_compat import MARKLLM, compat_mode
from evalrun.watermark.markllm_compat import check_key as check_markllm_key

WHAT = "--watermark"
NAME = "morphmark"
#: MarkLLM's config/MorphMark.json at 112fa74 (``hash_key`` is the compat-mode key)
MARKLLM_HASH_KEY = 15485863
DEFAULTS: dict[str, Any] = {
    "gamma": 0.5, "type": "exp", "k_linear": 1.55, "k_exp": 1.3, "k_log": 2.15, "p_0": 0.15,
    "ewd": "false", "delta_ewd": 1.25, "prefix_length": 1, "f_scheme": "time",
    "window_scheme": "left", "z_threshold": 2.0, "compat": "none",
}
ALLOWED_KEYS = frozenset(DEFAULTS)
TYPES = ("exp", "linear", "log")
F_SCHEMES = ("time", "additive")
MAX_PREFIX = 8
_NATIVE_DOMAIN = b"evalrun morphmark v1\x00"
_FALSE, _TRUE = ("false", "0", "no"), ("true", "1", "yes")


def _error(spec: Spec | str, param: str, why: str) -> SpecError:
    return SpecError(f"{WHAT} {spec}: {param} {why}")


def parse_hash_key(key: Any, spec: Spec | str = NAME) -> int:
    """MarkLLM's integer ``hash_key`` from the ``--key`` string (compat mode; never echoed)."""
    value = check_markllm_key(spec, MARKLLM, key if isinstance(key, str) else "", "hash_key", high=2**63)
    assert value is not None  # compat mode always gives the integer
    return value


def context_values(ids: np.ndarray, vocab_size: int, prefix_length: int,
                   f_scheme: str) -> list[int]:
    """MarkLLM's ``_f`` argument of every position ``t >= prefix_length``: the product
    (``time``) or sum (``additive``) of the ``prefix_length`` previous ids, modulo V."""
    vals = ids.tolist()
    out = []
    for t in range(prefix_length, len(vals)):
        window = vals[t - prefix_length: t]
        acc = math.prod(window) if f_scheme == "time" else sum(window)
        out.append(acc % vocab_size)
    return out


class MorphMark(WatermarkScheme):
    """MorphMark's adaptive green-list watermark (MarkLLM's generation rule)."""

    green_list = True

    def __init__(self, *, gamma: float = 0.5, kind: str = "exp", k_linear: float = 1.55,
                 k_exp: float = 1.3, k_log: float = 2.15, p_0: float = 0.15,
                 delta_ewd: float = 1.25, prefix_length: int = 1, f_scheme: str = "time",
                 z_threshold: float = 2.0, compat: str = "none") -> None:
        self.gamma = float(gamma)
        self.type = kind
        self.k_linear, self.k_exp, self.k_log = float(k_linear), float(k_exp), float(k_log)
        self.p_0 = float(p_0)
        self.delta_ewd = float(delta_ewd)
        self.prefix_length = int(prefix_length)
        self.f_scheme = f_scheme
        self.z_threshold = float(z_threshold)
        self.compat = compat
        self.spec = Spec(name=NAME, params={
            "gamma": repr(self.gamma), "type": kind, "k_linear": repr(self.k_linear),
            "k_exp": repr(self.k_exp), "k_log": repr(self.k_log), "p_0": repr(self.p_0),
            "ewd": "false", "delta_ewd": repr(self.delta_ewd),
            "prefix_length": str(self.prefix_length), "f_scheme": f_scheme,
            "window_scheme": "left", "z_threshold": repr(self.z_threshold), "compat": compat,
        })

    def __repr__(self) -> str:
        return f"MorphMark({self.spec})"

    @property
    def shared_context(self) -> int | None:
        """Reads only the last ``prefix_length`` tokens, ignores ``seed``, keeps no state."""
        return self.prefix_length

    # ---- keys and green lists -------------------------------------------------------------
    def check_key(self, key: str) -> None:
        super().check_key(key)
        check_markllm_key(self.spec, self.compat, key, "hash_key", high=2**63)

    def seeds(self, contexts: Sequence[int], key: str, vocab_size: int) -> list[int]:
        """Generator seed of the green list of each context value."""
        self.check_key(key)
        if self.compat == "markllm":
            hash_key = parse_hash_key(key, self.spec)
            prf = _markllm_prf(hash_key, vocab_size)
            return [(hash_key * int(prf[c])) % vocab_size for c in contexts]
        secret = hashlib.sha256(_NATIVE_DOMAIN + key.encode("utf-8")).digest()
        out = []
        for c in contexts:
            digest = hashlib.blake2b(int(c).to_bytes(8, "little"), key=secret,
                                     digest_size=8).digest()
            out.append(int.from_bytes(digest[:4], "little"))
        return out

    def green_size(self, vocab_size: int) -> int:
        return int(vocab_size * self.gamma)

    # ---- detection ------------------------------------------------------------------------
    def _flags(self, token_ids: Sequence[int], key: str,
               vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per position of the text: scored with repeats (t >= k), green, and first
        occurrence of its context value (evalrun's scored positions)."""
        self.check_key(key)
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        ids = token_id_array(token_ids, vocab_size)
        n, k = len(ids), self.prefix_length
        scored = np.zeros(n, dtype=bool)
        green = np.zeros(n, dtype=bool)
        first = np.zeros(n, dtype=bool)
        if n <= k:
            return scored, green, first
        ctx = context_values(ids, vocab_size, k, self.f_scheme)
        uniq, inverse = np.unique(np.asarray(ctx, dtype=np.int64), return_inverse=True)
        seeds = np.asarray(self.seeds(uniq.tolist(), key, vocab_size), dtype=np.uint64)
        lists = GreenLists(vocab_size, self.gamma)
        scored[k:] = True
        green[k:] = lists.membership(seeds, ids[k:], cache=self.compat == "markllm",
                                     seed_of=inverse.reshape(-1))
        first[k:] = first_occurrences(np.asarray(ctx, dtype=np.int64))
        return scored, green, first

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int) -> Detection:
        scored, green, first = self._flags(token_ids, key, vocab_size)
        total_all, green_all = int(scored.sum()), int((green & scored).sum())
        n, g = int(first.sum()), int((green & first).sum())
        frac = self.green_size(vocab_size) / vocab_size
        p = float(nulls.binomial_p(np.array([g]), np.array([n]), frac)[0])
        z = float(nulls.z_scores(np.array([g]), np.array([n]), self.gamma)[0])
        z_all = float(nulls.z_scores(np.array([green_all]), np.array([total_all]), self.gamma)[0])
        extra: dict[str, Any] = {
            "green_fraction": g / n if n else 0.0,
            "green_probability": frac,
            "positions_with_repeats": total_all,
            "green_with_repeats": green_all,
            "z_with_repeats": z_all,
        }
        if self.compat == "markllm" and total_all >= 1:
            # MarkLLM's detect_watermark: z over all L - k positions, compared with z_threshold
            extra["markllm_score"] = z_all
            extra["markllm_is_watermarked"] = bool(z_all > self.z_threshold)
        return Detection(num_tokens_scored=n, score=z, p_value=p, num_green_tokens=g,
                         z_score=z, extra=extra)

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        _scored, green, first = self._flags(token_ids, key, vocab_size)
        if len(first) == 0:
            return np.ones(0, dtype=np.float64)
        totals, counts = cumulative_counts(green, first, count_repeats=False)
        frac = self.green_size(vocab_size) / vocab_size
        return np.asarray(nulls.binomial_p(counts, totals, frac), dtype=np.float64)

    # ---- generation -----------------------------------------------------------------------
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> "MorphMarkLogitsProcessor":
        self.check_key(key)
        return MorphMarkLogitsProcessor(self, key, vocab_size, temperature)

    def boost(self, green_mass: Any) -> Any:
        """MarkLLM's ``r`` of a green mass (elementwise on a numpy array or torch tensor)."""
        if self.type == "exp":
            r = (green_mass * self.k_exp).exp() - 1 if hasattr(green_mass, "exp") \
                else np.exp(self.k_exp * green_mass) - 1
        elif self.type == "linear":
            r = green_mass * self.k_linear
        else:
            r = (green_mass * self.k_log + 1).log() if hasattr(green_mass, "log") \
                else np.log(self.k_log * green_mass + 1)
        return r * (green_mass >= self.p_0)


def _markllm_prf(hash_key: int, vocab_size: int) -> np.ndarray:
    """MarkLLM's ``prf``: the CPU ``torch.randperm(V)`` of a generator seeded with hash_key."""
    return permutation_prefixes([hash_key & 0xFFFFFFFFFFFFFFFF], vocab_size, vocab_size)[0]


class MorphMarkLogitsProcessor:
    """Batched MorphMark reweighting: per row, the green list of its last ``prefix_length``
    tokens, then MarkLLM's probability transfer (in the scores' dtype, per row)."""

    def __init__(self, scheme: MorphMark, key: str, vocab_size: int, temperature: float) -> None:
        check_temperature(temperature)
        self.scheme = scheme
        self.vocab_size = int(vocab_size)
        self.temperature = float(temperature)
        self._key = key
        self._lists = GreenLists(self.vocab_size, scheme.gamma, capacity=1024)
        self._seed_of: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"MorphMarkLogitsProcessor({self.scheme.spec}, vocab_size={self.vocab_size})"

    def _mask_row(self, history: list[int]) -> np.ndarray:
        s = self.scheme
        if len(history) < s.prefix_length:
            return np.zeros(self.vocab_size, dtype=bool)
        # the context of the next position: the last prefix_length ids, a dummy target after
        c = context_values(np.asarray(history[-s.prefix_length:] + [0], dtype=np.int64),
                           self.vocab_size, s.prefix_length, s.f_scheme)[0]
        seed = self._seed_of.get(c)
        if seed is None:
            seed = self._seed_of[c] = s.seeds([c], self._key, self.vocab_size)[0]
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


def _flag(spec: Spec, name: str) -> bool:
    raw = spec.params.get(name, DEFAULTS[name]).strip().lower()
    if raw in _FALSE:
        return False
    if raw in _TRUE:
        return True
    raise _error(spec, name, f"must be true or false, got {spec.params[name]!r}")


def _choice(spec: Spec, name: str, allowed: Sequence[str]) -> str:
    raw = spec.params.get(name, DEFAULTS[name])
    if raw not in allowed:
        raise _error(spec, name, f"={raw!r} unknown; expected {' or '.join(allowed)}")
    return raw


def build(spec: Spec) -> MorphMark:
    """Validate ``morphmark:...`` and fill MarkLLM's defaults (see the module docstring)."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    gamma = spec_float(spec, "gamma", DEFAULTS["gamma"], what=WHAT, lo=0.0, hi=1.0)
    if not 0.0 < gamma < 1.0:
        raise _error(spec, "gamma", f"={spec.params['gamma']} must lie strictly between 0 and 1")
    kind = _choice(spec, "type", TYPES)
    k_linear = spec_float(spec, "k_linear", DEFAULTS["k_linear"], what=WHAT, lo=0.0)
    k_exp = spec_float(spec, "k_exp", DEFAULTS["k_exp"], what=WHAT, lo=0.0)
    k_log = spec_float(spec, "k_log", DEFAULTS["k_log"], what=WHAT, lo=0.0)
    p_0 = spec_float(spec, "p_0", DEFAULTS["p_0"], what=WHAT, lo=0.0, hi=1.0)
    if _flag(spec, "ewd"):
        raise _error(spec, "ewd", "=true (entropy-weighted detection) is not implemented; "
                     "use ewd=false or the ewd scheme")
    delta_ewd = spec_float(spec, "delta_ewd", DEFAULTS["delta_ewd"], what=WHAT, lo=0.0)
    prefix_length = spec_int(spec, "prefix_length", DEFAULTS["prefix_length"], what=WHAT,
                             lo=1, hi=MAX_PREFIX)
    f_scheme = _choice(spec, "f_scheme", F_SCHEMES)
    _choice(spec, "window_scheme", ("left",))
    z_threshold = spec_float(spec, "z_threshold", DEFAULTS["z_threshold"], what=WHAT)
    compat = compat_mode(spec, spec.params.get("compat"))
    return MorphMark(gamma=gamma, kind=kind, k_linear=k_linear, k_exp=k_exp, k_log=k_log,
                     p_0=p_0, delta_ewd=delta_ewd, prefix_length=prefix_length,
                     f_scheme=f_scheme, z_threshold=z_threshold, compat=compat)
