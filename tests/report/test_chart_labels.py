"""Chart labels never overlap and never cut a watermark spec: a spec cut in the middle
(``kgw:gamma=0.25,de…skip=0.0``) hides the parameters (γ, δ) a researcher compares schemes by.
Each chart is drawn with matplotlib's renderer and every text it draws (tick labels, titles,
legend entries, annotations) is checked against every other one."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any, Callable

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from evalrun.report import benchmark_charts, charts
from evalrun.report.charts import wrap_spec
from evalrun.report.data import EXTRACTION, WATERMARK, load
from evalrun.report.document import Figure as FigureBlock
from evalrun.watermark.naming import short_name

MAIN_EXP = "exp:context=1,randomness=window,repeats=ignore,score=sum,skip=0.0"
MAIN_KGW = "kgw:context=1,delta=2.0,gamma=0.25,randomness=window,repeats=ignore,score=sum,skip=0.0"


def _draw(fig: Figure) -> FigureCanvasAgg:
    """Draw ``fig`` at the resolution the report saves it (text metrics depend on it)."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.set_dpi(charts.DPI)
    canvas.draw()
    return canvas


def drawn_texts(fig: Figure) -> list[Text]:
    """Every non-empty text the renderer draws: visible ticks' labels (only the ticks inside
    the view), titles, axis labels, texts and annotations, legends, the figure's own texts."""
    _draw(fig)
    found: list[Text] = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for axis in (ax.xaxis, ax.yaxis):
            if not (ax.axison and axis.get_visible()):
                continue
            for tick in axis._update_ticks():
                found += [label for label in (tick.label1, tick.label2) if label.get_visible()]
            found.append(axis.label)
        found += [*ax.texts, ax.title, ax._left_title, ax._right_title]
        legend = ax.get_legend()
        if legend is not None:
            found += [*legend.get_texts(), legend.get_title()]
    for legend in fig.legends:
        found += [*legend.get_texts(), legend.get_title()]
    found += [*fig.texts] + ([fig._suptitle] if fig._suptitle is not None else [])
    unique = {id(t): t for t in found}  # the suptitle is also one of the figure's texts
    return [t for t in unique.values() if t.get_visible() and t.get_text().strip()]


def overlaps(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of drawn texts whose rendered boxes overlap or come closer than two pixels."""
    renderer = _draw(fig).get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer).padded(1.0))
             for t in drawn_texts(fig)]
    return [(a, b) for (a, box_a), (b, box_b) in combinations(boxes, 2) if box_a.overlaps(box_b)]


def shown_whole(fig: Figure, text: str) -> bool:
    """Whether ``text`` is drawn whole in one of the figure's texts (wrapping allowed)."""
    return any(text in t.get_text().replace("\n", "") for t in drawn_texts(fig))


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    """The figures the report's chart functions save, by file name."""
    figures: dict[str, Figure] = {}

    def keep(fig: Figure, path: Path) -> Path:
        figures[Path(path).name] = fig
        return path

    monkeypatch.setattr(charts, "_save", keep)
    monkeypatch.setattr(benchmark_charts, "_save", keep)
    return figures


def test_wrap_spec_breaks_at_commas_and_adds_nothing_else() -> None:
    wrapped = wrap_spec(MAIN_KGW, 30)
    assert wrapped.replace("\n", "") == MAIN_KGW
    assert all(len(line) <= 30 for line in wrapped.splitlines())
    assert all(line.endswith(",") for line in wrapped.splitlines()[:-1])
    assert "delta=2.0" in wrapped.splitlines()[0] and any("gamma=0.25" in line for line in wrapped.splitlines())
    assert wrap_spec("x" * 65, 30).splitlines() == ["x" * 30, "x" * 30, "x" * 5]
    assert wrap_spec("swap:p=0.1", 30) == "swap:p=0.1"


def test_the_main_jobs_benchmark_charts_show_short_names_whole_without_overlap(
        tmp_path: Path, main_job_store: Callable[[Path, int], Path], captured: dict[str, Figure]) -> None:
    from evalrun.metrics.aggregates import compute
    from evalrun.report import benchmark

    data = load(main_job_store(tmp_path / "r.sqlite", 12), None)
    items = data.packs["mmw_book_reports"]
    blocks = [b for s in benchmark.sections({"mmw_book_reports": items}, compute(r.row for r in data.results), tmp_path)
              for b in s.blocks]
    drawn = {b.filename for b in blocks if isinstance(b, FigureBlock)}
    assert drawn == set(benchmark.CHART_NAMES) == set(captured)
    for name, fig in captured.items():
        assert overlaps(fig) == [], name
        for spec in (MAIN_KGW, MAIN_EXP):
            assert shown_whole(fig, short_name(spec)) and not shown_whole(fig, spec), (name, spec)


def test_attack_names_are_shown_whole(tmp_path: Path, main_job_store, captured: dict[str, Figure]) -> None:
    from evalrun.metrics.aggregates import compute
    from evalrun.report import benchmark

    data = load(main_job_store(tmp_path / "r.sqlite", 6), None)
    benchmark.sections({"mmw_book_reports": data.packs["mmw_book_reports"]},
                       compute(r.row for r in data.results), tmp_path)
    for attack in ("misspelling:p=0.25", "synonym:p=0.5", "typo:p=0.05"):
        assert shown_whole(captured["attacks.png"], attack) and shown_whole(captured["tamper_resistance.png"], attack)


def _long_systems(pack: str, model: str, cid: str, rep: int) -> Any:
    return ("PASS", 1.0) if pack == "watermark_robustness" else ("CORRECT", 1.0)


def test_the_wmid_charts_wrap_long_system_names_without_overlap(tmp_path: Path, store_writer,
                                                                 captured: dict[str, Figure]) -> None:
    """A model under watermarks with every parameter spelled out: the names (the specs' short
    names) are wrapped whole."""
    store_writer(tmp_path / "r.sqlite", ["openai:model-a", "replay:outputs/model-b.jsonl"], n=1,
                 outcome=_long_systems, variants=((MAIN_KGW, "swap:p=0.1"), (MAIN_EXP, "none"), ("none", "none")))
    data = load(tmp_path / "r.sqlite", None)
    wr, hme = data.packs["watermark_robustness"], data.packs["hidden_message_extraction"]
    charts.watermark_stacked_bar(WATERMARK, wr, tmp_path / "a.png")
    charts.watermark_by_task(WATERMARK, wr, tmp_path / "b.png")
    charts.extraction_by_scheme(EXTRACTION, hme, tmp_path / "c.png")
    charts.extraction_false_positives(EXTRACTION, hme, tmp_path / "d.png")
    systems = {r.system for r in wr}
    assert len(systems) == 6 and any(f"wm={short_name(MAIN_KGW)}, " in s for s in systems)
    for name, fig in captured.items():
        assert overlaps(fig) == [], name
        for system in systems:
            assert shown_whole(fig, system), (name, system)


def test_the_overlap_check_finds_overlapping_labels() -> None:
    """The check itself can fail: two labels drawn on the same spot."""
    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.text(0.5, 0.5, "kgw:gamma=0.25")
    ax.text(0.52, 0.5, "exp:context=1")
    assert overlaps(fig) == [("kgw:gamma=0.25", "exp:context=1")]
    assert shown_whole(fig, "kgw:gamma=0.25") and not shown_whole(fig, "kgw:gamma=0.25,delta=2")
