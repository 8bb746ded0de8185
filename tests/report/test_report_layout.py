"""The report's order and size, as a watermark researcher reads it: the benchmark (MarkMyWords'
Table V and figures) first, long tables in the appendix with a pointer where they were, and a
report.md that stays readable for the README's main job (2,100 results) while report.html keeps
every result's evidence."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from evalrun.report import build_report
from evalrun.report.build import LONG_TABLE_ROWS
from evalrun.report.document import md_unescape

MAIN_KGW = "kgw:context=1,delta=2.0,gamma=0.25,randomness=window,repeats=ignore,score=sum,skip=0.0"
MAIN_EXP = "exp:context=1,randomness=window,repeats=ignore,score=sum,skip=0.0"
#: report.md's bytes per result of the main job's shape beyond its fixed part: a compact per-case row
#: (about 75 bytes) with room to spare; the whole main job (2,100 results) then stays under 300 KB
BYTES_PER_RESULT = 100
FIXED_BYTES = 80_000


def headings(text: str) -> list[str]:
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]


def section(text: str, heading: str) -> str:
    """report.md from ``heading`` to the next heading of any level."""
    start = text.index(f" {heading}\n")
    end = text.find("\n#", start)
    return text[start:] if end < 0 else text[start:end]


@pytest.fixture(scope="module")
def main_job(tmp_path_factory: pytest.TempPathFactory, main_job_store) -> tuple[Path, int]:
    """The report of a main-job-shaped store with 40 cases (840 results)."""
    root = tmp_path_factory.mktemp("main-job")
    db = main_job_store(root / "results.sqlite", 40)
    build_report(db, root / "rep")
    return root / "rep", 40 * 21


def test_the_benchmark_comes_first_and_long_tables_go_to_the_appendix(benchmark_report: Path) -> None:
    text = (benchmark_report / "report.md").read_text()
    order = headings(text)
    first_pack = order.index("story_detect (watermark detection)")
    assert order.index("Watermark benchmark (MarkMyWords)") < first_pack
    assert order.index("Detection: TPR, FPR and ROC AUC") < first_pack  # all its subsections too
    appendix = order.index("Appendix")
    for pack in ("story_detect", "news_detect"):
        # 15 systems per pack: 105 pairs, a long table
        stats = order.index(f"{pack} (watermark detection): model comparison and stability")
        assert appendix < stats < order.index(f"Per-case results: {pack} (watermark detection)")
        assert appendix < order.index(f"Systems: {pack} (watermark detection)") < stats
        pointer = section(text, f"{pack} (watermark detection)")
        assert "(model, watermark and attack; 105 pairs)" in pointer and "in the appendix" in pointer
    # report.html in the same order
    page = (benchmark_report / "report.html").read_text()
    ids = re.findall(r'<section id="([^"]+)">', page)
    assert ids.index("benchmark") < ids.index("story-detect") < ids.index("appendix") < ids.index("story-detect-stats")


def test_short_comparisons_stay_beside_their_pack(three_model_report: Path) -> None:
    """Three models: three pairs stay under their pack, with their names, not keys."""
    order = headings((three_model_report / "report.md").read_text())
    stats = order.index("Watermark robustness: model comparison and stability")
    assert order.index("Watermark robustness") < stats < order.index("Failure analysis") < order.index("Appendix")
    assert not any(h.startswith("Systems: ") for h in order)
    assert 3 <= LONG_TABLE_ROWS


def test_the_main_job_report_md_stays_within_its_size_budget(main_job: tuple[Path, int]) -> None:
    out, results = main_job
    size = (out / "report.md").stat().st_size
    assert size <= FIXED_BYTES + BYTES_PER_RESULT * results, size
    assert FIXED_BYTES + BYTES_PER_RESULT * 2100 < 300_000  # the README's main job
    text = (out / "report.md").read_text()
    per_case = section(text, "Per-case results: mmw_book_reports (watermark detection)")
    assert len(per_case.encode()) <= BYTES_PER_RESULT * results
    # report.html keeps the evidence report.md leaves out
    assert (out / "report.html").stat().st_size > 2 * size


def test_compact_rows_cover_every_result_and_point_to_the_evidence(main_job: tuple[Path, int], md_tables) -> None:
    out, results = main_job
    text = (out / "report.md").read_text()
    tables = md_tables(text)
    [keys] = tables["Systems: mmw_book_reports (watermark detection)"]
    assert len(keys) == 21
    by_key = {row["key"]: (row["model"], row["watermark"], row["attack"]) for row in keys}
    assert {wm for _, wm, _ in by_key.values()} == {"none", MAIN_KGW, MAIN_EXP}  # full specs, never cut
    [rows] = tables["Per-case results: mmw_book_reports (watermark detection)"]
    assert len(rows) == results
    assert {(row["case_id"], by_key[row["key"]]) for row in rows} == {
        (f"book-{i + 1:03d}", spec) for i in range(40) for spec in by_key.values()}
    assert "evidence" not in rows[0] and "p_value=" not in text
    false_positives = [row for row in rows if row["label"] == "DETECTED" and by_key[row["key"]][1] == "none"]
    assert false_positives and all(row["reason"] == f"false positive under {MAIN_KGW}" for row in false_positives)
    note = md_unescape(section(text, "Per-case results: mmw_book_reports (watermark detection)"))
    assert "report.html" in note and "evalrun view --db" in note and "evalrun export --db" in note
    # report.html: every result's evidence in full, each detector's for an unwatermarked text
    page = html.unescape((out / "report.html").read_text())
    full = re.search(r'<table id="mmw-book-reports-cases">.*?</table>', page, re.S)
    assert full is not None
    html_rows = re.findall(r"<tr>(.*?)</tr>", full.group(0), re.S)[1:]
    assert len(html_rows) == results
    for row in html_rows:
        if "false positive under" in row or "not detected under" in row:
            for spec in (MAIN_KGW, MAIN_EXP):
                assert re.search(re.escape(spec) + r": detected=\w+ num_tokens_scored=\d+ p_value=[0-9.e-]+ ", row), row
        else:
            assert re.search(r"\bp_value=[0-9.e-]+ .*size=\d+ sizes={alpha_spending: \d+; first_crossing: \d+} threshold=0.02", row), row
    [pairs] = tables["mmw_book_reports (watermark detection): model comparison and stability"]
    assert len(pairs) == 21 * 20 // 2 and set(pairs[0]) >= {"key A", "key B"}
