"""The pipeline: generate -> transform -> judge over a plan's items, then grading.

``evalrun run`` (through the pytest plugin), ``evalrun tune`` and ``evalrun sweep`` all run a
plan through :func:`run_stages`, and decide which stored rows to grade with
:func:`is_gradable` (as ``evalrun regrade`` does), so a configuration measured by ``tune`` is
the configuration ``run`` would store. Each stage stores its results before the next reads
them; a stage that finds its work stored reuses it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from evalrun._util.specs import is_none
from evalrun.judges import get_judge
from evalrun.model.generation import Provider
from evalrun.model.providers import model_identity
from evalrun.run.executors import Executor
from evalrun.run.options import RunOptions
from evalrun.run.plan import Item
from evalrun.run.stages.generate import PhaseSummary, ProgressBar, run_generation
from evalrun.run.stages.grade import prepare_items
from evalrun.run.stages.judge import JudgeSummary, run_judges, subjects
from evalrun.run.stages.transform import TransformSummary, run_transforms
from evalrun.store.database import ATTACK_ERROR, GRADER_ERROR, Store

__all__ = ["StagesSummary", "is_gradable", "run_stages"]


def is_gradable(row: Mapping[str, Any] | None) -> bool:
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
    judges: list[tuple[str, str, JudgeSummary]] = field(default_factory=list)

    def lines(self, db: Any, run_id: str) -> list[str]:
        """The lines a run prints about its stages (nothing for a stage that had no work)."""
        out = []
        g, t = self.generation, self.transforms
        if g.generated or g.errors:
            out.append(f"evalrun: {g.generated} results generated, {g.cached} cached,"
                       f" {g.errors} failed calls -> {db} (run {run_id})")
        if t.applied or t.errors:
            out.append(f"evalrun: {t.applied} attacked texts stored, {t.cached} cached, {t.errors} failed")
        for method, model, j in self.judges:
            if j.asked or j.errors:
                out.append(f"evalrun: {j.asked} {method} answers stored ({model}), {j.cached} cached, "
                           f"{j.errors} failed, {j.unparsed} unparsed")
        return out


def run_stages(items: Sequence[Item], store: Store, run_id: str, options: RunOptions,
               factory: Callable[[str], Provider], *, executor: Executor | None = None,
               show_progress: bool = False) -> StagesSummary:
    """Generate, transform and judge everything ``items`` need, then let their graders prepare
    (e.g. batched detection). ``factory`` builds a provider from a model spec."""

    def bar(title: str) -> ProgressBar | None:
        return ProgressBar(f"evalrun: {title}", stream=sys.stderr) if show_progress else None

    key = options.resolved_key()
    generation = run_generation(items, store, run_id, factory, key=key, commit_ms=options.commit_ms,
                                progress=bar("generating"), executor=executor)
    attacked = any(not is_none(it.attack) for it in items)
    transforms = run_transforms(items, store, run_id, options, factory,
                                progress=bar("attacking") if attacked else None, executor=executor)
    summary = StagesSummary(generation, transforms)
    for method, model in options.judges:
        judged = run_judges(store, get_judge(method), model_identity(model),
                            lambda _m, _model=model: factory(_model), run_id=run_id,  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
                            selection=subjects(store, run_id), progress=bar(f"judging ({method})"),
                            executor=executor, spec=model)
        summary.judges.append((method, model, judged))
    prepare_items(items, store, key=key)
    return summary
