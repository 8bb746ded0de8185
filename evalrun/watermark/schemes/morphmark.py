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
(``f_scheme=time``; ``additive`` sums instead) with ``k = prefix_length``.

* ``compat=markllm``: the green list is the first ``int(V * gamma)`` entries of the CPU
  ``torch.randperm(V)`` of a generator seeded with a per-context seed (drawn by
  :func:`evalrun.watermark.kgw_compat.permutation_prefixes`, bit for bit torch's, without
  importing torch where the compiled kernel is built). ``--key`` is MarkLLM's integer
  ``hash_key`` and the seed is MarkLLM's
  ``(hash_key * prf[c]) % V`` with ``prf = torch.randperm(V)`` of a generator seeded with
  ``hash_key`` (Python integers, so no overflow). Reducing the seed modulo V means there are only
  V possible green lists and, when ``hash_key`` is prime and does not divide V, every key gives
  the *same* V lists (the key only decides which context gets which): kept here only to
  reproduce MarkLLM's numbers.
* native (``compat=none``, the default): native kgw's green lists
  (:mod:`evalrun.kernels.green`), no permutation at all. The context's seed word is
  ``pair(key word, c)`` (SplitMix64 keyed hash of :mod:`evalrun.kernels.keyed_hash`; the key
  word is :func:`~evalrun.watermark.randomness.derive_key` of ``--key`` tagged for this
  scheme), and token v is green iff ``is_green(seed, v, gamma)``: the top 53 bits of
  ``pair(seed, v)`` fall below ``threshold53(gamma)``. Detection is a few vectorised hashes
  per token (all texts of ``detect_many`` in one pass), generation one ``green_mask`` row.

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
text fixed independently of the key, the native hash words of its distinct (context, token)
pairs are independent uniform 64-bit words (keyed hash as a random function), so each scored
token is green with probability exactly ``p = threshold53(gamma) / 2**53`` (0.5 exactly at
the default gamma) independently, and the green count is exactly ``Binomial(n, p)``; the
p-value is its survival function (:func:`evalrun.watermark.nulls.binomial_p`). In compat mode
the binomial uses ``p = int(V*gamma)/V`` and is only approximate: the green lists come from
MarkLLM's fixed family of V lists.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, check_keys, spec_float, spec_int
from evalrun.kernels import vocab_rows
from evalrun.kernels.backend import NUMPY
from evalrun.kernels.green import green_mask, is_green
from evalrun.kernels.keyed_hash import code, pair, tag, threshold53
from evalrun.kernels.token_stats import first_occurrence
from evalrun.watermark.base import BatchedScheme, Detection, SchemeProcessor, token_id_arrays
from evalrun.watermark.engine import nulls
from evalrun.watermark.engine.detection import _Layout as Layout
from evalrun.watermark.engine.markllm_compat import MarkLLMKeyed, compat_mode
from evalrun.watermark.engine.randomness import derive_key
from evalrun.watermark.schemes.kgw_compat import GreenLists, permutation_prefixes

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
#: domain tag of this scheme's native key word
TAG_MORPHMARK = 0x2F6B_91D3_A74C_05E8
_FALSE, _TRUE = ("false", "0", "no"), ("true", "1", "yes")


def _error(spec: Spec | str, param: str, why: str) -> SpecError:
    return SpecError(f"{WHAT} {spec}: {param} {why}")


def context_values(ids: np.ndarray, vocab_size: int, prefix_length: int, f_scheme: str,
                   local: np.ndarray | None = None) -> np.ndarray:
    """MarkLLM's ``_f`` argument of every position ``t >= prefix_length``: the product
    (``time``) or sum (``additive``) of the ``prefix_length`` previous ids, modulo V (reduced
    after each factor, so int64 never overflows). With ``local`` (each position's index in its
    own text, for texts laid end to end) the positions are those with ``local >=
    prefix_length``."""
    ids = np.asarray(ids, dtype=np.int64)
    at = (np.arange(prefix_length, len(ids)) if local is None
          else np.flatnonzero(local >= prefix_length))
    acc = np.full(len(at), 1 if f_scheme == "time" else 0, dtype=np.int64)
    for back in range(1, prefix_length + 1):
        prev = ids[at - back]
        acc = (acc * prev if f_scheme == "time" else acc + prev) % vocab_size
    return acc


class MorphMark(BatchedScheme, MarkLLMKeyed):
    """MorphMark's adaptive green-list watermark (MarkLLM's generation rule)."""

    markllm_key_field = "hash_key"
    markllm_key_high = 2**63

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

    @property
    def shared_context(self) -> int | None:
        """Reads only the last ``prefix_length`` tokens, ignores ``seed``, keeps no state."""
        return self.prefix_length

    # ---- keys and green lists -------------------------------------------------------------
    def seeds(self, contexts: Sequence[int], key: str, vocab_size: int) -> list[int]:
        """Generator seed of the green list of each context value."""
        self.check_key(key)
        if self.compat == "markllm":
            hash_key = self.markllm_key(key)
            prf = _markllm_prf(hash_key, vocab_size)
            return [(hash_key * int(prf[c])) % vocab_size for c in contexts]
        return self._native_seeds(np.asarray(list(contexts), dtype=np.int64), key).tolist()

    def _native_seeds(self, contexts: np.ndarray, key: str) -> np.ndarray:
        """Native seed words ``pair(key word, c)`` of the context values ``contexts``."""
        word = tag(NUMPY, NUMPY.u64([derive_key(key)]), TAG_MORPHMARK)
        return np.asarray(pair(NUMPY, word, code(NUMPY, contexts)), dtype=np.uint64)

    def green_size(self, vocab_size: int) -> int:
        """compat=markllm: the size of every green list."""
        return int(vocab_size * self.gamma)

    def green_probability(self, vocab_size: int) -> float:
        """Exact probability that a scored token is green under the null."""
        if self.compat == "markllm":
            return self.green_size(vocab_size) / vocab_size
        return threshold53(self.gamma) / 2.0**53

    # ---- detection ------------------------------------------------------------------------
    def _flags(self, token_id_seqs: Sequence[Sequence[int]], key: str,
               vocab_size: int) -> tuple[Layout, np.ndarray, np.ndarray, np.ndarray]:
        """The texts laid end to end and, per position: scored with repeats (t >= k), green,
        and first occurrence of its context value in its text (evalrun's scored positions)."""
        self.check_key(key)
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        lay = Layout(token_id_arrays(token_id_seqs, vocab_size))
        scored = lay.local >= self.prefix_length
        green = np.zeros(lay.size, dtype=bool)
        first = np.zeros(lay.size, dtype=bool)
        at = np.flatnonzero(scored)
        if not len(at):
            return lay, scored, green, first
        ctx = context_values(lay.flat, vocab_size, self.prefix_length, self.f_scheme, lay.local)
        if self.compat == "markllm":
            uniq, inverse = np.unique(ctx, return_inverse=True)
            seeds = np.asarray(self.seeds(uniq.tolist(), key, vocab_size), dtype=np.uint64)
            green[at] = GreenLists(vocab_size, self.gamma).membership(
                seeds, lay.flat[at], cache=True, seed_of=inverse.reshape(-1))
        else:
            green[at] = is_green(NUMPY, self._native_seeds(ctx, key), lay.flat[at], self.gamma)
        first[at] = first_occurrence(NUMPY, ctx.astype(np.uint64), lay.segment[at])
        return lay, scored, green, first

    def detect_batch(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                     vocab_size: int) -> list[Detection]:
        """:meth:`detect` of every text, from one vectorised pass over all of them."""
        lay, scored, green, first = self._flags(token_id_arrays, key, vocab_size)
        total_all = lay.totals(scored.astype(np.int64))
        green_all = lay.totals((green & scored).astype(np.int64))
        n, g = lay.totals(first.astype(np.int64)), lay.totals((green & first).astype(np.int64))
        frac = self.green_probability(vocab_size)
        p = nulls.binomial_p(g, n, frac)
        z = nulls.z_scores(g, n, self.gamma)
        z_all = nulls.z_scores(green_all, total_all, self.gamma)
        out = []
        for n_i, g_i, p_i, z_i, t_i, ga_i, za_i in zip(n.tolist(), g.tolist(), p.tolist(), z.tolist(),
                                                       total_all.tolist(), green_all.tolist(),
                                                       z_all.tolist()):
            extra: dict[str, Any] = {
                "green_fraction": g_i / n_i if n_i else 0.0,
                "green_probability": frac,
                "positions_with_repeats": t_i,
                "green_with_repeats": ga_i,
                "z_with_repeats": za_i,
            }
            if self.compat == "markllm" and t_i >= 1:
                # MarkLLM's detect_watermark: z over all L - k positions, compared with z_threshold
                extra["markllm_score"] = za_i
                extra["markllm_is_watermarked"] = bool(za_i > self.z_threshold)
            out.append(Detection(num_tokens_scored=n_i, score=z_i, p_value=p_i,
                                 num_green_tokens=g_i, z_score=z_i, extra=extra))
        return out

    def prefix_batch(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                     vocab_size: int) -> list[np.ndarray]:
        """:meth:`prefix_p_values` of every text, from one pass over all of them."""
        lay, _scored, green, first = self._flags(token_id_arrays, key, vocab_size)
        totals = lay.int_cumsum(first.astype(np.int64))
        counts = lay.int_cumsum((green & first).astype(np.int64))
        frac = self.green_probability(vocab_size)
        return lay.split(np.asarray(nulls.binomial_p(counts, totals, frac), dtype=np.float64))

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


class MorphMarkLogitsProcessor(SchemeProcessor):
    """Batched MorphMark reweighting: per row, the green list of its last ``prefix_length``
    tokens, then MarkLLM's probability transfer (in the scores' dtype, per row)."""

    scheme: MorphMark

    def __init__(self, scheme: MorphMark, key: str, vocab_size: int, temperature: float) -> None:
        super().__init__(scheme, vocab_size, temperature)
        self._key = key
        self._lists = GreenLists(self.vocab_size, scheme.gamma, capacity=1024)
        self._seed_of: dict[int, int] = {}
        self._work: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _seed(self, history: list[int]) -> Any:
        """The green list's seed of the position after ``history`` (at least prefix_length ids)."""
        s = self.scheme
        # the context of the next position: the last prefix_length ids, a dummy target after
        c = int(context_values(np.asarray(history[-s.prefix_length:] + [0], dtype=np.int64),
                               self.vocab_size, s.prefix_length, s.f_scheme)[0])
        seed = self._seed_of.get(c)
        if seed is None:
            seed = self._seed_of[c] = s.seeds([c], self._key, self.vocab_size)[0]
        return seed

    def _mask_row(self, history: list[int]) -> np.ndarray:
        s = self.scheme
        if len(history) < s.prefix_length:
            return np.zeros(self.vocab_size, dtype=bool)
        seed = self._seed(history)
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
        if (self.scheme.compat != "markllm" and vocab_rows.compiled_available() and sc.ndim == 2
                and sc.dtype == torch.float32 and sc.device.type == "cpu" and ids.ndim == 2):
            out = self._native_step(ids, sc, width)
            return out.numpy() if as_numpy else out
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


    def _native_step(self, ids: np.ndarray, sc: Any, width: int) -> Any:
        """:meth:`__call__`'s step for native green lists and float32 CPU scores: the same
        torch softmax, sums, log and temperature, the green lists and the elementwise
        transfer in the vocabulary kernels (:func:`evalrun.kernels.vocab_rows.green_products`,
        :func:`~evalrun.kernels.vocab_rows.mass_transfer`), a pass each instead of a dozen."""
        import torch

        batch = int(sc.shape[0])
        active = np.full(batch, ids.shape[-1] >= self.scheme.prefix_length)
        seeds = ([self._seed(row) for row in ids.tolist()] if active.all()
                 else [0] * batch)
        probs = torch.softmax(sc, dim=-1)
        p = probs.numpy()
        # the step's [B, W] work arrays are kept from step to step (a fresh array's page
        # faults cost as much as the arithmetic); only the result is new
        work = self._work
        if work is None or work[1].shape != p.shape:
            work = self._work = (np.empty(p.shape, dtype=np.uint8), np.empty_like(p),
                                 np.empty_like(p))
        green, green_p, red_p = vocab_rows.green_products(
            p, np.asarray(seeds, dtype=np.uint64), min(width, self.vocab_size), self.scheme.gamma,
            active, out=work)
        p_green = torch.from_numpy(green_p).sum(dim=-1, keepdim=True)
        beta = self.scheme.boost(p_green) * (1 - p_green)
        beta = beta * torch.from_numpy(active).unsqueeze(-1)
        red_mass = torch.from_numpy(red_p).sum(dim=-1, keepdim=True)
        # the transfer overwrites the red products, which are summed already
        moved = torch.from_numpy(vocab_rows.mass_transfer(p, green, p_green.numpy(),
                                                          red_mass.numpy(), beta.numpy(),
                                                          out=red_p))
        moved.div_(moved.sum(dim=-1, keepdim=True))
        out = torch.log(moved, out=probs)  # the softmax is spent: the result goes there
        # x / 1.0 is x, bit for bit: the division is left out at temperature 1
        if self.temperature > 0 and self.temperature != 1:
            out.div_(self.temperature)
        return out


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
