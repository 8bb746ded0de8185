"""report.html in headless Chromium: the tables render, images are inline, and no script runs
(the fixture store holds a model answer and a case instruction that try to run script)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKER = ROOT / "scripts" / "check_report_html.py"


def _chromium() -> str | None:
    sys.path.insert(0, str(CHECKER.parent))
    try:
        import check_report_html
    finally:
        sys.path.pop(0)
    return check_report_html.find_chromium()


#: skipped only off CI: .ci/run installs Debian's chromium, so there a missing browser fails
needs_chromium = pytest.mark.skipif(_chromium() is None and not os.environ.get("CI"),
                                    reason="no chromium binary (apt-get install chromium)")


def _run_checker(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECKER), str(page), *args],
                          capture_output=True, text=True, timeout=180)


@needs_chromium
def test_report_renders_in_chromium_without_script(three_model_report: Path) -> None:
    required = ["watermark-robustness-summary", "watermark-robustness-by-family",
                "hidden-message-extraction-summary", "hidden-message-extraction-by-scheme",
                "watermark-robustness-cases", "hidden-message-extraction-cases",
                "toy-pack-generic", "latency", "tokens", "provenance", "models"]
    proc = _run_checker(three_model_report / "report.html",
                        *[a for t in required for a in ("--require-table", t)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 embedded images" in proc.stdout


@needs_chromium
def test_report_with_the_watermark_benchmark_passes(benchmark_report: Path) -> None:
    required = ["benchmark-summary", "benchmark-size", "benchmark-tamper", "benchmark-attacks",
                "benchmark-detection", "provenance"]
    proc = _run_checker(benchmark_report / "report.html",
                        *[a for t in required for a in ("--require-table", t)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 embedded images" in proc.stdout


@needs_chromium
def test_checker_catches_a_page_where_script_runs(tmp_path: Path) -> None:
    """The check must be able to fail: a page whose script edits the DOM is rejected, both for
    the <script> element in the file and for the change seen in the rendered DOM, and a
    required table that is absent is reported."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>t</title></head><body>"
        '<table id="x"><tbody><tr><td>1</td></tr></tbody></table>'
        "<script>document.body.setAttribute('data-pwned', '1');"
        "document.title = 'PWNED';</script></body></html>", encoding="utf-8")
    proc = _run_checker(page, "--require-table", "provenance")
    assert proc.returncode == 1
    assert "file: <script> element present" in proc.stdout
    assert "rendered DOM differs" in proc.stdout
    assert "required table #provenance missing" in proc.stdout
