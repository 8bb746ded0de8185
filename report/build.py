"""``evalrun report``: store -> report.md, report.html (self-contained) and PNG charts."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

from evalrun._util.errors import EvalrunError
from evalrun._util.files import write_text
from evalrun.metrics.aggregates import MetricRecord, compute, write_metrics_json
from evalrun.report import benchmark, charts, quality, tables
from evalrun.report.data import PackView, ReportData, Result, default_view, is_detection_view, load, slug
from evalrun.report.document import (
    Block,
    Document,
    Figure,
    Formats,
    Paragraph,
    Section,
    Table,
    render_html,
    render_markdown,
    spec_names,
)


class Chart(NamedTuple):
    """A chart a view's ``blocks`` may name: how to draw it and how the report describes it."""

    draw: Callable[[PackView, Sequence[Result], Path], Path]
    alt: str


#: the charts of the per-pack sections, by block name; the file is ``<chart_prefix><name>.png``
CHARTS: dict[str, Chart] = {
    "watermark_stacked_bar": Chart(charts.watermark_stacked_bar, "PASS / MUTATED / DROPPED per model"),
    "watermark_by_task": Chart(charts.watermark_by_task, "PASS / MUTATED / DROPPED per model and task family"),
    "extraction_by_scheme": Chart(charts.extraction_by_scheme, "CORRECT rate per scheme and model"),
    "extraction_false_positives": Chart(charts.extraction_false_positives,
                                        "FALSE_POSITIVE rate on no_message_control cases per model"),
}
CHART_NAMES = tuple(f"{name}.png" for name in CHARTS)

DETECTION_NOTE = ("Watermark detection per model, watermark and attack: DETECTED when p <= the pack's threshold "
                  "(for a pack with a z_threshold, such as waterbench: when z >= it). "
                  "For an unwatermarked output DETECTED means that at least one of the run's watermarks was "
                  "detected in it (a false positive); per-detector rates, watermark size, quality and tamper "
                  "resistance are in the watermark benchmark section.")


def build_report(db: str | Path, out_dir: str | Path, run_id: str | None = None, *,
                 sections: Sequence[Section] = (), metrics: Sequence[MetricRecord] = (),
                 packs_dirs: Sequence[str | Path] = ()) -> Path:
    """Write report.md, report.html and the charts for ``db`` (one run or all) into
    ``out_dir``; returns the path of report.md. ``sections`` (charts already drawn into
    ``out_dir``) and ``metrics`` come from an experiment that knows more than the store,
    such as ``evalrun unlearning demo``; they lead the report and ``metrics.json``.
    ``packs_dirs`` are searched for the packs' pack.toml (their ``report_view``) besides the
    shipped packs and ``EVALRUN_PACKS``."""
    data = load(db, run_id, packs_dirs=packs_dirs)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise EvalrunError(f"--out {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        previous = Path(tempfile.mkdtemp(prefix=".previous-report-", dir=out))
    except OSError as exc:
        blocker = next((a for a in out.parents if a.exists() and not a.is_dir()), None)
        why = f"{blocker} is a file, not a folder" if blocker is not None else (exc.strerror or str(exc))
        raise EvalrunError(f"--out {out}: cannot write there ({why})") from None
    # the previous report's files are set aside (renames: nothing to run out of space for) and
    # come back if this one fails midway, so a failed report never leaves a broken one behind
    kept = [f for f in _owned(out) if f.parent == out]
    for f in kept:
        os.replace(f, previous / f.name)
    try:
        records = compute(r.row for r in data.results)
        doc = compose(data, out, records)
        doc.sections[:0] = list(sections)
        write_metrics_json([*metrics, *records, *data.quality], out / "metrics.json", what="--out")
        md_path = write_text(out / "report.md", render_markdown(doc), what="--out")
        write_text(out / "report.html", render_html(doc, out), what="--out")
    except BaseException:
        for f in _owned(out):
            f.unlink(missing_ok=True)
        for f in kept:
            os.replace(previous / f.name, f)
        raise
    finally:
        shutil.rmtree(previous, ignore_errors=True)
    return md_path


def _owned(out: Path) -> list[Path]:
    """The files of a report in ``out``: what this function writes, and the charts of packs
    that share a view (prefixed with the pack's name): a chart must not outlive its data."""
    names = ("metrics.json", "report.md", "report.html", *CHART_NAMES, *benchmark.CHART_NAMES)
    shared = [f for name in CHART_NAMES for f in out.glob(f"*-{name}")]
    return [*(out / n for n in names if (out / n).exists()), *shared]


def compose(data: ReportData, out: Path, records: Sequence[MetricRecord] | None = None) -> Document:
    """Compute every table, draw every chart into ``out``, and arrange the document. The
    benchmark's tables show ``records`` (what metrics.json gets; computed here when not given)."""
    selection = (f"run {data.run_id}" if data.run_id
                 else f"all {len(data.runs)} run(s) in the store")
    graded = sum(r.graded for r in data.results)
    errored = sum(r.errored for r in data.results)
    grader_errors = sum(r.grader_error for r in data.results)
    intro = [
        f"Store: {data.db}. Selection: {selection}. {len(data.results)} results "
        f"({graded} graded, {errored} generation errors, {grader_errors} grader errors) over "
        f"{len(data.packs)} pack(s) and {len(data.models)} model(s).",
        "Grader errors (label GRADER_ERROR: the grader raised or returned an invalid grade) "
        "are listed under Failures and count in no rate. "
        "Rates divide by graded results and carry 95% Wilson intervals; mean scores average "
        "each case's repetitions first (a result without a grade counting 0) and carry 95% bootstrap intervals over cases "
        "(2000 resamples, fixed seed). Errors are counted apart from every label.",
    ]
    elsewhere = sorted({(r.row["model"], r.row["watermark"]) for r in data.results if r.watermarked_elsewhere})
    if elsewhere:
        intro.append("Watermarks applied outside evalrun (a replay file's outputs, an API server's): evalrun "
                     "detected them only, on the token ids of the run's tokenizer: "
                     + "; ".join(f"{model} under {watermark}" for model, watermark in elsewhere) + ".")
    # the watermark benchmark (MarkMyWords' Table V and figures) leads: it is what a watermark
    # researcher reads first; long tables (pairwise comparisons, every result) go to the appendix
    sections: list[Section] = []
    appendix: list[Section] = []
    detection = {pack: items for pack, items in data.packs.items() if is_detection_view(data.view(pack))}
    if detection:
        if records is None:
            records = compute(r.row for r in data.results)
        sections += benchmark.sections(detection, records, out)
    for pack, items in data.packs.items():
        view = data.view(pack)
        main, extra = _pack_sections(view, items, out, data.db)
        sections += main
        appendix += extra
    sections += quality.sections(data)
    sections.append(Section("Failure analysis", "failures", 2, [Paragraph(
        "For each pack, the most informative failures: cases other models solved come "
        "first, and each failure label is shown before any repeats.")]))
    for pack, items in data.packs.items():
        view = data.view(pack)
        examples = tables.failures(view, items)
        blocks: list = list(examples) if examples else [Paragraph(
            "No failures: every label matches its ground truth." if is_detection_view(view)
            else "No failures: every graded result scored 1.")]
        crashed = tables.grader_errors(view, items)
        if crashed is not None:
            blocks.insert(0, crashed)
        sections.append(Section(f"Failures: {view.title}", f"failures-{slug(pack)}", 3,
                                blocks))
    sections.append(Section("Provenance", "provenance-section", 2, [
        Paragraph("Runs whose results this report covers (a run may reuse results cached by "
                  "an earlier run; both are listed)."),
        tables.runs_table(data),
        Paragraph("Models, parameters, watermarks and attacks."),
        tables.models_table(data),
    ]))
    sections.append(Section("Appendix", "appendix", 2, []))
    sections += appendix
    sections.append(Section("Latency", "appendix-latency", 3, [tables.latency(data)]))
    sections.append(Section("Token usage", "appendix-tokens", 3, [tables.tokens(data)]))
    doc = Document(title="evalrun report", intro=intro, sections=sections)
    names = watermark_names(doc)
    if names is not None:
        next(s for s in sections if s.id == "provenance-section").blocks.append(names)
    return doc


def watermark_names(doc: Document) -> Table | None:
    """The full spec of each watermark the tables show by a short name (None: no name was
    shortened)."""
    rows = sorted([name, spec] for spec, name in spec_names(doc).items() if name != spec)
    if not rows:
        return None
    return Table(id="watermark-names", headers=["watermark", "spec"], rows=rows, spec_columns=(),
                 caption="Tables name a watermark by its scheme and the parameters that differ from the "
                         "scheme's defaults; metrics.json, exports and the store keep the full spec.")


def per_case_note(items: Sequence[Result], db: Path, *, keyed: bool) -> str:
    """What report.md's compact per-case table leaves out, and where to read it."""
    quoted = shlex.quote(str(db))
    evidence = any(r.metadata for r in items)
    return ("report.md lists one short row per result"
            + (", each model, watermark and attack by its key (above)" if keyed else "")
            + (", without the grade's evidence" if evidence else "")
            + f"; reasons and outputs longer than {tables.COMPACT_CHARS} characters are cut. "
            + "The full rows" + (" with every result's evidence (p-value, z-score, tokens scored, watermark size, "
                                 "per-detector results)" if evidence else "")
            + f" are in this section of report.html, in `evalrun view --db {quoted}` and in "
            f"`evalrun export --db {quoted} --format jsonl --out results.jsonl`.")


#: the non-chart blocks a view's ``blocks`` may name
BLOCKS: dict[str, Callable[[PackView, list[Result]], Block]] = {
    "label_summary": tables.label_summary,
    "group_breakdown": tables.group_breakdown,
    "detection_note": lambda view, items: Paragraph(DETECTION_NOTE),
    "generic_note": lambda view, items: Paragraph(f"Pack {view.name}: generic summary (no pack-specific view)."),
}


def _block(name: str, view: PackView, items: list[Result], out: Path) -> Block:
    """One block of a pack's section, named in its view's ``blocks``."""
    if name in CHARTS:
        chart = CHARTS[name]
        return _chart(chart.draw, view, items, out, f"{view.chart_prefix}{name}.png", chart.alt)
    if name not in BLOCKS:
        raise EvalrunError(f"report view of pack {view.name}: unknown block {name!r}; "
                           f"known: {', '.join([*BLOCKS, *CHARTS])}")
    return BLOCKS[name](view, items)


#: a pack's pairwise-comparison and stability tables longer than this many rows (in all) go to the
#: appendix, with a pointer left in the pack's section (the main job compares 21 systems: 210 rows)
LONG_TABLE_ROWS = 30


def _pack_sections(view: PackView, items: list[Result], out: Path,
                   db: Path) -> tuple[list[Section], list[Section]]:
    """A pack's sections in the report's body, and its sections in the appendix (``db``: the
    store, named where report.md points to the detail it leaves out)."""
    sid = slug(view.name)
    blocks: list[Block] = [_block(name, view, items, out) for name in view.blocks]
    known = set(view.labels) if view.success else set()
    if not view.success or {r.label for r in items if r.graded} - known:
        generic = view if not view.success else default_view(f"{view.name} (all labels)", items)
        blocks.append(tables.generic_summary(generic, items))
        if not view.success and view.groups:
            blocks.append(tables.group_breakdown(view, items))
    section = Section(view.title, sid, 2, blocks)
    keys = tables.system_keys(items)
    paired = tables.paired_comparisons(view, items)
    stab = tables.stability(view, items)
    long_stats = sum(len(t.rows) for t in (paired, stab) if t is not None) > LONG_TABLE_ROWS
    if long_stats:  # the appendix names the systems by key
        paired, stab = tables.paired_comparisons(view, items, keys), tables.stability(view, items, keys)
    stat_blocks: list[Block] = [paired] if paired is not None else []
    if stab is not None:
        stat_blocks.append(stab if stab.rows else
                           Paragraph("No case changed grade across repetitions."))
    stats_title = f"{view.title}: model comparison and stability"
    body, appendix = [section], []
    if keys:
        appendix.append(Section(f"Systems: {view.title}", f"appendix-{sid}-keys", 3,
                                [tables.keys_table(view, items, keys)]))
    if stat_blocks and long_stats:
        n = len(tables.systems(items))
        blocks.append(Paragraph(f"Pairwise comparisons of the pack's {n} systems (model, watermark and attack; "
                                f"{n * (n - 1) // 2} pairs) and their stability across repetitions: in the "
                                f"appendix, under \"{stats_title}\"."))
        appendix.append(Section(stats_title, f"{sid}-stats", 3, stat_blocks))
    elif stat_blocks:
        body.append(Section(stats_title, f"{sid}-stats", 3, stat_blocks))
    appendix.append(Section(f"Per-case results: {view.title}", f"appendix-{sid}", 3, [Formats(
        markdown=[Paragraph(per_case_note(items, db, keyed=bool(keys))),
                  tables.per_case(view, items, compact=True, keys=keys)],
        html=[tables.per_case(view, items)])]))
    return body, appendix


def _chart(draw: Callable[[PackView, Sequence[Result], Path], Path], view: PackView, items: list[Result],
           out: Path, name: str, alt: str) -> Figure:
    draw(view, items, out / name)
    return Figure(filename=name, alt=alt, caption=f"{name}: {alt}.")
