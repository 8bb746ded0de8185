"""Grading one stored result: the single path shared by pytest items and ``evalrun regrade``.

Everything comes from the stored row -- the case as run, the raw output, the attack spec
re-applied with its recorded seed, the token ids and provider facts -- so grading a row again
gives the same grade unless the grader changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from evalrun.attacks import parse_attack
from evalrun.grading import Grade, GradeContext
from evalrun.pack import Pack
from evalrun.plan import attack_seed
from evalrun.store import GRADER_ERROR, GradeRecord
from evalrun.specs import is_none


@dataclass(frozen=True)
class GradedRow:
    """A graded row. ``grade`` is None when the grader failed; ``record.error`` says why."""

    grade: Grade | None
    text: str
    record: GradeRecord

    @property
    def error(self) -> str | None:
        return self.record.error


def grader_error(exc: BaseException, case_id: str, key: str | None) -> str:
    """One line naming the exception and the case, with the watermark key blanked (a grader
    gets the key in its context and a message may repeat it)."""
    message = " ".join(str(exc).split()) or "(no message)"
    text = f"grader raised {type(exc).__name__}: {message} (case {case_id})"
    return text.replace(key, "***") if key else text


def grade_row(pack: Pack, row: Mapping[str, Any], *, key: str | None,
              case: Mapping[str, Any] | None = None) -> GradedRow:
    """Grade a stored result row that has an output. ``case`` defaults to the stored case."""
    text = row["raw_output"]
    attack = parse_attack(row["attack"])
    if attack is not None:
        text = attack.apply(text, attack_seed(row["gen_key"], row["attack"]))
    tokens = json.loads(row["output_tokens_json"]) if row["output_tokens_json"] else None
    context = GradeContext(
        # token ids describe the unattacked text only; an attacked text must be re-tokenized
        token_ids=tuple(tokens) if tokens is not None and attack is None else None,
        tokenizer_hash=row["tokenizer_hash"], watermark=row["watermark"],
        key=key if not is_none(row["watermark"]) else None, attack=row["attack"], model=row["model"],
        extra=json.loads(row["extra_json"]) if row["extra_json"] else {},
    )
    attacked = text if attack is not None else None
    try:
        grade = pack.grade(case if case is not None else json.loads(row["case_json"]), text, context)
    except Exception as exc:  # a crash or an invalid Grade is a result of its own, not silence
        error = grader_error(exc, row["case_id"], key)
        record = GradeRecord(result_id=row["result_id"], score=None, label=GRADER_ERROR, reason="",
                             grader_hash=pack.grader_hash, attacked_output=attacked, error=error)
        return GradedRow(grade=None, text=text, record=record)
    record = GradeRecord(result_id=row["result_id"], score=float(grade.score), label=grade.label,
                         reason=grade.reason, grader_hash=pack.grader_hash, attacked_output=attacked)
    return GradedRow(grade=grade, text=text, record=record)
