"""Unigram watermark (Zhao et al., "Provable Robust Watermarking for AI-Generated Text",
ICLR 2024): one fixed green list for the whole vocabulary, ``unigram:gamma=...,delta=...``.

Green list: a keyed shuffle of a mask holding ``int(gamma * V)`` green entries, as in the
authors' code (github.com/XuandongZhao/Unigram-Watermark, ``gptwm.py``,
``GPTWatermarkBase``): ``numpy.random.default_rng(seed).shuffle(mask)``. A key that is a
decimal integer in the int64 range is the authors' ``watermark_key`` and gives their green
list exactly (seed = first 4 bytes, little endian, of sha256 of the key's 8 little-endian
bytes); any other key string is hashed the same way from its UTF-8 bytes (first 8 bytes).

Generation adds ``delta`` to every green logit (``GPTWatermarkLogitsWarper``), before the
temperature.

Detection (``repeats``): the paper's detector counts each distinct token once
(``repeats=ignore``, the default; the authors' ``unidetect`` / ``dynamic_threshold``). For a
text fixed independently of the key, the green count among its m distinct tokens is then
exactly hypergeometric (V, int(gamma*V), m) over the key's randomness; its survival function
is the reported p-value, and the paper's threshold ``sqrt(1 - (m-1)/(V-1)) * z_alpha`` is its
normal approximation (``extra["fpc_normal_p_value"]``). ``repeats=count`` is the authors'
original ``detect`` over every token with the binomial p-value (exact for i.i.d. uniform
tokens). Both report ``z = (green - gamma*T) / sqrt(T*gamma*(1-gamma))`` and the binomial
p-value (green probability ``int(gamma*V)/V``) in ``extra``, computed by
:mod:`evalrun.watermark.engine.nulls`; repeats are handled by :mod:`evalrun.watermark.engine.counting`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from typing import Any, Sequence

import numpy as np
from scipy import stats

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, check_keys, spec_float
from evalrun.watermark.base import Detection, WatermarkScheme, check_temperature, finite_param, token_id_array
from evalrun.watermark.engine import nulls
from evalrun.watermark.engine.counting import cumulative_counts, first_occurrences
from evalrun.watermark.engine.scores import REPEATS
from evalrun.watermark.strength import GREEN_LIST_GRID

WHAT = "--watermark"
#: ``evalrun tune``'s search: WaterBench's green-list grid around Unigram's default gamma 0.5
STRENGTH_GRID = replace(GREEN_LIST_GRID, outer_default=0.5)
ALLOWED_KEYS = frozenset({"gamma", "delta", "repeats"})
_INT_RE = re.compile(r"[+-]?[0-9]+")


def key_seed(key: str | None) -> int:
    """Seed of ``numpy.random.default_rng`` for the secret ``key`` (never echoed)."""
    if key is None or not isinstance(key, str) or not key.strip():
        raise SpecError("unigram: a watermark key is required (a non-empty string)")
    text = key.strip()
    if _INT_RE.fullmatch(text) and -(2**63) <= int(text) < 2**63:
        # the authors' _hash_fn: sha256 over np.int64(key) bytes, first 4 bytes little endian
        digest = hashlib.sha256(int(text).to_bytes(8, "little", signed=True)).digest()
        return int.from_bytes(digest[:4], "little")
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "little")


def green_mask(key: str, vocab_size: int, gamma: float) -> np.ndarray:
    """The fixed green list as a boolean mask over ``vocab_size`` tokens."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    size = int(gamma * vocab_size)
    mask = np.zeros(vocab_size, dtype=bool)
    mask[:size] = True
    np.random.default_rng(key_seed(key)).shuffle(mask)
    return mask


class Unigram(WatermarkScheme):
    """Fixed-green-list watermark (Zhao et al.)."""

    green_list = True
    #: one green list for every position: reads no context
    shared_context = 0

    def __init__(self, *, gamma: float = 0.5, delta: float = 2.0, repeats: str = "ignore") -> None:
        if repeats not in REPEATS:
            raise SpecError(f"{WHAT} unigram: repeats={repeats!r} unknown; expected ignore or count")
        self.gamma = float(gamma)
        self.delta = float(delta)
        self.repeats = repeats
        self.spec = Spec(name="unigram", params={
            "gamma": repr(self.gamma), "delta": repr(self.delta), "repeats": repeats,
        })

    def __repr__(self) -> str:
        return f"Unigram({self.spec})"

    def green_mask(self, key: str, vocab_size: int) -> np.ndarray:
        return green_mask(key, vocab_size, self.gamma)

    def check_key(self, key: str) -> None:
        """Any string with a non-blank character (:func:`key_seed` rejects blank ones)."""
        super().check_key(key)
        if not key.strip():
            raise SpecError(f"--key: the watermark key for {self.spec} must not be blank")

    def _counts(self, ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cumulative (scored tokens, green tokens) after each prefix."""
        count_repeats = self.repeats == "count"
        first = None if count_repeats else first_occurrences(ids)
        return cumulative_counts(mask[ids], first, count_repeats=count_repeats)

    def _p_values(self, total: np.ndarray, count: np.ndarray, vocab_size: int) -> dict[str, np.ndarray]:
        size = int(self.gamma * vocab_size)
        z = nulls.z_scores(count, total, self.gamma)
        out = {
            "z": z,
            "binomial": nulls.binomial_p(count, total, size / vocab_size),
            "normal": nulls.normal_p(z),
        }
        if self.repeats == "ignore":
            out["hypergeom"] = stats.hypergeom.sf(count - 1, vocab_size, size, total)
            # the paper's dynamic threshold: z compared with sqrt(1 - (m-1)/(V-1)) * z_alpha
            fpc = np.sqrt(np.clip(1 - (total - 1) / max(vocab_size - 1, 1), 0.0, 1.0))
            safe = np.where(fpc > 0, fpc, 1.0)
            out["fpc_normal"] = np.where(fpc > 0, nulls.normal_p(z / safe), out["hypergeom"])
            out["p"] = out["hypergeom"]
        else:
            out["p"] = out["binomial"]
        return out

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int) -> Detection:
        ids = token_id_array(token_ids, vocab_size)
        mask = self.green_mask(key, vocab_size)
        if len(ids) == 0:
            return Detection(num_tokens_scored=0, score=0.0, p_value=1.0, num_green_tokens=0,
                             z_score=0.0, extra={"green_fraction": 0.0, "binomial_p_value": 1.0})
        totals, counts = self._counts(ids, mask)
        total, count = int(totals[-1]), int(counts[-1])
        ps = self._p_values(np.array([total]), np.array([count]), vocab_size)
        z = float(ps["z"][0])
        extra: dict[str, Any] = {
            "green_fraction": count / total,
            "binomial_p_value": float(ps["binomial"][0]),
            "normal_p_value": float(ps["normal"][0]),
        }
        if self.repeats == "ignore":
            extra["hypergeom_p_value"] = float(ps["hypergeom"][0])
            extra["fpc_normal_p_value"] = float(ps["fpc_normal"][0])
        return Detection(num_tokens_scored=total, score=z, p_value=float(ps["p"][0]),
                         num_green_tokens=count, z_score=z, extra=extra)

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        ids = token_id_array(token_ids, vocab_size)
        if len(ids) == 0:
            return np.ones(0, dtype=np.float64)
        totals, counts = self._counts(ids, self.green_mask(key, vocab_size))
        return np.asarray(self._p_values(totals, counts, vocab_size)["p"], dtype=np.float64)

    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> "UnigramLogitsProcessor":
        return UnigramLogitsProcessor(self.green_mask(key, vocab_size), self.delta, temperature)


class UnigramLogitsProcessor:
    """Adds delta to the green logits of every row, then divides by the temperature (> 0).

    The green list never changes, so the bias row (delta on green columns, 0 elsewhere) is
    built once per width, dtype and device and each step costs one addition."""

    def __init__(self, mask: np.ndarray, delta: float, temperature: float) -> None:
        check_temperature(temperature)
        self._mask = mask
        self.delta = delta
        self.temperature = float(temperature)
        self._bias: dict[tuple[int, str, str], Any] = {}

    def __repr__(self) -> str:
        return f"UnigramLogitsProcessor(delta={self.delta}, vocab_size={len(self._mask)})"

    def _bias_row(self, scores: Any) -> Any:
        width = int(scores.shape[-1])
        key = (width, str(scores.dtype), str(getattr(scores, "device", "")))
        bias = self._bias.get(key)
        if bias is None:
            mask = np.zeros(width, dtype=bool)
            n = min(width, len(self._mask))
            mask[:n] = self._mask[:n]
            row = np.where(mask, self.delta, 0.0)
            if isinstance(scores, np.ndarray):
                bias = row.astype(scores.dtype)
            else:
                import torch

                bias = torch.from_numpy(row).to(device=scores.device, dtype=scores.dtype)
            self._bias[key] = bias
        return bias

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        out = scores + self._bias_row(scores)
        if self.temperature > 0:
            out /= self.temperature
        return out


def build(spec: Spec) -> Unigram:
    """Validate ``unigram:gamma=...,delta=...,repeats=...`` (defaults 0.5, 2.0, ignore)."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    gamma = finite_param(spec, "gamma", spec_float(spec, "gamma", 0.5, what=WHAT, lo=0.0, hi=1.0))
    if not 0.0 < gamma < 1.0:
        raise SpecError(f"{WHAT} {spec}: gamma={spec.params['gamma']} must lie strictly between 0 and 1")
    delta = finite_param(spec, "delta", spec_float(spec, "delta", 2.0, what=WHAT, lo=0.0))
    repeats = spec.params.get("repeats", "ignore")
    if repeats not in REPEATS:
        raise SpecError(f"{WHAT} {spec}: repeats={repeats!r} unknown; expected ignore or count")
    return Unigram(gamma=gamma, delta=delta, repeats=repeats)
