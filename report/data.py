"""The read side: load a run's results from the store into plain records the report uses."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from evalrun.metrics.benchmark import is_detection
from evalrun.metrics.judgements import with_judgements
from evalrun.metrics.quality_records import distinguish_analyses, quality_records, sweep_analyses, tune_analyses
from evalrun.report.export import open_store, select_rows
from evalrun.store.database import ATTACK_ERROR, GRADER_ERROR
from evalrun.watermark.verdict import DETECTED, NOT_DETECTED


@dataclass(frozen=True)
class PackView:
    """How the report presents one pack. Packs not listed in :data:`PACK_VIEWS` get a
    generic view built from their data (labels seen, ``group_value``)."""

    name: str
    title: str
    group_field: str | None
    groups: tuple[str, ...]
    labels: tuple[str, ...]
    success: str | None
    task_fields: tuple[str, ...]
    expected_field: str | None
    control_group: str | None = None
    false_positive: str | None = None
    #: case fields holding the text the model worked on, shown (shortened) with failures
    input_fields: tuple[str, ...] = ()


WATERMARK = PackView(
    name="watermark_robustness",
    title="Watermark robustness",
    group_field="family",
    groups=("rewrite", "summarize", "format_convert", "style_transfer"),
    labels=("PASS", "MUTATED", "DROPPED"),
    success="PASS",
    task_fields=("instruction",),
    expected_field="watermark",
    input_fields=("passage",),
)
EXTRACTION = PackView(
    name="hidden_message_extraction",
    title="Hidden-message extraction",
    group_field="scheme",
    groups=("acrostic", "index_of_word", "punctuation_mapping", "no_message_control",
            "noise_variant"),
    labels=("CORRECT", "PARTIAL", "INCORRECT", "FALSE_POSITIVE"),
    success="CORRECT",
    task_fields=("rule",),
    expected_field="expected",
    control_group="no_message_control",
    false_positive="FALSE_POSITIVE",
    input_fields=("text",),
)
PACK_VIEWS: dict[str, PackView] = {v.name: v for v in (WATERMARK, EXTRACTION)}
#: the labels of a detection pack (seed 000's benchmark packs, or any pack graded the same way)
DETECTION_LABELS = (DETECTED, NOT_DETECTED)

#: case fields tried, in order, to describe the task / expected answer of an unknown pack
_GENERIC_TASK_FIELDS = ("instruction", "rule", "task", "prompt", "question", "input", "text")
_GENERIC_EXPECTED_FIELDS = ("expected", "answer", "target", "reference", "watermark")


@dataclass
class Result:
    """One row of ``results`` with its case decoded and its system name resolved."""

    row: dict[str, Any]
    case: dict[str, Any]
    system: str = ""

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["row"][name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def graded(self) -> bool:
        return self.row["error"] is None and self.row["label"] is not None

    @property
    def grader_error(self) -> bool:
        """The grader raised or returned an invalid Grade (the output itself is stored)."""
        return self.row["label"] == GRADER_ERROR

    @property
    def attack_error(self) -> bool:
        """The result's attack failed (e.g. the attack model's call): nothing to grade."""
        return self.row["label"] == ATTACK_ERROR

    @property
    def has_error(self) -> bool:
        """Either kind of error: a failed model call or a failed grader."""
        return self.row["error"] is not None

    @property
    def errored(self) -> bool:
        """The model call failed: there is no output to grade."""
        return self.row["error"] is not None and not self.grader_error and not self.attack_error

    @property
    def group(self) -> str:
        return str(self.row["group_value"]) if self.row["group_value"] is not None else "(none)"

    @property
    def metadata(self) -> dict[str, Any]:
        """The grade's evidence (``metadata_json``; stores before schema 3 have none)."""
        text = self.row.get("metadata_json")
        try:
            value = json.loads(text) if text else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def extra(self) -> dict[str, Any]:
        """The provider facts stored with the output (``extra_json``)."""
        text = self.row.get("extra_json")
        try:
            value = json.loads(text) if text else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def output(self) -> str | None:
        """The text the grader saw (after any attack), else the raw model output."""
        out = self.row["attacked_output"]
        return out if out is not None else self.row["raw_output"]


@dataclass
class ReportData:
    db: Path
    run_id: str | None
    runs: list[dict[str, Any]]
    results: list[Result]
    packs: dict[str, list[Result]] = field(default_factory=dict)
    #: metrics.json records of the quality analyses (pairwise judges, distinguishability)
    quality: list[Any] = field(default_factory=list)
    #: stored ``evalrun distinguish`` results about this selection
    distinguish: list[dict[str, Any]] = field(default_factory=list)
    #: stored ``evalrun tune`` searches on this selection's packs and models
    tune: list[dict[str, Any]] = field(default_factory=list)
    #: stored ``evalrun sweep`` results (MarkMyWords' aggregate metric)
    sweep: list[dict[str, Any]] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        return sorted({r.model for r in self.results})


def load(db: str | Path, run_id: str | None) -> ReportData:
    """Read the selected results (all runs, or one run's items) and the matching run rows."""
    store = open_store(db)
    try:
        rows, runs = select_rows(store, run_id)
        rows = with_judgements(store, rows)
        quality = quality_records(store, rows)
        distinguish = distinguish_analyses(store, rows)
        tune = tune_analyses(store, rows)
        sweep = sweep_analyses(store, rows)
    finally:
        store.close()
    results = [Result(row=row, case=_decode_case(row.get("case_json"))) for row in rows]
    data = ReportData(db=Path(db), run_id=run_id, runs=runs, results=results, quality=quality,
                      distinguish=distinguish, tune=tune, sweep=sweep)
    by_pack: dict[str, list[Result]] = defaultdict(list)
    for res in results:
        by_pack[res.pack].append(res)
    for items in by_pack.values():
        _assign_systems(items)
    # the seed-003 packs first, in seed order, then the rest alphabetically
    order = [p for p in PACK_VIEWS if p in by_pack] + sorted(p for p in by_pack if p not in PACK_VIEWS)
    data.packs = {p: by_pack[p] for p in order}
    return data


def _decode_case(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        case = json.loads(text)
    except ValueError:
        return {}
    return case if isinstance(case, dict) else {}


def _assign_systems(items: Iterable[Result]) -> None:
    """Name each (model, watermark, attack) combination; watermark and attack are shown only
    where a pack's rows use more than one value or a value other than ``none``."""
    items = list(items)
    wms = {r.watermark for r in items}
    atts = {r.attack for r in items}
    show_wm = len(wms) > 1 or wms != {"none"}
    show_att = len(atts) > 1 or atts != {"none"}
    for r in items:
        extra = []
        if show_wm:
            extra.append(f"wm={r.watermark}")
        if show_att:
            extra.append(f"attack={r.attack}")
        r.system = f"{r.model} [{', '.join(extra)}]" if extra else r.model


def view_for(pack: str, items: list[Result]) -> PackView:
    """The pack's presentation: the built-in one, the watermark benchmark's for a pack whose
    labels are DETECTED/NOT_DETECTED (whatever its name), or a generic one inferred from its
    rows."""
    if pack in PACK_VIEWS:
        return PACK_VIEWS[pack]
    labels = sorted({r.label for r in items if r.graded})
    groups = sorted({r.group for r in items if r.group_value is not None})
    fields = set().union(*(r.case.keys() for r in items)) if items else set()
    task = tuple(f for f in _GENERIC_TASK_FIELDS if f in fields)[:1]
    expected = next((f for f in _GENERIC_EXPECTED_FIELDS if f in fields), None)
    if is_detection([r.row for r in items]):
        return PackView(name=pack, title=f"{pack} (watermark detection)", group_field="group" if groups else None,
                        groups=tuple(groups), labels=DETECTION_LABELS, success=DETECTED, task_fields=task,
                        expected_field=None)
    return PackView(
        name=pack, title=pack, group_field="group" if groups else None, groups=tuple(groups),
        labels=tuple(labels), success=None, task_fields=task, expected_field=expected,
    )


def is_detection_view(view: PackView) -> bool:
    """A detection pack's view: its report adds the watermark benchmark (seed 000)."""
    return view.labels == DETECTION_LABELS


def systems(items: Iterable[Result]) -> list[str]:
    """System names in a stable order (by model, watermark, attack)."""
    seen: dict[str, tuple[str, str, str]] = {}
    for r in items:
        seen.setdefault(r.system, (r.model, r.watermark, r.attack))
    return sorted(seen, key=lambda s: seen[s])
