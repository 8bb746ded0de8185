"""The small public grading API that packs import.

A grader is a pure function ``grade(case, output[, context]) -> Grade``; it must not do I/O,
use randomness, call models or read the clock, so that regrading a store is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Grade:
    """One graded output: a score in [0, 1], a pack-declared label and a human reason."""

    score: float
    label: str
    reason: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.score, (int, float)) or not 0.0 <= float(self.score) <= 1.0:
            raise ValueError(f"Grade.score must be a number in [0, 1], got {self.score!r}")
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"Grade.label must be a non-empty string, got {self.label!r}")


@dataclass(frozen=True)
class GradeContext:
    """Extra, still deterministic, facts a grader may need besides the text.

    Scheme packs need the token ids the model produced, the tokenizer fingerprint, and the
    watermark spec and key of the item. Text-only graders never see this.
    """

    token_ids: tuple[int, ...] | None = None
    tokenizer_hash: str | None = None
    watermark: str = "none"
    key: str | None = field(default=None, repr=False)
    attack: str = "none"
    model: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
