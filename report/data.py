"""The read side: load a run's results from the store into plain records the report uses, and
how the report presents each pack (:class:`PackView`, :data:`REPORT_VIEWS`)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from evalrun._util.errors import EvalrunError, SpecError
from evalrun._util.registry import Registry
from evalrun.metrics.benchmark import is_detection
from evalrun.metrics.judgements import with_judgements
from evalrun.metrics.quality_records import distinguish_analyses, quality_records, sweep_analyses, tune_analyses
from evalrun.model.generation import WATERMARKED_ELSEWHERE
from evalrun.pack.loading import PACK_FILE, declared_report_view, discover_packs
from evalrun.report.export import open_store, select_rows
from evalrun.store.database import ATTACK_ERROR, GRADER_ERROR
from evalrun.watermark.naming import short_names
from evalrun.watermark.verdict import DETECTED, NOT_DETECTED


@dataclass(frozen=True)
class PackView:
    """How the report presents one pack: a view of :data:`REPORT_VIEWS` (chosen by the pack's
    ``report_view``, or registered under its name), else a default view built from its data
    (labels seen, ``group_value``): :func:`view_for`. Everything that differs between views is
    a field here; nothing looks at a view's name."""

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
    #: the blocks of the pack's section, in order: ``label_summary``, ``group_breakdown``,
    #: ``detection_note``, ``generic_note``, or a chart of :data:`evalrun.report.build.CHARTS`
    blocks: tuple[str, ...] = ()
    #: the summary table's name for the share of ``success`` (default: ``<success> rate``)
    rate_name: str | None = None
    #: the per-case table shows the expected answer (``expected_field``) and the model's output
    #: instead of the grader's reason
    per_case_expected: bool = False
    #: where the pack's sections come: views with an order first, by it (then by pack name),
    #: then the other packs by name
    order: int | None = None
    #: prepended to its chart files, so two packs sharing a view keep their charts apart
    chart_prefix: str = ""

    @property
    def success_rate_name(self) -> str:
        return self.rate_name or f"{self.success} rate"


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
    blocks=("label_summary", "watermark_stacked_bar", "group_breakdown", "watermark_by_task"),
    order=0,
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
    blocks=("label_summary", "group_breakdown", "extraction_by_scheme", "extraction_false_positives"),
    rate_name="accuracy",
    per_case_expected=True,
    order=1,
)
#: the report's views of packs, by name: a pack's ``report_view = "<name>"`` in pack.toml picks
#: one; without it, the view registered under the pack's own name; else :func:`default_view`.
#: Third-party views register through the ``evalrun.report_views`` entry-point group (the
#: entry point names a :class:`PackView`).
REPORT_VIEWS: Registry[PackView] = Registry("report view", "evalrun.report_views", option="report_view")
# the WMID report's two packs (Objective LLM Evals: Watermark Robustness & Hidden-Message
# Extraction), under their pack names: their pack.toml stays as it is (its text is the grader
# fingerprint stored with every grade)
REPORT_VIEWS.register(WATERMARK.name, WATERMARK)
REPORT_VIEWS.register(EXTRACTION.name, EXTRACTION)
#: the labels of a detection pack (MarkMyWords' benchmark packs, or any pack graded the same way)
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
    def watermarked_elsewhere(self) -> bool:
        """Its watermark was applied outside evalrun (a replay file, an API server): detected only."""
        return all(self.extra.get(k) == v for k, v in WATERMARKED_ELSEWHERE.items())

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

    def _json_object(self, column: str) -> dict[str, Any]:
        """A JSON-object column of the row; ``{}`` where it is empty, damaged or not an object."""
        text = self.row.get(column)
        try:
            value = json.loads(text) if text else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def metadata(self) -> dict[str, Any]:
        """The grade's evidence (``metadata_json``; stores before schema 3 have none)."""
        return self._json_object("metadata_json")

    @property
    def extra(self) -> dict[str, Any]:
        """The provider facts stored with the output (``extra_json``)."""
        return self._json_object("extra_json")

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
    #: pack -> how the report presents it (:func:`view_for`)
    views: dict[str, PackView] = field(default_factory=dict)

    @property
    def models(self) -> list[str]:
        return sorted({r.model for r in self.results})

    def view(self, pack: str) -> PackView:
        """The pack's view: as loaded, or the one it would get without a pack.toml."""
        found = self.views.get(pack)
        return found if found is not None else view_for(pack, self.packs.get(pack, []))


def load(db: str | Path, run_id: str | None, *, packs_dirs: Sequence[str | Path] = ()) -> ReportData:
    """Read the selected results (all runs, or one run's items) and the matching run rows;
    each pack's view follows its pack.toml, found on the pack search path (the shipped packs,
    ``packs_dirs``, ``EVALRUN_PACKS``)."""
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
    dirs = discover_packs(packs_dirs)
    views = {p: view_for(p, items, declared_view(dirs[p]) if p in dirs else None) for p, items in by_pack.items()}
    # views with an order first (the WMID report's packs, in its order), then the rest by name
    order = sorted(by_pack, key=lambda p: (views[p].order is None, views[p].order or 0, p))
    data.packs = {p: by_pack[p] for p in order}
    data.views = {p: views[p] for p in order}
    return data


def declared_view(pack_dir: Path) -> str | None:
    """The view a pack's pack.toml names (``report_view``), checked against
    :data:`REPORT_VIEWS`; None when it names none."""
    name = declared_report_view(pack_dir)
    if name is not None and name not in REPORT_VIEWS:
        known = ", ".join(REPORT_VIEWS.names())
        raise EvalrunError(f"{pack_dir / PACK_FILE}: report_view {name!r}: unknown report view; known: {known}")
    return name


def _decode_case(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        case = json.loads(text)
    except ValueError:
        return {}
    return case if isinstance(case, dict) else {}


def _assign_systems(items: Iterable[Result]) -> None:
    """Name each (model, watermark, attack) combination; watermark (by its short name) and
    attack are shown only where a pack's rows use more than one value or a value other than
    ``none``."""
    items = list(items)
    wms = {r.watermark for r in items}
    atts = {r.attack for r in items}
    show_wm = len(wms) > 1 or wms != {"none"}
    show_att = len(atts) > 1 or atts != {"none"}
    names = short_names(wms)  # distinct, like the specs
    for r in items:
        extra = []
        if show_wm:
            extra.append(f"wm={names[r.watermark]}")
        if show_att:
            extra.append(f"attack={r.attack}")
        r.system = f"{r.model} [{', '.join(extra)}]" if extra else r.model


def view_for(pack: str, items: Sequence[Result], report_view: str | None = None) -> PackView:
    """The pack's presentation: the view of :data:`REPORT_VIEWS` named ``report_view`` (the
    pack's pack.toml), else the one registered under the pack's name, else
    :func:`default_view`. A view registered under another name is renamed for the pack (its
    title says which pack, its charts are prefixed with the pack's name)."""
    name = report_view if report_view is not None else pack if pack in REPORT_VIEWS else None
    if name is None:
        return default_view(pack, items)
    try:
        view = REPORT_VIEWS.get(name)
    except SpecError as exc:
        raise EvalrunError(f"pack {pack}: {exc}") from None
    if view.name == pack:
        return view
    return replace(view, name=pack, title=f"{view.title} ({pack})", chart_prefix=f"{slug(pack)}-")


def slug(text: str) -> str:
    """A name as an id or file-name part: lower case, runs of other characters as ``-``."""
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def default_view(pack: str, items: Sequence[Result]) -> PackView:
    """The view of a pack without a registered one: the watermark benchmark's for a pack whose
    labels are DETECTED/NOT_DETECTED (whatever its name), or a generic one inferred from its
    rows."""
    labels = sorted({r.label for r in items if r.graded})
    groups = sorted({r.group for r in items if r.group_value is not None})
    fields = set().union(*(r.case.keys() for r in items)) if items else set()
    task = tuple(f for f in _GENERIC_TASK_FIELDS if f in fields)[:1]
    expected = next((f for f in _GENERIC_EXPECTED_FIELDS if f in fields), None)
    if is_detection([r.row for r in items]):
        return PackView(name=pack, title=f"{pack} (watermark detection)", group_field="group" if groups else None,
                        groups=tuple(groups), labels=DETECTION_LABELS, success=DETECTED, task_fields=task,
                        expected_field=None, blocks=("detection_note", "label_summary"))
    return PackView(
        name=pack, title=pack, group_field="group" if groups else None, groups=tuple(groups),
        labels=tuple(labels), success=None, task_fields=task, expected_field=expected, blocks=("generic_note",),
    )


def is_detection_view(view: PackView) -> bool:
    """A detection pack's view: its report adds the watermark benchmark (MarkMyWords)."""
    return view.labels == DETECTION_LABELS


def systems(items: Iterable[Result]) -> list[str]:
    """System names in a stable order (by model, watermark, attack)."""
    seen: dict[str, tuple[str, str, str]] = {}
    for r in items:
        seen.setdefault(r.system, (r.model, r.watermark, r.attack))
    return sorted(seen, key=lambda s: seen[s])
