"""The README's main command, run as written, and the report excerpt the README shows from it.

The excerpt's detection numbers (size E and its false-positive rate, R, detection rate, FPR,
ROC AUC) come from token ids and counts, identical on any CPU (docs/reproducibility.md), so
they must equal the fresh run's. Its MAUVE numbers move on another CPU (a sampled token at a
near-tie changes a text; k-means then moves the score) inside their 95% intervals, so there
the README's value must lie inside the fresh run's interval.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from evalrun.metrics.aggregates import params_key
from evalrun.report.benchmark import SIZE, fmt
from evalrun.testing.browser import Browser, find_chromium
from evalrun.testing.layout import layout_problems

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")

#: excerpt column -> (metric, attack, params, portable across CPUs)
COLUMNS = {
    "quality (MAUVE)": ("quality", "none", {"quality": "mauve"}, False),
    "quality degradation": ("quality_degradation", "none", {"quality": "mauve"}, False),
    "watermark size E (tokens)": ("watermark_size", "none", SIZE, True),
    "size FPR": ("size_false_positive_rate", "none", SIZE, True),
    "tamper resistance R": ("tamper_resistance", "*", {"quality": "mauve"}, True),
    "detection rate": ("detection_rate", "none", {}, True),
    "FPR": ("false_positive_rate", "none", {}, True),
    "ROC AUC": ("roc_auc", "none", {}, True),
}


def main_command() -> list[str]:
    """The README's second set-up command (the first ``evalrun run`` line)."""
    line = next(line for line in README.splitlines() if line.startswith("evalrun run --pack mmw_book_reports"))
    return shlex.split(line)


def excerpt() -> dict[str, dict[str, str]]:
    """The README's report excerpt: scheme name (``kgw``, ``exp``) -> column -> cell."""
    lines = [line for line in README.splitlines() if line.startswith("| ")]
    header = next(i for i, line in enumerate(lines) if line.startswith("| watermark | quality (MAUVE)"))
    names = [c.strip() for c in lines[header].strip("|").split("|")]
    out = {}
    for line in lines[header + 1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != len(names):
            break
        scheme = re.match(r"`(\w+)`", cells[0])
        if scheme:
            out[scheme.group(1)] = dict(zip(names, cells))
    return out


def test_the_readme_states_the_excerpt_of_its_command() -> None:
    """Offline checks of the README itself: the command is the main job, the excerpt has its
    two schemes and every column."""
    args = main_command()
    assert args[:4] == ["evalrun", "run", "--pack", "mmw_book_reports"] and "--report" in args
    rows = excerpt()
    assert set(rows) == {"kgw", "exp"}
    assert all(set(COLUMNS) <= set(r) for r in rows.values())


@pytest.mark.slow
def test_the_main_job_reports_what_the_readme_shows(tmp_path: Path) -> None:
    args = main_command()
    proc = subprocess.run([sys.executable, "-m", "evalrun.cli", *args[1:], "--no-progress"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=1200,
                          env={k: v for k, v in os.environ.items() if k != "EVALRUN_WATERMARK_KEY"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = tmp_path / args[args.index("--report") + 1]
    records = json.loads((report / "metrics.json").read_text(encoding="utf-8"))
    by_key = {(r["metric"], r["watermark"].split(":")[0], r["attack"], params_key(r["params"])): r for r in records}
    for scheme, row in excerpt().items():
        for column, (metric, attack, params, portable) in COLUMNS.items():
            rec = by_key[(metric, scheme, attack, params_key(params))]
            shown = row[column].split(" ")[0]
            if portable:
                assert shown == fmt(metric, rec["value"]), (scheme, column, shown, rec)
            else:  # the README's value inside the fresh run's 95% interval
                value = float(shown.rstrip("%")) / (100 if shown.endswith("%") else 1)
                assert rec["ci_low"] - 5e-4 <= value <= rec["ci_high"] + 5e-4, (scheme, column, shown, rec)
        saturated = by_key[("tamper_resistance", scheme, "*", params_key({"quality": "mauve"}))]["params"]["saturated"]
        assert ("saturated" in row["tamper resistance R"]) == saturated, (scheme, row["tamper resistance R"])
    # the closing lines name the report written, and the summary names watermarks by short name
    assert f"evalrun: report: {args[args.index('--report') + 1].rstrip('/')}/report.md" in proc.stdout
    assert "kgw γ=0.5 " in proc.stdout and "randomness=window" not in proc.stdout
    # its report.html reads at 1280 px (.ci/run installs Chromium; elsewhere, when one is found)
    if find_chromium() or os.environ.get("CI"):
        with Browser.start(width=1280) as browser:
            browser.open((report / "report.html").as_uri())
            assert layout_problems(browser) == []
