"""report.html of a main-job-shaped store read at 1280 px in headless Chromium: no table wider
than its box, nothing past the page's edge, no row stretched far beyond its content; and the
check itself catches each fault."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from evalrun.report import build_report
from evalrun.testing.browser import Browser
from evalrun.testing.layout import layout_problems

from .conftest import MAIN_EXP, MAIN_KGW
from .test_report_html import needs_chromium

pytestmark = [pytest.mark.slow, needs_chromium]


def test_the_main_jobs_report_fits_1280_px(tmp_path: Path, main_job_store: Callable[[Path, int], Path]) -> None:
    out = tmp_path / "report"
    build_report(main_job_store(tmp_path / "r.sqlite", 12), out)
    with Browser.start(width=1280) as browser:
        browser.open((out / "report.html").as_uri())
        assert browser.evaluate("document.documentElement.clientWidth") <= 1280
        assert browser.evaluate("document.querySelectorAll('table').length") > 10
        assert layout_problems(browser) == []
        # the summary shows short names, the full spec a hover away
        names = browser.evaluate("[...document.querySelectorAll('#benchmark-summary td.spec')].map(c => c.textContent)")
        assert names == ["none (unwatermarked)", "exp", "kgw"], names  # every parameter a default
        titles = browser.evaluate("[...document.querySelectorAll('#benchmark-summary td.spec span')].map(s => s.title)")
        assert titles == [MAIN_EXP, MAIN_KGW]


def test_the_check_finds_each_fault(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    long = "word " * 20
    page.write_text(
        "<!DOCTYPE html><html><body style='margin:0'>"
        "<div class='scroll' style='width:300px;overflow-x:auto'><table id='wide'><tr>"
        + "".join(f"<td style='white-space:nowrap'>{long}</td>" for _ in range(3)) + "</tr></table></div>"
        "<table id='tall'><tr><td style='height:900px'>x</td></tr></table>"
        "<div id='past' style='width:2000px'>x</div></body></html>", encoding="utf-8")
    with Browser.start(width=1280) as browser:
        browser.open(page.as_uri())
        found = layout_problems(browser)
    assert any(p.startswith("table#wide is") for p in found), found
    assert any(p.startswith("table#tall has a row") for p in found), found
    assert any("div#past reaches" in p for p in found), found
