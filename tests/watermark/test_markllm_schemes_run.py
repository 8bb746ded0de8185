"""The seven MarkLLM schemes in a MarkMyWords-style benchmark run: `evalrun run` generates
with each on the embedded model, the shipped detection grader detects each from the store (the
generating model's logits for SWEET, EWD and Unbiased), and the report's Table V-style summary
has a row for each."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalrun.watermark import parse_watermark

ROOT = Path(__file__).resolve().parents[2]
SCHEMES = ["dipmark", "unbiased", "pf", "sweet", "ewd", "exp_gumbel", "morphmark"]
KEY = "markllm schemes run key"
CASES = 4


def _pack(root: Path) -> Path:
    """The first cases of MarkMyWords' book reports, with the shipped detection grader."""
    shipped = ROOT / "packs" / "mmw_book_reports"
    pack = root / "mmw_mini"
    (pack / "cases").mkdir(parents=True)
    toml = (shipped / "pack.toml").read_text().replace('name = "mmw_book_reports"', 'name = "mmw_mini"')
    (pack / "pack.toml").write_text(toml)  # grader = "detection": the shared detection grader
    lines = (shipped / "cases" / "book_reports.jsonl").read_text().splitlines()[:CASES]
    (pack / "cases" / "book_reports.jsonl").write_text("\n".join(lines) + "\n")
    return pack


@pytest.mark.slow
def test_markllm_schemes_generate_detectably_and_reach_the_summary(tmp_path: Path) -> None:
    pack = _pack(tmp_path)
    db, reports = tmp_path / "wm.sqlite", tmp_path / "reports"
    args = [sys.executable, "-m", "evalrun.cli", "run", "--pack", str(pack), "--max-tokens", "100",
            "--watermark", "none", "--out", str(db), "--report", str(reports), "--no-progress"]
    for spec in SCHEMES:
        args += ["--watermark", spec]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "EVALRUN_WATERMARK_KEY": KEY}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT watermark, label, reason, metadata_json FROM results").fetchall()
    conn.close()
    assert len(rows) == CASES * (len(SCHEMES) + 1)
    canon = {parse_watermark(s).spec.canonical(): s for s in SCHEMES}  # type: ignore[union-attr]
    false_alarms = 0
    for watermark, label, reason, metadata in rows:
        if watermark == "none":
            detections = json.loads(metadata)["detections"]
            assert set(detections) == set(canon), detections  # detected under every scheme of the run
            false_alarms += label != "NOT_DETECTED"
        else:
            assert watermark in canon
            assert label == "DETECTED", (canon[watermark], reason)
    # each unwatermarked output is tested under 7 detectors at 0.02: about 13% flagged each
    assert false_alarms <= 2
    summary = (reports / "report.md").read_text()
    for spec in canon:
        assert spec in summary
    assert KEY not in summary + proc.stdout + proc.stderr
