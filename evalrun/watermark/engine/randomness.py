"""Randomness sources of the native schemes (MarkMyWords section VII-C, Fig. 10 R1-R3).

Spec keys (shared by ``kgw``, ``exp``, ``binary`` and ``its``):

* ``randomness=window|minhash|fixed`` (default ``window``).
* ``context=H`` for window/minhash: how many previous tokens seed a position (default 1 for
  ``window``, as Kirchenbauer et al. and MarkMyWords' default; 3 for ``minhash``, which equals
  ``window`` at H=1). The first H generated tokens have no full context in the detector (the
  prompt is not given to it) and are not scored.
* ``key_len=L`` for fixed: length of the key-derived seed sequence (default 256, as in
  Kuditipudi et al.). Generation starts at a random offset (seeded by the ``seed`` given to
  the logits processor) and uses position ``(offset + i) mod L``; the detector searches all
  offsets (align/edit scores).
* ``skip=p`` (default 0): a position is generated without the watermark when a keyed hash of
  its seed falls below p (MarkMyWords section VII-H); the detector knows which positions were
  skipped and leaves them out. The skipped token is sampled from the model's own distribution
  with the provider's randomness, which is what makes generations diverse.

The secret key string becomes a 64-bit word through SHA-256 (:func:`derive_key`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, spec_float, spec_int
from evalrun.kernels import seed_words as kr
from evalrun.kernels.backend import Ops

RANDOMNESS = ("window", "minhash", "fixed")
DEFAULT_CONTEXT = {"window": 1, "minhash": 3}
DEFAULT_KEY_LEN = 256
KEYS = frozenset({"randomness", "context", "key_len", "skip"})
#: sentinel token id for missing context at the very start of a generation
PAD_TOKEN = -1


def derive_key(key: str) -> int:
    """The 64-bit key word of a secret key string (SHA-256, independent of PYTHONHASHSEED)."""
    if not isinstance(key, str) or key == "":
        raise SpecError("watermark key: empty key")
    digest = hashlib.sha256(b"evalrun-watermark-key\x00" + key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


@dataclass(frozen=True)
class Randomness:
    kind: str
    context: int = 0
    key_len: int = 0
    skip: float = 0.0

    @property
    def fixed(self) -> bool:
        return self.kind == "fixed"

    def params(self) -> dict[str, str]:
        out = {"randomness": self.kind, "skip": repr(self.skip)}
        if self.fixed:
            out["key_len"] = str(self.key_len)
        else:
            out["context"] = str(self.context)
        return out

    # ---- detection -----------------------------------------------------------------
    def text_seeds(self, ops: Ops, keys: Any, tokens: Any, local: Any = None) -> tuple[Any, Any]:
        """Seeds of every position of a token sequence ``[n]`` under ``keys`` (a word array
        that broadcasts with ``[n]``, e.g. ``[P, 1]``) and the mask of scored positions
        (full context, not skipped). Window/minhash only.

        ``local`` (int64 ``[n]``, optional) is each position's index inside its own text when
        several texts lie end to end in ``tokens`` (ragged batches): context then never
        reaches back into the previous text, and each position gets the seed it gets when its
        text is scored alone."""
        n = int(tokens.shape[0])
        h = self.context
        cols = []
        for k in range(1, h + 1):
            shifted = ops.concat([ops.i64([PAD_TOKEN] * min(k, n)), tokens[: max(n - k, 0)]], 0)
            shifted = shifted[:n]
            if local is not None:
                shifted = ops.where(local < k, PAD_TOKEN, shifted)
            cols.append(shifted)
        ctx = ops.stack(cols, axis=-1)  # [n, H], newest first
        seeds = self.seeds_from_context(ops, keys, ctx)
        scored = (ops.arange(n) if local is None else local) >= h
        if self.skip > 0:
            scored = scored & ~kr.skip_mask(ops, seeds, self.skip)
        return seeds, scored

    def seeds_from_context(self, ops: Ops, keys: Any, ctx: Any) -> Any:
        if self.kind == "window":
            return kr.window_seeds(ops, keys, ctx)
        return kr.minhash_seeds(ops, keys, ctx)

    def key_sequence(self, ops: Ops, keys: Any) -> tuple[Any, Any]:
        """Fixed randomness: per-position seeds ``[..., L]`` of ``keys[...]`` and the mask of
        key positions that are watermarked (not skipped)."""
        seq = kr.key_sequences(ops, keys, self.key_len)
        if self.skip > 0:
            return seq, ~kr.skip_mask(ops, seq, self.skip)
        return seq, ops.zeros(tuple(seq.shape), "bool") == ops.zeros((1,), "bool")

    # ---- generation ----------------------------------------------------------------
    def generation_seeds(self, ops: Ops, key_word: int, input_ids: Any, step: int,
                         offsets: np.ndarray | None) -> Any:
        """Seeds ``[B]`` for the next token of each row of ``input_ids [B, T]``; ``step`` is
        the number of tokens generated so far; ``offsets`` the fixed-key offsets ``[B]``."""
        key = ops.u64([key_word])
        if self.fixed:
            assert offsets is not None
            idx = ops.i64((offsets + step) % self.key_len)
            seq = kr.key_sequences(ops, key, self.key_len)[0]
            return seq[idx]
        t = int(input_ids.shape[1])
        ids = ops.i64(input_ids[:, max(t - self.context, 0):])  # only the window is read
        t = int(ids.shape[1])
        cols = []
        for k in range(1, self.context + 1):
            cols.append(ids[:, t - k] if t - k >= 0 else ops.i64([PAD_TOKEN] * int(ids.shape[0])))
        return self.seeds_from_context(ops, key, ops.stack(cols, axis=-1))

    def skipped(self, ops: Ops, seeds: Any) -> Any:
        if self.skip <= 0:
            return ops.zeros(tuple(seeds.shape), "bool")
        return kr.skip_mask(ops, seeds, self.skip)


def parse_randomness(spec: Spec, what: str) -> Randomness:
    """Read the randomness keys of ``spec`` (the caller checks unknown keys)."""
    kind = spec.params.get("randomness", "window").strip().lower()
    if kind not in RANDOMNESS:
        raise SpecError(f"{what} {spec}: randomness={kind!r} must be one of {', '.join(RANDOMNESS)}")
    skip = spec_float(spec, "skip", 0.0, what=what, lo=0.0, hi=0.99)
    if kind == "fixed":
        if "context" in spec.params:
            raise SpecError(f"{what} {spec}: key 'context' applies to randomness=window|minhash, "
                            "not fixed (use key_len)")
        key_len = spec_int(spec, "key_len", DEFAULT_KEY_LEN, what=what, lo=1, hi=1 << 20)
        return Randomness(kind, key_len=key_len, skip=skip)
    if "key_len" in spec.params:
        raise SpecError(f"{what} {spec}: key 'key_len' applies to randomness=fixed only")
    context = spec_int(spec, "context", DEFAULT_CONTEXT[kind], what=what, lo=1, hi=64)
    return Randomness(kind, context=context, skip=skip)
