"""The viewer in a real browser (headless Chromium over the DevTools protocol): browse, filter,
open a result, see its tokens coloured, compare two watermarks, hover and follow a chart point;
the key never reaches a page."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from evalrun.testing.browser import Browser

# needs Chromium (.ci/run installs Debian's); without one Browser.start fails saying how to get it
pytestmark = pytest.mark.slow


def kgw_spec(db: Path) -> str:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT DISTINCT watermark FROM results WHERE watermark != 'none'").fetchone()[0]


def test_browse_filter_open_compare_and_charts(viewer_url: str, view_db: Path, view_key: str,
                                               tmp_path: Path) -> None:
    spec = kgw_spec(view_db)
    with Browser.start() as browser:
        pages = []
        browser.open(f"{viewer_url}/")
        assert browser.evaluate("document.querySelectorAll('#results tbody tr').length") == 36
        pages.append(browser.html())
        # filter: the form's own fields, submitted by its button
        browser.choose("select[name=watermark]", spec)
        browser.choose("select[name=attack]", "lowercase")
        browser.click("#apply")
        query = parse_qs(urlsplit(browser.url).query)
        assert query["watermark"] == [spec] and query["attack"] == ["lowercase"]
        assert browser.evaluate("document.getElementById('shown').textContent") == "1–9 of 9"
        cells = browser.evaluate("[...document.querySelectorAll('#results tbody tr')].map(r => r.cells[5].textContent)")
        assert cells == ["lowercase"] * 9
        pages.append(browser.html())
        # sort by score, highest first, by clicking its header twice
        browser.click("#results th:nth-child(9) a")
        browser.click("#results th:nth-child(9) a")
        assert parse_qs(urlsplit(browser.url).query)["order"] == ["desc"]
        # open a result: its tokens are coloured, with the running p-value drawn
        browser.click("a.result-link")
        assert browser.evaluate("document.title").startswith("Result ")
        coloured = browser.evaluate("[...document.querySelectorAll('.tokens span')].map(s => s.className)")
        assert coloured and {"tok-green", "tok-red"} <= {c.split()[0] for c in coloured if c}
        assert browser.evaluate("document.querySelectorAll('svg.pcurve polyline').length") == 2  # output, attacked
        assert browser.evaluate("document.querySelector('.tokens span').title").startswith("token 1, id ")
        assert browser.evaluate("!!document.querySelector('#diff ins') || !!document.querySelector('#diff del')")
        browser.screenshot(tmp_path / "result.png")
        pages.append(browser.html())
        # compare the two watermarks on the same cases
        browser.open(f"{viewer_url}/compare")
        browser.choose("#compare-watermarks select[name=watermark_a]", "none")
        browser.choose("#compare-watermarks select[name=watermark_b]", spec)
        browser.click("#compare-watermarks button")
        summary = browser.evaluate("document.getElementById('compare-summary').textContent")
        assert summary.startswith("18 pairs on the same cases")
        pages.append(browser.html())
        # the tamper-resistance chart: a point names its attack on hover and opens its results
        browser.open(f"{viewer_url}/charts")
        assert browser.evaluate("document.images.length") > 0  # the report's charts, served by the viewer
        assert browser.evaluate("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
        tips = browser.evaluate("[...document.querySelectorAll('svg.tamper circle title')].map(t => t.textContent)")
        assert any(t.startswith("lowercase: quality retention") for t in tips)
        target = browser.evaluate("document.querySelector('svg.tamper a').getAttribute('href')")
        browser.open(f"{viewer_url}{target}")
        assert parse_qs(urlsplit(browser.url).query)["attack"] == ["lowercase"]
        assert browser.evaluate("document.getElementById('shown').textContent") == "1–9 of 9"
        pages.append(browser.html())
        # no script ran and none could: the page has no script element, the CSP allows none
        assert browser.evaluate("document.scripts.length") == 0
    assert (tmp_path / "result.png").stat().st_size > 10_000
    assert all(view_key not in page for page in pages)


def test_the_main_pages_fit_1280_px(viewer_url: str, view_db: Path) -> None:
    """The list, a result with its evidence, compare (blank and filled) and charts, read at
    1280 px: no table wider than its box, nothing past the page's edge, no stretched row; the
    tamper plot's header (short name, model, pack, R) stays above its points."""
    from evalrun.testing.layout import layout_problems

    spec = kgw_spec(view_db)
    with sqlite3.connect(f"file:{view_db}?mode=ro", uri=True) as conn:
        [rid] = conn.execute("SELECT result_id FROM results WHERE watermark != 'none' AND attack = 'lowercase' "
                             "ORDER BY result_id LIMIT 1").fetchone()
    pages = ["/", f"/results/{rid}", "/compare", f"/compare?watermark_a=none&watermark_b={spec}", "/charts",
             "/?watermark=kgw"]
    with Browser.start(width=1280) as browser:
        for page in pages:
            browser.open(f"{viewer_url}{page}")
            assert browser.evaluate("document.documentElement.clientWidth") <= 1280
            assert layout_problems(browser) == [], page
            if page == "/charts":
                header = browser.evaluate("[...document.querySelectorAll('svg.tamper > text')].slice(0, 2)"
                                          ".map(t => t.getBBox().y + t.getBBox().height)")
                points = browser.evaluate("[...document.querySelectorAll('svg.tamper circle')]"
                                          ".map(c => c.getBBox().y)")
                assert header and points and max(header) < min(points), (header, points)
                assert "R = " in browser.evaluate("document.querySelector('svg.tamper').textContent")
