"""The small public grading API that packs import.

A grader is a pure function ``grade(case, output[, context]) -> Grade``; it must not do I/O,
use randomness, call models or read the clock, so that regrading a store is exact.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

#: largest metadata a grade may carry, as canonical JSON (evidence, not a second output)
MAX_METADATA_BYTES = 64 * 1024


def _check_json(value: Any, where: str) -> None:
    """JSON values only: strings, finite numbers, booleans, None, lists and string-keyed maps."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"Grade.metadata{where} is {value!r}: JSON has no NaN or infinity (use None)")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_json(v, f"{where}[{i}]")
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"Grade.metadata{where} has a non-string key {k!r}")
            _check_json(v, f"{where}.{k}")
        return
    raise ValueError(f"Grade.metadata{where} is a {type(value).__name__}, not a JSON value")


@dataclass(frozen=True)
class Grade:
    """One graded output: a score in [0, 1], a pack-declared label, a human reason, and
    evidence in ``metadata`` (a p-value, a z-score, tokens scored, a judge's verdict: JSON
    values, stored and exported with the grade)."""

    score: float
    label: str
    reason: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.score, (int, float)) or not 0.0 <= float(self.score) <= 1.0:
            raise ValueError(f"Grade.score must be a number in [0, 1], got {self.score!r}")
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"Grade.label must be a non-empty string, got {self.label!r}")
        if not isinstance(self.metadata, Mapping):
            raise ValueError(f"Grade.metadata must be a mapping, got {type(self.metadata).__name__}")
        if not self.metadata:  # most grades: nothing to check, nothing to serialize
            return
        _check_json(self.metadata, "")
        size = len(self.metadata_json().encode())
        if size > MAX_METADATA_BYTES:
            raise ValueError(f"Grade.metadata is {size:,} bytes as JSON; the limit is {MAX_METADATA_BYTES:,}")

    def metadata_json(self) -> str:
        """Canonical JSON of the metadata (sorted keys), as stored."""
        return json.dumps(self.metadata, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Judgement:
    """A stored judge answer about this result: the raw text, its parse (pure, redone on
    regrade), and where this result stood among the judged subjects (0 = first)."""

    judge: str
    method: str
    raw: str | None
    position: int
    parsed: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class StoredTokens:
    """The token ids a stored result is graded on, and what they index.

    After an attack (or for an API output given ids by the run's ``--tokenizer``), the ids are
    its transform's; else the output's own. ``vocab_size`` is the vocabulary they index: the
    transform's when its ids came from the run's tokenizer, else the generating model's.
    ``note`` says why there are no ids."""

    token_ids: tuple[int, ...] | None
    tokenizer_hash: str | None
    note: str | None
    vocab_size: int | None
    #: the generation's extra fields, with ``vocab_size`` as above
    extra: Mapping[str, Any]


def stored_tokens(row: Mapping[str, Any] | sqlite3.Row, transform: Mapping[str, Any] | sqlite3.Row | None) -> StoredTokens:
    """:class:`StoredTokens` of a ``results`` row and its ``transforms`` row (or None)."""
    extra = json.loads(row["extra_json"]) if row["extra_json"] else {}
    if transform is not None and transform["error"] is None:
        tokens, tokenizer_hash, note = transform["token_ids_json"], transform["tokenizer_hash"], transform["token_note"]
        ids_extra = json.loads(transform["extra_json"]) if transform["extra_json"] else {}
        if "vocab_size" in ids_extra:
            extra = {**extra, "vocab_size": ids_extra["vocab_size"]}
    else:
        tokens, tokenizer_hash = row["output_tokens_json"], row["tokenizer_hash"]
        note = None if tokens else (f"model {row['model']} stored no token ids (an API or replay model): pass "
                                    "--tokenizer PATH to tokenize its outputs")
    vocab = extra.get("vocab_size")
    return StoredTokens(token_ids=tuple(json.loads(tokens)) if tokens else None, tokenizer_hash=tokenizer_hash,
                        note=note, vocab_size=vocab if isinstance(vocab, int) else None, extra=extra)


#: the case field holding a case's human reference answer (WaterBench's "human generation"):
#: detection graders measure true negatives on it, tokenized like the case's outputs
REFERENCE_FIELD = "reference"
#: the ``transforms.attack`` value of a stored reference answer: the transform stage stores
#: the case's reference, tokenized with the generating model's tokenizer, under the
#: generation's ``gen_key`` (no attack spec can be this: spec names have no ``<``)
REFERENCE_TRANSFORM = "<reference>"


def reference_text(case: Mapping[str, Any]) -> str | None:
    """The case's reference answer (:data:`REFERENCE_FIELD`), or None when it has none."""
    text = case.get(REFERENCE_FIELD)
    return text if isinstance(text, str) and text.strip() else None


def stored_reference_tokens(references: Sequence[Mapping[str, Any] | sqlite3.Row],
                            tokens: StoredTokens) -> tuple[int, ...] | None:
    """The token ids of the stored reference answer (a ``transforms`` row of
    :data:`REFERENCE_TRANSFORM`) that were made by the tokenizer of ``tokens`` -- the ids the
    output is graded on -- and index the same vocabulary; None when no stored one does (an
    older store, a model without a tokenizer, another ``--tokenizer``), so that a verdict on
    the reference is always comparable with the output's."""
    if tokens.tokenizer_hash is None or tokens.vocab_size is None:
        return None
    for ref in references:
        if ref["error"] is not None or not ref["token_ids_json"] or ref["tokenizer_hash"] != tokens.tokenizer_hash:
            continue
        vocab = (json.loads(ref["extra_json"]) if ref["extra_json"] else {}).get("vocab_size", tokens.vocab_size)
        if vocab == tokens.vocab_size:
            return tuple(json.loads(ref["token_ids_json"]))
    return None


@dataclass(frozen=True)
class GradeContext:
    """Extra, still deterministic, facts a grader may need besides the text.

    Scheme packs need the token ids of the text they grade (after any attack, re-tokenized
    with the generating model's tokenizer), the tokenizer fingerprint, and the watermark spec
    and key of the item; ``token_note`` says why token ids are missing when they are.
    Quality packs read ``judgements``. Text-only graders never see this.
    """

    token_ids: tuple[int, ...] | None = None
    tokenizer_hash: str | None = None
    watermark: str = "none"
    key: str | None = field(default=None, repr=False)
    attack: str = "none"
    model: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    token_note: str | None = None
    judgements: tuple[Judgement, ...] = ()
    #: the watermark specs the store holds for this result's pack and model (the
    #: false-positive side: unwatermarked outputs are detected under each of them)
    run_watermarks: tuple[str, ...] = ()
    #: the pack's pack.toml (e.g. its ``detection_threshold``): part of the grader's hash
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: the case's reference answer (:func:`reference_text`) as token ids of the tokenizer that
    #: made ``token_ids`` (None without a reference, or when the store holds none for it): a
    #: detection grader detects it too, the true-negative side WaterBench measures
    reference_token_ids: tuple[int, ...] | None = None
