"""The viewer's pages as a person reads them, over real HTTP against a real store: watermarks by
their short names, filters and comparisons that take a scheme or short name and say what they
matched, the p-value curve's axes and cap, judge answers parsed with the raw answer folded, the
blank comparison page, and caches warmed at start-up."""

from __future__ import annotations

import html
import json
import re
import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator
from urllib.parse import urlencode

import pytest

from evalrun.view import pages
from evalrun.view.server import Viewer, make_server
from evalrun.watermark.naming import short_name

from .conftest import serve

pytestmark = pytest.mark.slow

#: a second kgw setup, written into a copy of the store beside the fixture's (γ=0.25)
KGW_HALF = "kgw:context=1,delta=2.0,gamma=0.5,randomness=window,repeats=ignore,score=sum,skip=0.0"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def api(url: str) -> dict:
    status, body = get(url)
    assert status == 200, body[:300]
    return json.loads(body)


def text_of(page: str, element_id: str) -> str:
    """The text of the element with ``element_id`` (tags dropped, entities decoded)."""
    found = re.search(rf"<(\w+)[^>]* id='{element_id}'[^>]*>(.*?)</\1>", page, re.S)
    assert found, f"no element #{element_id}"
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(2)))


def stored_kgw(db: Path) -> str:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT DISTINCT watermark FROM results WHERE watermark != 'none'").fetchone()[0]


@pytest.fixture(scope="module")
def two_kgw(view_db: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A copy of the store whose even-numbered kgw results read as a second kgw setup (γ=0.5),
    and how many they are."""
    db = tmp_path_factory.mktemp("two-kgw") / "results.sqlite"
    with sqlite3.connect(f"file:{view_db}?mode=ro", uri=True) as source, sqlite3.connect(db) as copy:
        source.backup(copy)
        moved = copy.execute("UPDATE results SET watermark = ? WHERE watermark LIKE 'kgw:%' AND result_id % 2 = 0",
                             (KGW_HALF,)).rowcount
    copy.close()
    return db, moved


@pytest.fixture(scope="module")
def two_kgw_url(two_kgw: tuple[Path, int]) -> Iterator[str]:
    yield from serve(two_kgw[0], None, warm=False)


def test_the_list_shows_short_names_with_the_full_spec_on_hover(viewer_url: str, view_db: Path) -> None:
    spec = stored_kgw(view_db)
    status, page = get(f"{viewer_url}/")
    assert status == 200
    cell = f"<span class='spec' title='{html.escape(spec, quote=True)}'>{html.escape(short_name(spec))}</span>"
    assert short_name(spec) != spec and page.count(cell) == 18
    # the menu offers the short name and submits the full spec
    assert re.search(rf"<option value='{re.escape(html.escape(spec, quote=True))}'[^>]*>kgw</option>", page)


def test_a_scheme_name_filter_matches_every_spec_of_the_scheme_and_says_which(
        two_kgw_url: str, two_kgw: tuple[Path, int], view_db: Path) -> None:
    moved = two_kgw[1]
    specs = sorted({stored_kgw(view_db), KGW_HALF})
    assert len(specs) == 2
    listing = api(f"{two_kgw_url}/api/results?watermark=kgw&limit=500")
    assert listing["total"] == 18 and {r["watermark"] for r in listing["results"]} == set(specs)
    assert sorted(listing["matched"]["watermark"]) == specs
    status, page = get(f"{two_kgw_url}/?watermark=kgw")
    assert status == 200 and text_of(page, "shown") == "1–18 of 18"
    said = text_of(page, "matched-watermark")
    assert said.startswith("watermark=kgw matched: ")
    assert all(f"{short_name(s)} ({s})" in said for s in specs), said
    assert "kgw γ=0.5" in said
    # the typed value stays chosen in the form, so filtering again keeps it
    assert "<option value='kgw' title='kgw' selected>kgw</option>" in page
    # a short name matches its own spec only
    only = api(f"{two_kgw_url}/api/results?" + urlencode({"watermark": "kgw γ=0.5", "limit": 500}))
    assert only["total"] == moved and only["matched"]["watermark"] == [KGW_HALF]
    # the full spec, as the menu submits it, matches itself and the page adds nothing
    status, page = get(f"{two_kgw_url}/?" + urlencode({"watermark": KGW_HALF}))
    assert text_of(page, "shown") == f"1–{moved} of {moved}" and "id='matched-watermark'" not in page


def test_an_unwatermarked_result_offers_each_detector_by_its_short_name(two_kgw_url: str, two_kgw: tuple[Path, int],
                                                                        view_db: Path) -> None:
    db, _ = two_kgw
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        (result_id,), = conn.execute("SELECT result_id FROM results WHERE watermark = 'none' LIMIT 1")
    page = get(f"{two_kgw_url}/results/{result_id}")[1]
    detectors = re.search(r"<p class='note'>detector: (.*?)</p>", page, re.S)
    assert detectors
    shown = {html.unescape(t): html.unescape(s) for t, s in
             re.findall(r"<span class='spec' title='([^']+)'>([^<]+)</span>", detectors.group(1))}
    assert shown == {stored_kgw(view_db): "kgw", KGW_HALF: "kgw γ=0.5"}


def test_a_filter_that_matches_nothing_lists_the_available_values(viewer_url: str, view_db: Path) -> None:
    spec = stored_kgw(view_db)
    status, page = get(f"{viewer_url}/?watermark=exp")
    assert status == 200 and text_of(page, "shown") == "0 of 0"
    said = text_of(page, "matched-watermark")
    assert said == f"watermark=exp matched nothing; available: {short_name(spec)} ({spec}), none"
    assert api(f"{viewer_url}/api/results?watermark=exp")["matched"] == {"watermark": []}
    assert "matched nothing; available: lowercase, none" in text_of(get(f"{viewer_url}/?attack=paraphrase")[1],
                                                                     "matched-attack")


def test_compare_takes_a_scheme_name(viewer_url: str, view_db: Path, two_kgw_url: str) -> None:
    spec = stored_kgw(view_db)
    found = api(f"{viewer_url}/api/compare?watermark_a=none&watermark_b=kgw&all=1")
    assert found["pairs"] == 18 and found["b"] == spec and found["matched"]["watermark_b"] == [spec]
    status, page = get(f"{viewer_url}/compare?watermark_a=none&watermark_b=kgw")
    assert status == 200 and text_of(page, "compare-summary").startswith("18 pairs on the same cases")
    assert text_of(page, "matched-watermark_b") == f"watermark_b=kgw matched: kgw ({spec})"
    # a name that no stored watermark has is refused with the choices (was: "0 pairs", no hint)
    status, body = get(f"{viewer_url}/api/compare?watermark_a=exp&watermark_b=none")
    assert status == 400 and f"watermark_a=exp matches no stored watermark; stored: kgw ({spec}); none" in body
    status, page = get(f"{viewer_url}/compare?watermark_a=exp&watermark_b=none")
    assert status == 200 and "matches no stored watermark" in text_of(page, "compare-error")
    # with two kgw setups, the short name picks one; each side is one spec
    found = api(f"{two_kgw_url}/api/compare?" + urlencode({"watermark_a": "kgw", "watermark_b": "kgw γ=0.5"}))
    assert found["a"] == stored_kgw(view_db) and found["b"] == KGW_HALF


def test_the_blank_compare_page_says_what_to_pick(viewer_url: str, view_db: Path) -> None:
    status, page = get(f"{viewer_url}/compare")
    help_text = text_of(page, "compare-help")
    assert status == 200 and "two runs" in help_text and "two watermarks" in help_text
    assert "This store holds 1 run(s): comparing runs needs two." in help_text
    start = re.search(r"<a class='start' href='([^']+)'>", page)
    assert start and "none vs kgw" in help_text
    status, page = get(f"{viewer_url}{html.unescape(start.group(1))}")
    assert text_of(page, "compare-summary").startswith("18 pairs on the same cases")
    assert "id='compare-help'" not in page


def _watermarked_result(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT result_id FROM results WHERE watermark != 'none' AND attack = 'none' "
                            "ORDER BY result_id LIMIT 1").fetchone()[0]


def test_the_p_value_curve_has_labelled_axes_and_says_when_it_is_capped(
        viewer_url: str, view_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result_id = _watermarked_result(view_db)
    status, page = get(f"{viewer_url}/results/{result_id}")
    curve = re.search(r"<svg class='pcurve'.*?</svg>", page, re.S)
    assert status == 200 and curve
    svg = curve.group()
    assert "class='x-label'" in svg and "tokens of the text" in svg
    assert "class='y-label'" in svg and "−log10 p" in svg
    assert svg.count("class='y-tick'") >= 2 and svg.count("class='x-tick'") >= 2
    assert "class='capped'" not in svg  # 60 tokens of kgw stay far above 1e-50
    assert api(f"{viewer_url}/api/results/{result_id}")["metadata"]["p_value"] < 1e-2
    # a cap below the text's p-value: the curve says it is capped, from which token, and the true p
    monkeypatch.setattr(pages, "P_CAP", 2.0)
    svg = re.search(r"<svg class='pcurve'.*?</svg>", get(f"{viewer_url}/results/{result_id}")[1], re.S).group()
    note = re.search(r"<text class='capped'[^>]*>([^<]*)<", svg)
    assert note and re.fullmatch(r"capped: from token \d+, p &lt; 1e-2 is drawn at 2 \(lowest p = [^)]+\)",
                                 note.group(1)), note


def test_judge_answers_show_the_parsed_value_with_the_raw_answer_folded(viewer_url: str, view_db: Path) -> None:
    result_id = _watermarked_result(view_db)
    page = get(f"{viewer_url}/results/{result_id}")[1]
    judged = re.search(r"<table id='judgements'>.*?</table>", page, re.S)
    assert judged
    raw = api(f"{viewer_url}/api/results/{result_id}")["judgements"][0]["raw"]
    cell = judged.group()
    assert "<b>label</b> SCORED" in cell and "<b>quality</b> " in cell and "<b>perplexity</b> " in cell
    folded = re.search(r"<details><summary>raw answer \(([\d,]+) characters\)</summary><pre>(.*?)</pre></details>",
                       cell, re.S)
    assert folded and html.unescape(folded.group(2)) == raw and folded.group(1) == f"{len(raw):,}"
    assert cell.count(html.escape(raw, quote=True)) == 1  # only folded


def test_a_group_judges_long_answer_is_counted_not_listed() -> None:
    """MAUVE's answer holds 100 resampled values: the page says how many, and folds the raw."""
    replicates = [0.9 + i / 1000 for i in range(100)]
    raw = json.dumps({"mauve": 0.93, "low": 0.9, "high": 0.97, "replicates": replicates})
    cell = pages.judge_answer({"raw": raw, "parsed": {
        "label": "SCORED", "quality": 0.93, "interval": [0.9, 0.97], "replicates": replicates,
        "about": {"watermark": KGW_HALF, "attack": "none"}}})
    shown = cell.split("<details>")[0]
    assert "<b>quality</b> 0.93" in shown and "<b>interval</b> [0.9, 0.97]" in shown
    assert "<b>replicates</b> 100 values" in shown and "watermark kgw γ=0.5" in shown
    assert "0.901" not in shown and "<summary>raw answer" in cell


def test_the_caches_are_warmed_in_the_background_at_start(view_db: Path, view_key: str) -> None:
    """The first result with token evidence (the tokenizer's load) and the first charts page
    (the report over every result) were seconds with no sign of work; the server fills both
    as it starts, and stopping it stops the warmer."""
    viewer = Viewer(view_db, key=view_key)
    server = make_server(viewer, "127.0.0.1", 0)
    try:
        assert viewer.warmed.wait(timeout=300)
        assert viewer.charts.ready(None)  # the first /charts is the cached page
        status, _, body = viewer.handle(f"/results/{_watermarked_result(view_db)}", {})
        assert status == 200 and b"<div class='text tokens'>" in body
    finally:
        server.server_close()
        viewer.close()
    # without warm, nothing starts
    quiet = Viewer(view_db, key=None)
    make_server(quiet, "127.0.0.1", 0, warm=False).server_close()
    assert not quiet.warmed.wait(timeout=0.5) and not quiet.charts.ready(None)
