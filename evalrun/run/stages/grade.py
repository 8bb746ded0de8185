"""Grading one stored result: the single path shared by pytest items and ``evalrun regrade``.

Everything comes from the store -- the case as run, the raw output, the attacked text and its
token ids from the transform stage, the judge answers about the result (parsed again here, a
pure function), the watermark specs the store holds for the pack and model, the case's
reference answer as the transform stage tokenized it -- so grading a
row again gives the same grade unless the grader changed. Nothing here calls a model.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from evalrun._util.scrub import scrub
from evalrun._util.specs import is_none
from evalrun.metrics.judgements import read_judgements
from evalrun.pack.grade import REFERENCE_TRANSFORM, Grade, GradeContext, stored_reference_tokens, stored_tokens
from evalrun.pack.loading import Pack
from evalrun.pack.time_limit import DEFAULT_GRADER_TIMEOUT, TimeLimitExceeded, call_with_limit
from evalrun.store.commit_batch import CommitBatch
from evalrun.store.database import ATTACK_ERROR, GRADER_ERROR, GradeRecord, Store

#: A stored result row: a :class:`sqlite3.Row` from the store, or a mapping with its columns.
StoredRow = Mapping[str, Any] | sqlite3.Row


@dataclass(frozen=True)
class GradedRow:
    """A graded row. ``grade`` is None when grading failed; ``record.error`` says why."""

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
    text = (f"grader {message} (case {case_id})" if isinstance(exc, TimeLimitExceeded)
            else f"grader raised {type(exc).__name__}: {message} (case {case_id})")
    return scrub(text, key)


def _repeats(key: str, value: Any) -> bool:
    """Whether ``key`` appears in a string of ``value`` (or is one of its numbers). A short key
    must stand as a word of its own, so that key 42 is not found in a p-value of 0.0042."""
    if isinstance(value, str):
        if len(key) >= 6:
            return key in value
        return re.search(rf"(?<![0-9A-Za-z]){re.escape(key)}(?![0-9A-Za-z])", value) is not None
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return str(value) == key
    if isinstance(value, Mapping):
        return any(_repeats(key, k) or _repeats(key, v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_repeats(key, v) for v in value)
    return False


def grade_row(pack: Pack, row: StoredRow, *, key: str | None, case: Mapping[str, Any] | None = None,
              transform: Mapping[str, Any] | None = None, judgements: Sequence[Mapping[str, Any]] = (),
              run_watermarks: Sequence[str] = (), references: Sequence[Mapping[str, Any]] = (),
              timeout: float | None = DEFAULT_GRADER_TIMEOUT) -> GradedRow:
    """Grade a stored result row that has an output. ``case`` defaults to the stored case; the
    grader is stopped after ``timeout`` seconds (:mod:`evalrun.pack.time_limit`).
    ``references`` are the stored reference answers of its generation
    (:data:`~evalrun.pack.grade.REFERENCE_TRANSFORM` transforms)."""
    attacked = not is_none(row["attack"])
    text = row["raw_output"]
    error = _attack_error(row, transform)
    if error is not None:
        record = GradeRecord(result_id=row["result_id"], score=None, label=ATTACK_ERROR, reason="",
                             grader_hash=pack.grader_hash, attacked_output=None, error=error)
        return GradedRow(grade=None, text=text, record=record)
    if attacked:
        text = transform["text"]  # type: ignore[index]
    context = (_context(pack, row, key=key, transform=transform, judgements=judgements,
                        run_watermarks=run_watermarks, references=references)
               if pack.grader_reads_context else None)
    attacked_output = text if attacked else None
    try:
        grade = call_with_limit(pack.grade, timeout, case if case is not None else json.loads(row["case_json"]),
                                text, context)
        metadata = grade.metadata_json() if grade.metadata else None
        if key and _repeats(key, [grade.reason, grade.metadata]):
            raise ValueError("the grade repeats the watermark key in its reason or metadata; it is never stored")
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a crash, a timeout, sys.exit or an invalid Grade: a result of its own
        record = GradeRecord(result_id=row["result_id"], score=None, label=GRADER_ERROR, reason="",
                             grader_hash=pack.grader_hash, attacked_output=attacked_output,
                             error=grader_error(exc, row["case_id"], key))
        return GradedRow(grade=None, text=text, record=record)
    record = GradeRecord(result_id=row["result_id"], score=float(grade.score), label=grade.label,
                         reason=grade.reason, grader_hash=pack.grader_hash, attacked_output=attacked_output,
                         metadata_json=metadata)
    return GradedRow(grade=grade, text=text, record=record)


def _attack_error(row: StoredRow, transform: Mapping[str, Any] | None) -> str | None:
    """Why an attacked row cannot be graded (its attack was not applied, or failed), or None."""
    if is_none(row["attack"]):
        return None
    if transform is None:
        return f"attack {row['attack']} has not been applied: run the command again"
    if transform["error"] is not None:
        return f"attack failed: {transform['error']}"
    return None


def _context(pack: Pack, row: StoredRow, *, key: str | None, transform: Mapping[str, Any] | None,
             judgements: Sequence[Mapping[str, Any]], run_watermarks: Sequence[str],
             references: Sequence[Mapping[str, Any]] = ()) -> GradeContext:
    """What a context-reading grader sees besides the text: token ids (of the attacked text
    when there is one), judge answers, the run's watermarks, the pack's settings, and the
    case's reference answer in ids of the same tokenizer when the store holds them."""
    tokens = stored_tokens(row, transform)
    return GradeContext(
        token_ids=tokens.token_ids, tokenizer_hash=tokens.tokenizer_hash,
        watermark=row["watermark"], key=key, attack=row["attack"], model=row["model"],
        extra=tokens.extra, token_note=tokens.note,
        judgements=read_judgements(judgements), run_watermarks=tuple(run_watermarks), settings=pack.meta,
        reference_token_ids=stored_reference_tokens(references, tokens),
    )


def _stored_facts(pack: Pack, store: Store, row: StoredRow) -> dict[str, Any]:
    """What the store holds about ``row`` besides the row, as far as its grader reads it: its
    transform, judgements, the watermarks of its pack and model, and (watermarked rows) the
    stored reference answers of its generation."""
    transform = None
    if row["transform_key"]:
        transform = store.transforms([row["transform_key"]]).get(row["transform_key"])
    reads = pack.grader_reads_context
    marked = reads and not is_none(row["watermark"])
    return {"transform": transform,
            "judgements": store.judgements_for(row["item_key"]) if reads else (),
            "run_watermarks": store.watermarks_of(row["pack"], row["model"]) if reads else (),
            "references": list(store.select_in("SELECT * FROM transforms", "gen_key", [row["gen_key"]],
                                               also="attack = ?", params=[REFERENCE_TRANSFORM])) if marked else ()}


def grade_stored(pack: Pack, store: Store, row: StoredRow, *, key: str | None,
                 case: Mapping[str, Any] | None = None, timeout: float | None = DEFAULT_GRADER_TIMEOUT) -> GradedRow:
    """Grade ``row`` with everything the store holds about it (that its grader reads)."""
    return grade_row(pack, row, key=key, case=case, timeout=timeout, **_stored_facts(pack, store, row))


def prepare_stored(pack: Pack, store: Store,
                   rows: Sequence[tuple[StoredRow, Mapping[str, Any] | None]], *,
                   key: str | None, timeout: float | None = DEFAULT_GRADER_TIMEOUT) -> None:
    """Hand the grader of ``pack`` the inputs of the stored ``(row, case)`` pairs about to be
    graded (:meth:`Pack.prepare`), so that it can work in bulk. Rows without an output or
    that cannot be graded are left out; a grader whose ``prepare`` fails is graded item by
    item as without it, where any real problem is reported with its item."""
    batch = []
    for row, case in rows:
        facts = _stored_facts(pack, store, row)
        if row["raw_output"] is None or _attack_error(row, facts["transform"]) is not None:
            continue
        text = row["raw_output"] if is_none(row["attack"]) else facts["transform"]["text"]
        context = _context(pack, row, key=key, **facts)
        batch.append((case if case is not None else json.loads(row["case_json"]), text, context))
    if batch:
        try:
            call_with_limit(pack.prepare, timeout * len(batch) if timeout else None, batch)
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001 - the item-by-item grading reports it, per item (timeouts too)
            pass


def prepare_items(items: Sequence[Any], store: Store, *, key: str | None,
                  timeout: float | None = DEFAULT_GRADER_TIMEOUT) -> None:
    """:func:`prepare_stored` for the plan items about to be graded, pack by pack (only for
    packs whose grader has a ``prepare``)."""
    by_pack: dict[int, tuple[Pack, list[tuple[StoredRow, Mapping[str, Any] | None]]]] = {}
    for item in items:
        if not item.pack.prepares:
            continue
        row = store.result_by_key(item.item_key)
        if row is not None:
            by_pack.setdefault(id(item.pack), (item.pack, []))[1].append((row, item.case.data))
    for pack, rows in by_pack.values():
        prepare_stored(pack, store, rows, key=key, timeout=timeout)


def grade_into(grades: CommitBatch[GradeRecord], pack: Pack, store: Store, row: StoredRow, *,
               key: str | None, case: Mapping[str, Any] | None = None,
               timeout: float | None = DEFAULT_GRADER_TIMEOUT) -> GradedRow:
    """:func:`grade_stored`, its record queued on ``grades`` with what grading took: grades
    are committed in batches holding at most that much work, which a rerun redoes."""
    start = time.perf_counter()
    graded = grade_stored(pack, store, row, key=key, case=case, timeout=timeout)
    grades.add([graded.record], (time.perf_counter() - start) * 1000.0)
    return graded
