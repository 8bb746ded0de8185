"""Permute-and-flip watermark ``pf`` (Zhao, Li & Wang, "Permute-and-Flip: An optimally
stable and watermarkable decoder", 2024; MarkLLM's ``watermark/pf/pf.py`` and
``config/PF.json`` at commit 112fa74).

Spec: ``pf:ngram=8`` (native; ``compat=none`` says the same) or ``pf:compat=markllm,ngram=8,seed=0`` (MarkLLM-compatible).

Randomness. Position ``t`` of a text gets a seed from the ``ngram`` ids before it, and every
vocabulary entry ``v`` a uniform ``r_v`` from that seed.

* Native mode: the key word is :func:`~evalrun.watermark.randomness.derive_key` of the
  ``--key`` string (SHA-256), tagged for this scheme; the seed is a chain of the SplitMix64
  pair hash of :mod:`evalrun.kernels.keyed_hash` over the context ids, ``r_v`` the uniform of
  ``pair(seed, v)``. numpy only.
* ``compat=markllm``: ``--key`` is MarkLLM's integer ``salt_key`` and ``seed`` its config
  ``seed``: ``s = seed``, then ``s = (s * salt_key + id) mod (2**64 - 1)`` over the context
  ids (MarkLLM's ``seeding="hash"``, the only seeding it runs by default), and ``r`` is
  ``torch.rand(V)`` from a CPU ``torch.Generator`` seeded with ``s`` (needs torch).

Generation (``logits_processor``), MarkLLM's ``sample_next`` with ``top_p = 1``: at
temperature ``T > 0`` the token is ``argmax_v log p_v - log r_v`` with ``p = softmax(logits /
T)``: report-noisy-max with the Exp(1) noise ``-log r_v``, i.e. the permute-and-flip
mechanism over ``log p`` (not a sample from ``p``: it favours likely tokens slightly more);
the processor returns -inf everywhere but that token. At ``T = 0`` MarkLLM decodes greedily
without a watermark, and so does this processor (it returns the scores unchanged). A
position with fewer than ``ngram`` previous ids seeds from the ids it has (MarkLLM: from an
empty context); detection never scores such positions.

Detection and evalrun's null. Each token gets the score ``-ln r_token``. Positions ``t >=
ngram`` (0-based, every position with a full context inside the text) are scored, except
those whose seed repeats an earlier scored position's (a repeated n-gram context gives the
same ``r`` again, so its score is not independent). For a text fixed independently of the
key, distinct seeds give independent uniforms, so each kept score is Exp(1) and their sum
over ``n`` kept positions is exactly Gamma(n, 1): ``p = P[Gamma(n, 1) >= sum]``
(:func:`evalrun.watermark.nulls.erlang_p`). This assumes the keyed hash (native) or the
MT19937 streams of distinct seeds (compat) behave as independent uniforms -- the assumption
every keyed watermark makes.

MarkLLM's detector, reproduced in compat mode as ``extra["markllm_score"]`` (with
``markllm_num_scored`` and ``markllm_is_watermarked``), differs in three ways, none of which
evalrun's p-value inherits:

* it scores positions ``ngram + 1`` to ``L - 1`` only (position ``ngram`` has a full context
  but is skipped: an off-by-one), and keeps repeated contexts (dependent scores);
* its threshold is ``gamma.ppf(1 - alpha, a=n - ngram)`` for ``n`` scored tokens: the n-gram
  length is subtracted a second time from the Gamma shape, so it flags about 11.5% of
  uniform random 60-token texts at the nominal 1% (242 of 2000 measured at V = 1000);
* it calls ``float()`` on a shape-(1,) NumPy array, which NumPy >= 2 refuses (TypeError);
  here the score is the float32 sequential sum MarkLLM computes, returned as a float.

``markllm_score`` is MarkLLM's ``score``: the raw float32 sum, in position order, of
``-log r[id]`` (``r == 0`` replaced by ``1e-4``), 0.0 when no position is scored.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from scipy import stats

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, check_keys, spec_int
from evalrun.kernels import vocab_rows
from evalrun.kernels.backend import NUMPY
from evalrun.kernels.keyed_hash import code, neg_log_uniform, pair, range_codes, tag
from evalrun.watermark.base import Detection, SchemeProcessor, token_id_array
from evalrun.watermark.engine import nulls
from evalrun.watermark.engine.markllm_compat import MarkLLMKeyed, compat_mode
from evalrun.watermark.engine.randomness import derive_key

WHAT = "--watermark"
NAME = "pf"
ALLOWED_KEYS = frozenset({"ngram", "compat", "seed"})
#: MarkLLM's config/PF.json defaults (payload 0 and max_seq_len 1024 are not parameters here)
DEFAULT_NGRAM = 8
DEFAULT_SEED = 0
#: MarkLLM's ``seeding="hash"`` modulus
MOD = 2**64 - 1
#: MarkLLM's ``detect_watermark`` alpha (``gen_kwargs.get("alpha", 0.01)``)
MARKLLM_ALPHA = 0.01
#: domain tag of this scheme's native key word
TAG_PF = 0x7F3A_1C0D_E5B2_9A61


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is in the hf extra
        raise SpecError(f"{WHAT} pf:compat=markllm needs torch (pip install 'evalrun[hf]')") from None
    return torch


class PermuteFlip(MarkLLMKeyed):
    """Permute-and-flip decoding with keyed exponential noise (native or MarkLLM's keys)."""

    markllm_key_field = "salt_key"

    def __init__(self, *, ngram: int = DEFAULT_NGRAM, compat: str | None = None,
                 seed: int = DEFAULT_SEED) -> None:
        if ngram < 1:
            raise SpecError(f"{WHAT} pf: ngram={ngram} must be >= 1")
        compat = None if compat_mode(NAME, compat) == "none" else compat
        self.ngram = int(ngram)
        self.compat = compat
        self.seed = int(seed)
        params = {"ngram": str(self.ngram)}
        if compat is not None:
            params.update(compat=compat, seed=str(self.seed))
        self.spec = Spec(name=NAME, params=params)

    # ---- keys and seeds -----------------------------------------------------------------
    def _salt(self, key: str) -> int:
        self.check_key(key)
        return int(key.strip())

    def _native_word(self, key: str) -> int:
        self.check_key(key)
        return int(tag(NUMPY, NUMPY.u64([derive_key(key)]), TAG_PF)[0])

    def _compat_seeds(self, ids: np.ndarray, salt: int) -> list[int]:
        """MarkLLM's ``get_seed_rng`` of the context before every position ``t >= ngram``."""
        n = self.ngram
        out = []
        for t in range(n, len(ids)):
            s = self.seed
            for i in ids[t - n:t].tolist():
                s = (s * salt + i) % MOD
            out.append(s)
        return out

    def _native_seeds(self, contexts: np.ndarray, key_word: int) -> np.ndarray:
        """Seed words of each row of ``contexts [m, c]`` (c <= ngram ids)."""
        s = np.full(len(contexts), key_word, dtype=np.uint64)
        for j in range(contexts.shape[1]):
            s = pair(NUMPY, s, code(NUMPY, contexts[:, j]))
        return s

    def _compat_uniforms(self, seed: int, vocab_size: int) -> Any:
        torch = _torch()
        return torch.rand(vocab_size, generator=torch.Generator().manual_seed(seed))

    # ---- detection ----------------------------------------------------------------------
    def _analyse(self, ids: np.ndarray, key: str, vocab_size: int) -> dict[str, Any]:
        """Per-position seeds and scores of positions ``ngram..L-1`` and which are kept."""
        n = self.ngram
        m = max(len(ids) - n, 0)
        out: dict[str, Any] = {}
        if self.compat is None:
            word = self._native_word(key)
            if m:
                windows = np.lib.stride_tricks.sliding_window_view(ids[:-1], n)
                seeds = self._native_seeds(windows, word)
                scores = np.asarray(neg_log_uniform(NUMPY, pair(NUMPY, seeds, code(NUMPY, ids[n:]))),
                                    dtype=np.float64)
            else:
                seeds, scores = np.zeros(0, dtype=np.uint64), np.zeros(0)
            keys: list[Any] = seeds.tolist()
        else:
            torch = _torch()
            salt = self._salt(key)
            keys = self._compat_seeds(ids, salt)
            vals = np.zeros(m, dtype=np.float32)
            for j, s in enumerate(keys):
                tok = int(ids[n + j])
                # torch.rand(V)[tok] is the last of torch.rand(tok + 1): the CPU generator
                # fills in stream order (checked against MarkLLM's scores across all ids)
                rt = self._compat_uniforms(s, tok + 1)[tok:]
                rt[rt == 0] = 1e-4
                vals[j] = float(-torch.log(rt)[0])
            scores = vals.astype(np.float64)
            # MarkLLM: positions ngram+1..L-1 (all of them), summed in float32 in order
            ml = vals[1:]
            ml_sum = float(np.cumsum(ml, dtype=np.float32)[-1]) if len(ml) else 0.0
            ml_n = len(ml)
            threshold = (math.inf if ml_n <= n
                         else float(stats.gamma.ppf(1 - MARKLLM_ALPHA, a=ml_n - n, scale=1)))
            out.update(markllm_score=ml_sum, markllm_num_scored=ml_n,
                       markllm_is_watermarked=bool(ml_sum > threshold))
        seen: set[Any] = set()
        kept = np.zeros(m, dtype=bool)
        for j, s in enumerate(keys):
            if s not in seen:
                seen.add(s)
                kept[j] = True
        out.update(scores=scores, kept=kept)
        return out

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int) -> Detection:
        ids = token_id_array(token_ids, vocab_size)
        a = self._analyse(ids, key, vocab_size)
        kept_scores = a["scores"][a["kept"]]
        n = int(len(kept_scores))
        total = float(kept_scores.sum()) if n else 0.0
        p = float(nulls.erlang_p(np.array([total]), np.array([n]))[0])
        extra: dict[str, Any] = {"num_positions": int(len(a["scores"])),
                                 "num_repeated_contexts": int((~a["kept"]).sum())}
        for name in ("markllm_score", "markllm_num_scored", "markllm_is_watermarked"):
            if name in a:
                extra[name] = a[name]
        return Detection(num_tokens_scored=n, score=total, p_value=p, extra=extra)

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        ids = token_id_array(token_ids, vocab_size)
        out = np.ones(len(ids), dtype=np.float64)
        a = self._analyse(ids, key, vocab_size)
        if not len(a["scores"]):
            return out
        kept = a["kept"]
        totals = np.cumsum(np.where(kept, a["scores"], 0.0))
        counts = np.cumsum(kept.astype(np.int64))
        out[self.ngram:] = nulls.erlang_p(totals, counts)
        return out

    # ---- generation ---------------------------------------------------------------------
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> "PermuteFlipLogitsProcessor":
        if self.compat is None:
            return PermuteFlipLogitsProcessor(self, vocab_size, temperature,
                                              key_word=self._native_word(key))
        return PermuteFlipLogitsProcessor(self, vocab_size, temperature, salt=self._salt(key))


class PermuteFlipLogitsProcessor(SchemeProcessor):
    """``(input_ids [B,T], scores [B,W]) -> scores``: -inf everywhere but the token
    ``argmax_v log p_v - log r_v`` of each row (numpy or torch in, the same type out); at
    temperature 0 the scores unchanged (greedy, unwatermarked, as in MarkLLM)."""

    scheme: PermuteFlip

    def __init__(self, scheme: PermuteFlip, vocab_size: int, temperature: float, *,
                 key_word: int | None = None, salt: int | None = None) -> None:
        super().__init__(scheme, vocab_size, temperature)
        self._key_word = key_word
        self._salt = salt
        self._work: np.ndarray | None = None

    def _contexts(self, input_ids: Any, batch: int) -> list[list[int]]:
        ids = input_ids.detach().cpu().numpy() if hasattr(input_ids, "detach") else np.asarray(input_ids)
        ids = ids.reshape(batch, -1) if ids.size else np.zeros((batch, 0), dtype=np.int64)
        n = self.scheme.ngram
        return [row[max(len(row) - n, 0):].astype(np.int64).tolist() for row in ids]

    def _choose_native(self, logits: np.ndarray, contexts: list[list[int]]) -> np.ndarray:
        assert self._key_word is not None
        # float64(logits) / temperature in one pass (x / 1.0 is x: no division at 1)
        x = (logits[:, :self.vocab_size].astype(np.float64) if self.temperature == 1 else
             np.divide(logits[:, :self.vocab_size], self.temperature, dtype=np.float64))
        x -= x.max(axis=1, keepdims=True)
        # exp(x) into a buffer kept across steps (a fresh [B, V] float64 array's page faults
        # cost as much as the exponentials), summed as np.exp(x).sum would be
        work = self._work
        if work is None or work.shape != x.shape:
            work = self._work = np.empty_like(x)
        log_total = np.log(np.exp(x, out=work).sum(axis=1, keepdims=True))
        if vocab_rows.compiled_available() and len(contexts):
            # every row's context has the same length: one seed word per row, then the argmax
            # of (x - log_total) + noise with the noise computed only where it could win
            seeds = self.scheme._native_seeds(np.asarray(contexts, dtype=np.int64).reshape(len(contexts), -1),
                                              self._key_word)
            return vocab_rows.keyed_argmax(x, seeds, self.vocab_size, vocab_rows.NOISE_EXP,
                                           vocab_rows.COMBINE_F64, log_total[:, 0])
        logp = x - log_total
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

    def _chosen(self, input_ids: Any, scores: Any, batch: int) -> np.ndarray:
        """The token of every row (temperature > 0)."""
        contexts = self._contexts(input_ids, batch)
        if self._salt is not None:
            return self._choose_compat(scores.reshape(batch, -1), contexts)
        host = scores if isinstance(scores, np.ndarray) else scores.detach().float().cpu().numpy()
        return self._choose_native(np.asarray(host).reshape(batch, -1), contexts)

    def choose(self, input_ids: Any, scores: Any, *, reuse: bool = False,
               ) -> tuple[Any | None, np.ndarray | None]:
        """The provider's step (``[B, W]`` scores): ``(None, tokens)``, the token
        :meth:`__call__` leaves at 0 in every row, so the caller need not sample its one-hot
        rows; at temperature 0 ``(scores, None)``, unchanged, for greedy decoding."""
        if self.temperature == 0:
            return scores, None
        return None, self._chosen(input_ids, scores, int(scores.shape[0]))

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.temperature == 0:
            return scores
        one_d = getattr(scores, "ndim", 2) == 1
        batch = 1 if one_d else int(scores.shape[0])
        is_np = isinstance(scores, np.ndarray)
        chosen = self._chosen(input_ids, scores, batch)
        if is_np:
            out = np.full(scores.shape, -np.inf, dtype=scores.dtype).reshape(batch, -1)
            out[np.arange(batch), chosen] = 0.0
            return out.reshape(scores.shape)
        import torch

        out_t = torch.full_like(scores.reshape(batch, -1), float("-inf"))
        out_t[torch.arange(batch), torch.as_tensor(chosen, device=scores.device)] = 0.0
        return out_t.reshape(scores.shape)


def build(spec: Spec) -> PermuteFlip:
    """Validate ``pf:ngram=...[,compat=none]`` or ``pf:compat=markllm,ngram=...,seed=...`` (MarkLLM's
    defaults: ngram 8, seed 0)."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    ngram = spec_int(spec, "ngram", DEFAULT_NGRAM, what=WHAT, lo=1, hi=1024)
    compat = spec.params.get("compat")
    if compat == "none":
        compat = None
    if compat is not None and compat != "markllm":
        raise SpecError(f"{WHAT} {spec}: compat={compat!r} unknown; expected none or markllm")
    if compat is None and "seed" in spec.params:
        raise SpecError(f"{WHAT} {spec}: seed is MarkLLM's config seed; it needs compat=markllm")
    seed = spec_int(spec, "seed", DEFAULT_SEED, what=WHAT, lo=0, hi=MOD - 1)
    return PermuteFlip(ngram=ngram, compat=compat, seed=seed)
