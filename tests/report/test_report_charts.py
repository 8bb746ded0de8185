"""The four seed-003 charts with 1 and with 8 models: written, sized for the model count,
and with model names shown whole and distinguishable."""

from __future__ import annotations

from pathlib import Path

from matplotlib.image import imread

from evalrun.report import charts
from evalrun.report.data import EXTRACTION, WATERMARK, load

EIGHT = ["reference", "openai:model-a", "replay:outputs/model-b.jsonl"] + [
    f"openai:some-rather-long-model-name-{k}-2024-08-06-preview" for k in range(5)]


def _outcome(pack: str, model: str, cid: str, rep: int):
    h = sum(map(ord, model + cid)) + rep
    if pack == "watermark_robustness":
        return [("PASS", 1.0), ("PASS", 1.0), ("MUTATED", 0.5), ("DROPPED", 0.0)][h % 4]
    fp = ("FALSE_POSITIVE", 0.0) if "control" in cid else ("CORRECT", 1.0)
    return [("CORRECT", 1.0), ("PARTIAL", 0.5), ("INCORRECT", 0.0), fp][h % 4]


def _draw_all(db: Path, out: Path) -> dict[str, tuple[int, int]]:
    data = load(db, None)
    wr, hme = data.packs["watermark_robustness"], data.packs["hidden_message_extraction"]
    charts.watermark_stacked_bar(WATERMARK, wr, out / "watermark_stacked_bar.png")
    charts.watermark_by_task(WATERMARK, wr, out / "watermark_by_task.png")
    charts.extraction_by_scheme(EXTRACTION, hme, out / "extraction_by_scheme.png")
    charts.extraction_false_positives(EXTRACTION, hme, out / "extraction_false_positives.png")
    sizes = {}
    for png in out.glob("*.png"):
        img = imread(png)
        sizes[png.name] = img.shape[:2]
        assert img.std() > 0.05, f"{png.name} looks blank"
    return sizes


def test_charts_for_one_and_eight_models(tmp_path: Path, store_writer) -> None:
    sizes = {}
    for tag, models in (("one", ["openai:model-a"]), ("eight", EIGHT)):
        work = tmp_path / tag
        work.mkdir()
        store_writer(work / "r.sqlite", models, n=1, outcome=_outcome)
        sizes[tag] = _draw_all(work / "r.sqlite", work)
    names = {"watermark_stacked_bar.png", "watermark_by_task.png", "extraction_by_scheme.png",
             "extraction_false_positives.png"}
    assert set(sizes["one"]) == set(sizes["eight"]) == names
    # one horizontal bar per model: the per-model charts grow with the model count
    for name in ("watermark_stacked_bar.png", "watermark_by_task.png",
                 "extraction_false_positives.png"):
        assert sizes["eight"][name][0] > 1.8 * sizes["one"][name][0], name
    # legible at the DPI used: over 55 px of height per model bar on the stacked bar
    assert sizes["eight"]["watermark_stacked_bar.png"][0] >= 8 * 55


def test_long_names_are_wrapped_whole_and_stay_distinct() -> None:
    display = charts.wrapped_names(EIGHT)
    assert len(set(display.values())) == len(EIGHT)
    for name, shown in display.items():
        assert shown.replace("\n", "") == name
        assert all(len(line) <= charts.NAME_CHARS for line in shown.splitlines())
    assert "\n" in display[EIGHT[-1]] and display["reference"] == "reference"


def test_wrap_tick_labels() -> None:
    assert charts._wrap("acrostic") == "acrostic"
    assert charts._wrap("no_message_control") == "no_message_\ncontrol"
    assert "\n" in charts._wrap("punctuation_mapping")
