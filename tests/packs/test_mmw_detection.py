"""The MarkMyWords detection grader end to end on the embedded model: watermarked outputs are
detected with their evidence; unwatermarked ones give a false-positive rate consistent with the
pack's p-value threshold (0.02), as a calibrated detector must."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats

KGW = "kgw:delta=2,gamma=0.25"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("mmw")
    db = tmp / "mmw.sqlite"
    proc = subprocess.run([sys.executable, "-m", "evalrun.cli", "run", "--pack", "mmw_book_reports", "--model",
                           "embedded", "--watermark", "none", "--watermark", KGW, "--key", "fpr-test-key",
                           "--max-tokens", "40", "--out", str(db), "--no-progress"],
                          cwd=tmp, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return db


def rows(db: Path, watermark_none: bool) -> list[dict]:
    conn = sqlite3.connect(db)
    try:
        op = "=" if watermark_none else "!="
        return [{"label": label, "meta": json.loads(meta)} for label, meta in conn.execute(
            f"SELECT label, metadata_json FROM results WHERE watermark {op} 'none'")]
    finally:
        conn.close()


def test_unwatermarked_outputs_give_the_thresholds_false_positive_rate(store: Path) -> None:
    plain = rows(store, watermark_none=True)
    assert len(plain) == 100
    spec = next(iter(plain[0]["meta"]["detections"]))
    assert spec.startswith("kgw:") and "gamma=0.25" in spec
    p_values = [r["meta"]["detections"][spec]["p_value"] for r in plain]
    false_positives = sum(p <= 0.02 for p in p_values)
    assert false_positives == sum(r["label"] == "DETECTED" for r in plain)
    low, high = stats.binom.interval(0.95, 100, 0.02)  # where 100 draws at rate 0.02 fall
    assert low <= false_positives <= high, (false_positives, (low, high))


def test_watermarked_outputs_are_detected_with_their_evidence(store: Path) -> None:
    marked = rows(store, watermark_none=False)
    assert len(marked) == 100
    detected = [r for r in marked if r["label"] == "DETECTED"]
    assert len(detected) >= 80  # 40 tokens at delta 2
    for r in marked:
        m = r["meta"]
        assert set(m) >= {"p_value", "z_score", "num_tokens_scored", "size", "sizes", "detected", "threshold"}
        assert m["threshold"] == 0.02 and (m["p_value"] <= 0.02) == m["detected"]
        # the whole text is a prefix: detected means MarkMyWords' first crossing found one
        crossing, spent = m["sizes"]["first_crossing"], m["sizes"]["alpha_spending"]
        assert crossing is not None or not m["detected"]
        # the default rule asks more of each prefix: never earlier than the first crossing
        assert m["size"] == spent and (spent is None or (crossing is not None and spent >= crossing))
        for size in (crossing, spent):
            assert size is None or 1 <= size <= m["num_tokens_scored"] + 1
