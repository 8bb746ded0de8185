"""The pipeline: generate -> transform -> judge over a plan's items, then grading.

:func:`execute_run` is the whole of it in one process (``tune`` and ``sweep`` measure with it);
the pytest plugin runs :func:`run_stages` and grades each item as a test.

``evalrun run`` (through the pytest plugin), ``evalrun tune`` and ``evalrun sweep`` all run a
plan through :func:`run_stages`, and decide which stored rows to grade with
:func:`is_gradable` (as ``evalrun regrade`` does), so a configuration measured by ``tune`` is
the configuration ``run`` would store. Each stage stores its results before the next reads
them; a stage that finds its work stored reuses it.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeGuard

from evalrun._util.provenance import collect
from evalrun._util.specs import is_none
from evalrun.judges import get_judge
from evalrun.metrics.judgements import with_judgements
from evalrun.model.generation import Provider
from evalrun.model.providers import ModelSpec
from evalrun.model.providers import make_provider as default_factory
from evalrun.pack.loading import Pack
from evalrun.run.executors import Executor
from evalrun.run.options import RunOptions
from evalrun.run.plan import Item, make_items
from evalrun.run.stages.generate import PhaseSummary, ProgressBar, run_generation
from evalrun.run.stages.grade import StoredRow, grade_into, prepare_items
from evalrun.run.stages.judge import JudgeSummary, run_judges, subjects
from evalrun.run.stages.transform import TransformSummary, run_transforms
from evalrun.store.commit_batch import CommitBatch
from evalrun.store.database import ATTACK_ERROR, GRADER_ERROR, Store

__all__ = ["StagesSummary", "StoredRun", "execute_run", "is_gradable", "run_stages"]


def is_gradable(row: StoredRow | None) -> TypeGuard[StoredRow]:
    """Whether a stored result can be graded: it has an output, and any error on it is one
    grading itself recorded (a failed grader or attack), not a failed model call."""
    if row is None or row["raw_output"] is None:
        return False
    return not row["error"] or row["label"] in (GRADER_ERROR, ATTACK_ERROR)


@dataclass
class StagesSummary:
    """What the stages did for one plan: counts of each, for the closing lines."""

    generation: PhaseSummary
    transforms: TransformSummary
    #: (method, judge model, its summary), one per ``--judge``
    judges: list[tuple[str, ModelSpec, JudgeSummary]] = field(default_factory=list)

    def lines(self, db: Any, run_id: str) -> list[str]:
        """The lines a run prints about its stages (nothing for a stage that had no work)."""
        out = []
        g, t = self.generation, self.transforms
        if g.generated or g.errors:
            out.append(f"evalrun: {g.generated} results generated, {g.cached} cached, from {g.texts} new texts"
                       f" (model calls), {g.errors} failed -> {db} (run {run_id})")
        if t.applied or t.errors:
            out.append(f"evalrun: {t.applied} attacked texts stored, {t.cached} cached, {t.errors} failed")
        for method, model, j in self.judges:
            if j.asked or j.errors:
                out.append(f"evalrun: {j.asked} {method} answers stored ({model}), {j.cached} cached, "
                           f"{j.errors} failed, {j.unparsed} unparsed")
        return out


def run_stages(items: Sequence[Item], store: Store, run_id: str, options: RunOptions,
               factory: Callable[[ModelSpec], Provider], *, executor: Executor | None = None,
               show_progress: bool = False) -> StagesSummary:
    """Generate, transform and judge everything ``items`` need, then let their graders prepare
    (e.g. batched detection). ``factory`` builds a provider from a model spec."""
    def bar(title: str, unit: str) -> ProgressBar | None:
        """A stage's bar, counting in the unit of its line in :meth:`StagesSummary.lines`."""
        return ProgressBar(f"evalrun: {title}", stream=sys.stderr, unit=unit) if show_progress else None

    key = options.resolved_key()
    generation = run_generation(items, store, run_id, factory, key=key, commit_ms=options.commit_ms,
                                progress=bar("generating", "texts"), executor=executor)
    attacked = any(not is_none(it.attack) for it in items)
    transforms = run_transforms(items, store, run_id, options, factory,
                                progress=bar("attacking", "attacked texts") if attacked else None, executor=executor)
    summary = StagesSummary(generation, transforms)
    for method, model in options.judges:
        judged = run_judges(store, get_judge(method), model, factory, run_id=run_id,
                            selection=subjects(store, run_id), progress=bar(f"judging ({method})", f"{method} answers"),
                            executor=executor)
        summary.judges.append((method, model, judged))
    prepare_items(items, store, key=key, timeout=options.grader_timeout)
    return summary


@dataclass
class StoredRun:
    """What :func:`execute_run` did: the run's id and its results, graded, with judgements."""

    run_id: str
    rows: list[dict[str, Any]]
    generated: int
    cached: int
    #: items without a grade (failed calls, attacks or graders)
    errors: int
    seconds: float


def execute_run(store: Store, pack: Pack, options: RunOptions, *, argv: Sequence[str] = (),
                make_provider: Callable[[ModelSpec], Provider] | None = None) -> StoredRun:
    """One run of ``pack`` under ``options`` in this process: :func:`run_stages`, then every
    gradable item graded, each stage reusing what the store already holds. ``tune`` and
    ``sweep`` measure a configuration with it."""
    key = options.resolved_key()
    items = list(make_items(pack, options))
    run_id = uuid.uuid4().hex
    start = time.perf_counter()
    store.start_run(run_id, collect(list(argv)), options.as_json())
    factory = make_provider or (lambda m: default_factory(m, base_url=options.base_url,
                                                          concurrency=options.concurrency))
    errors = 0
    try:
        summary = run_stages(items, store, run_id, options, factory).generation
        with CommitBatch(store.record_grades) as grades:
            for item in items:
                row = store.result_by_key(item.item_key)
                if not is_gradable(row):
                    errors += 1
                    continue
                graded = grade_into(grades, pack, store, row, key=key, case=item.case.data,
                                    timeout=options.grader_timeout)
                errors += graded.grade is None
        rows = with_judgements(store, [r for r in (store.result_by_key(it.item_key) for it in items) if r is not None])
    finally:
        store.finish_run(run_id)
    return StoredRun(run_id=run_id, rows=rows, generated=summary.generated, cached=summary.cached, errors=errors,
                     seconds=round(time.perf_counter() - start, 3))
