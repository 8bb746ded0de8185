"""Re-run the current graders on stored outputs: no model call, exact and repeatable.

Each row is graded from what the store holds -- the case as it was run (``case_json``), the
raw output, the attack spec re-applied with its recorded seed -- so a changed grader is the
only thing that can change a grade. The new grader hash is recorded with each grade.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from evalrun._util.errors import EvalrunError, PackError
from evalrun.pack.loading import Pack, load_pack, resolve_pack
from evalrun.run.pipeline import is_gradable
from evalrun.run.stages.grade import grade_into, prepare_stored
from evalrun.store.commit_batch import CommitBatch
from evalrun.store.database import Store


@dataclass
class RegradeSummary:
    regraded: int = 0
    changed: int = 0
    skipped_errors: int = 0
    grader_errors: list[str] = field(default_factory=list)
    missing_packs: dict[str, str] = field(default_factory=dict)
    changes: list[tuple[str, str, str, str | None, str]] = field(default_factory=list)


def regrade(db: str | Path, *, run_id: str | None = None, packs_dirs: Sequence[str] = (),
            key: str | None = None) -> RegradeSummary:
    summary = RegradeSummary()
    if not Path(db).exists():
        raise EvalrunError(f"--db {db}: no such database")
    store = Store(db, what="--db")
    if run_id is not None and run_id not in store.run_ids():
        raise EvalrunError(f"--run {run_id}: not in {db}; runs: {', '.join(store.run_ids())}")
    packs: dict[str, Pack | None] = {}
    try:
        rows = []
        for row in store.results(run_id=run_id):
            if not is_gradable(row):
                summary.skipped_errors += 1
                continue
            name = row["pack"]
            if name not in packs:
                try:
                    packs[name] = load_pack(resolve_pack(name, packs_dirs))
                except PackError as exc:
                    packs[name] = None
                    summary.missing_packs[name] = str(exc)
            if packs[name] is not None:
                rows.append(row)
        for name, pack in packs.items():
            if pack is not None and pack.prepares:  # e.g. batched detection
                prepare_stored(pack, store, [(row, None) for row in rows if row["pack"] == name], key=key)
        with CommitBatch(store.record_grades) as grades:  # regrading again redoes a lost batch
            for row in rows:
                pack = packs[row["pack"]]
                assert pack is not None
                graded = grade_into(grades, pack, store, row, key=key)
                new = graded.record
                if new.label != row["label"] or new.score != row["score"]:
                    summary.changed += 1
                    summary.changes.append((row["pack"], row["case_id"], row["model"], row["label"], new.label))
                if graded.error:
                    summary.grader_errors.append(graded.error)
                summary.regraded += 1
    finally:
        store.close()
    return summary
