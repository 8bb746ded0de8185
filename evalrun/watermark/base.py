"""The contract every watermark scheme implements.

A scheme is built from a parsed spec (``kgw:gamma=0.25,delta=2``); the secret key is passed
to each call and never stored on the object, so a scheme can be logged or stored safely.
Generation goes through :meth:`WatermarkScheme.logits_processor`; detection through
:meth:`WatermarkScheme.detect` and :meth:`WatermarkScheme.prefix_p_values`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, TypeGuard

import numpy as np

from evalrun._util.errors import EvalrunError, SpecError
from evalrun._util.specs import Spec


def finite_param(spec: Spec, key: str, value: float, *, what: str = "--watermark") -> float:
    """``value`` (read from ``spec.params[key]``) if finite, else a :class:`SpecError` naming
    the key (``spec_float`` checks ranges, which ``nan`` slips through)."""
    if not math.isfinite(value):
        raise SpecError(f"{what} {spec}: {key}={spec.params.get(key)!r} is not a finite number")
    return value


def check_temperature(temperature: float) -> None:
    """ValueError unless a logits processor's ``temperature`` is finite and >= 0 (0: greedy)."""
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be finite and >= 0, got {temperature}")


class SchemeProcessor:
    """What a scheme's own logits processor starts from: a checked temperature and vocabulary
    size, the scheme, and a repr that names its spec and never the key."""

    def __init__(self, scheme: "WatermarkScheme", vocab_size: int, temperature: float) -> None:
        check_temperature(temperature)
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        self.scheme = scheme
        self.vocab_size = int(vocab_size)
        self.temperature = float(temperature)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.scheme.spec}, temperature={self.temperature})"

    @staticmethod
    def torch_inputs(input_ids: Any, scores: Any) -> tuple[Any, np.ndarray, bool]:
        """``(scores as a torch tensor, input_ids as an int64 numpy array, whether the scores
        came as numpy)``: processors are called with torch tensors by transformers and vLLM and
        with numpy arrays by some tests and providers."""
        import torch

        as_numpy = isinstance(scores, np.ndarray)
        raw = torch.from_numpy(np.asarray(scores)) if as_numpy else scores
        ids = np.asarray(input_ids if isinstance(input_ids, np.ndarray)
                         else input_ids.detach().cpu().numpy(), dtype=np.int64)
        return raw, ids, as_numpy


def token_id_array(token_ids: Sequence[int], vocab_size: int) -> np.ndarray:
    """``token_ids`` as a 1-D int64 array; ValueError unless they are integers in
    ``[0, vocab_size)``."""
    ids = np.asarray(token_ids.tolist() if hasattr(token_ids, "tolist") else list(token_ids))
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError("token_ids must be a flat sequence of integers")
    ids = ids.astype(np.int64)
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"token ids must lie in [0, {vocab_size}) for vocab_size={vocab_size}")
    return ids


def checked_int64_arrays(arrays: list[Any], vocab_size: int) -> TypeGuard[list[np.ndarray]]:
    """Whether every input is already a 1-D int64 numpy array of ids in ``[0, vocab_size)``
    (what ``evalrun detect --tokens`` reads): one check over all of them replaces a
    conversion and a check per text."""
    if not arrays or not all(type(a) is np.ndarray and a.ndim == 1 and a.dtype == np.int64
                             for a in arrays):
        return False
    flat = np.concatenate(arrays)
    return not flat.size or (int(flat.min()) >= 0 and int(flat.max()) < vocab_size)


def token_id_arrays(sequences: Sequence[Sequence[int]], vocab_size: int) -> list[np.ndarray]:
    """:func:`token_id_array` of every sequence (checked in one pass where they are int64
    arrays already)."""
    seqs = list(sequences)
    if checked_int64_arrays(seqs, vocab_size):
        return seqs
    return [token_id_array(s, vocab_size) for s in seqs]


class TokenLogits(Protocol):
    """A model's next-token logits on texts, for schemes whose detector reads the model
    (SWEET's and EWD's entropies, Unbiased's likelihood ratios; ``needs_model``).

    Called with texts of ``n >= 1`` token ids each, it returns per text a float32 array of
    shape ``[n - 1, V]``: row ``t`` is the logits the model gives after reading
    ``ids[: t + 1]`` -- the text alone, no prompt and no special tokens, as MarkLLM's
    detectors feed it -- so row ``t`` predicts ``ids[t + 1]``. Each text is scored by itself,
    so a row never depends on what else is in the batch (results are reproducible from the
    store bit for bit)."""

    #: what the logits come from, for messages (``embedded``, ``hf:/path``)
    name: str

    def __call__(self, texts: Sequence[np.ndarray]) -> list[np.ndarray]: ...


class ModelRequired(EvalrunError, ValueError):
    """Detection of a ``needs_model`` scheme was asked for without the model's logits; a
    ValueError too, so a grade stage records it as the item's grader error."""


def require_logits(scheme: "WatermarkScheme", logits: "TokenLogits | None",
                   why: str) -> "TokenLogits":
    """``logits``, or :class:`ModelRequired` naming the scheme and what it reads the model for."""
    if logits is None:
        raise ModelRequired(f"--watermark {scheme.spec}: detection needs the model ({why}): pass "
                            "evalrun detect --model SPEC, the model that generated the text")
    return logits


def checked_logits(scheme: "WatermarkScheme", logits: "TokenLogits", ids: np.ndarray,
                   vocab_size: int) -> np.ndarray:
    """The ``[len(ids) - 1, vocab_size]`` float32 logits of one text (an empty ``[0, V]``
    array for texts under two tokens); :class:`ModelRequired` when the model's logit width
    is not the detector's vocabulary size."""
    if len(ids) < 2:
        return np.zeros((0, vocab_size), dtype=np.float32)
    [rows] = logits([ids])
    rows = np.asarray(rows, dtype=np.float32)
    if rows.shape != (len(ids) - 1, vocab_size):
        raise ModelRequired(f"--watermark {scheme.spec}: --model {logits.name} gives logits of shape "
                            f"{tuple(rows.shape)} for {len(ids)} ids; expected ({len(ids) - 1}, "
                            f"{vocab_size}) (--vocab-size must be the model's logit width)")
    return rows


@dataclass(frozen=True)
class Detection:
    """Detector verdict for one token sequence (the JSON ``evalrun detect`` prints)."""

    num_tokens_scored: int
    score: float
    p_value: float
    num_green_tokens: int | None = None
    z_score: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "num_tokens_scored": self.num_tokens_scored,
            "score": self.score,
            "p_value": self.p_value,
        }
        if self.num_green_tokens is not None:
            out["num_green_tokens"] = self.num_green_tokens
        if self.z_score is not None:
            out["z_score"] = self.z_score
        out.update(self.extra)
        return out


class WatermarkScheme(ABC):
    """One point of the design space (randomness x sampling x score) plus its parameters."""

    #: canonical spec (sorted keys, defaults filled in) -- safe to store, holds no secret
    spec: Spec
    #: True for green-list schemes (their detections carry num_green_tokens and z_score)
    green_list: bool = False
    #: True for schemes whose detector reads the model's logits on the text: their ``detect``,
    #: ``prefix_p_values`` and ``*_many`` take ``logits=`` (a :class:`TokenLogits`) and raise
    #: :class:`ModelRequired` without it
    needs_model: bool = False

    @property
    def shared_context(self) -> int | None:
        """How many trailing tokens of ``input_ids`` the processor reads, when one processor
        may serve several generations at once (same key and temperature); None when it may not.

        A shared processor is called with the left-padded ``[G, T]`` histories of its rows,
        built with the first row's ``seed``, and its batch shrinks as rows finish. That is
        only exact for processors that ignore ``seed``, keep no per-generation state, and read
        no further back than this (providers check prompt lengths against it). The default is
        not to share."""
        return None

    def __repr__(self) -> str:  # the canonical spec holds no secret
        return f"{type(self).__name__}({self.spec})"

    def check_key(self, key: str) -> None:
        """Validate the secret ``key`` before any generation or detection, so a key this
        scheme cannot use fails at option checking instead of mid-run. Raises
        :class:`~evalrun._util.errors.SpecError` naming ``--key``; the message never contains the
        key. The default accepts any non-empty string."""
        if not isinstance(key, str) or key == "":
            scheme = getattr(self, "spec", None) or type(self).__name__
            raise SpecError(f"--key: the watermark key for {scheme} must be a non-empty string")

    @abstractmethod
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> Any:
        """A batched transformers-compatible processor ``(input_ids [B,T], scores [B,V]) ->
        scores``. The provider samples from what it returns at temperature 1 (or takes the
        argmax when ``temperature == 0``); schemes that replace sampling (exp, binary, its)
        return scores that are -inf everywhere but the chosen token. ``seed`` seeds any
        per-generation randomness that is not keyed (e.g. the fixed-key offset)."""

    @abstractmethod
    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int) -> Detection:
        """Score a whole sequence of generated token ids (prompt excluded)."""

    @abstractmethod
    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        """p-value of every prefix (entry i scores ``token_ids[: i + 1]``); watermark size is
        the length of the shortest prefix whose p-value falls under the threshold."""

    # ---- batched detection ----------------------------------------------------------------
    # Every scheme has these: the default loops over the single-text methods, schemes with a
    # vectorised path (the native engine, reference-compatible kgw) override them. Either
    # way entry i equals ``detect(token_id_arrays[i], ...)`` exactly, and a text that the
    # single-text method rejects makes the whole call raise the same error.
    def detect_many(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                    vocab_size: int, **kwargs: Any) -> list[Detection]:
        """:meth:`detect` of every token id sequence in ``token_id_arrays``, in order."""
        return [self.detect(ids, key, vocab_size, **kwargs) for ids in token_id_arrays]

    def prefix_p_values_many(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                             vocab_size: int, **kwargs: Any) -> list[np.ndarray]:
        """:meth:`prefix_p_values` of every sequence in ``token_id_arrays``, in order."""
        return [self.prefix_p_values(ids, key, vocab_size, **kwargs) for ids in token_id_arrays]


class BatchedScheme(WatermarkScheme):
    """A scheme whose detector scores many texts in one vectorised pass: it implements
    :meth:`detect_batch` and :meth:`prefix_batch`, and the single-text and ``*_many`` methods
    all go through them (so entry i of a batch equals the text's own detection by
    construction)."""

    @abstractmethod
    def detect_batch(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                     vocab_size: int) -> list[Detection]:
        """:meth:`detect` of every text, from one pass over all of them."""

    @abstractmethod
    def prefix_batch(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                     vocab_size: int) -> list[np.ndarray]:
        """:meth:`prefix_p_values` of every text, from one pass over all of them."""

    def detect(self, token_ids: Sequence[int], key: str, vocab_size: int) -> Detection:
        return self.detect_batch([token_ids], key, vocab_size)[0]

    def prefix_p_values(self, token_ids: Sequence[int], key: str, vocab_size: int) -> np.ndarray:
        return self.prefix_batch([token_ids], key, vocab_size)[0]

    def detect_many(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                    vocab_size: int, **kwargs: Any) -> list[Detection]:
        _no_options(kwargs)
        return self.detect_batch(token_id_arrays, key, vocab_size)

    def prefix_p_values_many(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                             vocab_size: int, **kwargs: Any) -> list[np.ndarray]:
        _no_options(kwargs)
        return self.prefix_batch(token_id_arrays, key, vocab_size)


def _no_options(kwargs: dict[str, Any]) -> None:
    if kwargs:  # e.g. backend=, which only the native engine takes
        raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
