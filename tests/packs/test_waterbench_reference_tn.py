"""The ``waterbench`` pack's TN on reference answers, end to end on the embedded model and a real
store: ``evalrun run`` tokenizes each case's reference answer with the model's tokenizer, the
pack's (unchanged) grader detects it with the run's key, and the report's TN counts those
verdicts -- a reference that is watermarked text is a false positive, a human one a true
negative -- and the unwatermarked outputs only for a case without a reference. A store without
reference verdicts falls back to unwatermarked outputs and says so; the key is never stored."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalrun.metrics.waterbench import level_label, waterbench_records
from evalrun.pack.grade import REFERENCE_TRANSFORM
from evalrun.pack.loading import resolve_pack

pytestmark = pytest.mark.slow

KEY = "wb-reference-tn-secret-4417"
MARK = "kgw:delta=4"
PLAIN_REFERENCE = ("The sun warms water in seas, lakes and puddles, and some of it turns into invisible vapour that "
                   "rises into the sky. High up it is cold, so the vapour turns back into tiny drops that gather "
                   "into clouds, and when the drops are too heavy to float they fall down as rain.")


def evalrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def waterbench_copy(root: Path, cases: list[dict[str, Any]]) -> Path:
    """The shipped pack (its grader.py, pack.toml and schema as they are) with ``cases``."""
    pack = root / "waterbench"
    shutil.copytree(resolve_pack("waterbench", []), pack)
    for old in (pack / "cases").iterdir():
        old.unlink()
    (pack / "cases" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return pack


def stored(db: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM results")]
    finally:
        conn.close()


def meta(rows: list[dict[str, Any]], case_id: str, watermarked: bool) -> dict[str, Any]:
    [row] = [r for r in rows if r["case_id"] == case_id and (r["watermark"] != "none") == watermarked]
    return json.loads(row["metadata_json"])


def tn_all(rows: list[dict[str, Any]]) -> Any:
    [tn] = [r for r in waterbench_records(rows) if r.metric == "wb_tn" and level_label(r.params) == "all"]
    return tn


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, Path, list[str]]:
    """A watermarked text made with the key, then a run whose cases hold it as a reference
    answer, a human reference answer, and no reference."""
    tmp = tmp_path_factory.mktemp("wb_tn")
    story = {"id": "c5-story", "category": "open_ended", "task": "5-2 story continuation", "gm_metric": "none",
             "input": "Continue the story: The storm had kept everyone indoors for three days."}
    first = waterbench_copy(tmp / "first", [story])
    evalrun("run", "--pack", str(first), "--watermark", MARK, "--key", KEY, "--max-tokens", "60",
            "--out", str(tmp / "first.sqlite"), "--no-progress", cwd=tmp)
    [made] = stored(tmp / "first.sqlite")
    made_meta = json.loads(made["metadata_json"])
    assert made_meta["detected"] and made_meta["num_tokens_scored"] >= 20, made_meta
    cases = [
        {"id": "c2-marked", "category": "short_input_long_answer", "task": "2-1 explain like i am five",
         "input": "Explain, as if to a five-year-old, why it snows.", "gm_metric": "rouge_l",
         "reference": made["raw_output"]},
        {"id": "c2-plain", "category": "short_input_long_answer", "task": "2-1 explain like i am five",
         "input": "Explain, as if to a five-year-old, why it rains.", "gm_metric": "rouge_l",
         "reference": PLAIN_REFERENCE},
        {**story, "id": "c5-open"},
    ]
    pack = waterbench_copy(tmp / "second", cases)
    db = tmp / "results.sqlite"
    args = ["run", "--pack", str(pack), "--watermark", "none", "--watermark", MARK, "--key", KEY, "--max-tokens", "30",
            "--out", str(db), "--no-progress"]
    evalrun(*args, "--report", str(tmp / "rep"), cwd=tmp)
    return tmp, db, args


def test_a_watermarked_reference_is_a_false_positive_and_a_human_one_a_true_negative(run) -> None:
    tmp, db, _ = run
    rows = stored(db)
    marked, plain = meta(rows, "c2-marked", True), meta(rows, "c2-plain", True)
    assert marked["reference_detection"]["detected"] is True and marked["reference_detection"]["z_score"] >= 4
    assert plain["reference_detection"]["detected"] is False
    assert "reference_detection" not in meta(rows, "c5-open", True)  # no reference to detect
    open_detected = next(iter(meta(rows, "c5-open", False)["detections"].values()))["detected"]
    tn = tn_all(rows)
    # the two references and the one unwatermarked output without a reference; not the
    # unwatermarked outputs of the cases with one
    assert tn.n == 3 and tn.params["tn_references"] == 2 and tn.params["tn_outputs"] == 1
    assert tn.value == pytest.approx((1 + (not open_detected)) / 3)
    report = (tmp / "rep" / "report.md").read_text()
    assert "3: 2 ref + 1 out" in report  # the TN cell of the "all" row, brackets escaped


def test_a_store_without_reference_verdicts_falls_back_and_a_new_run_adds_them(run, tmp_path: Path) -> None:
    tmp, db, args = run
    old = tmp_path / "old.sqlite"
    src, dst = sqlite3.connect(db), sqlite3.connect(old)
    src.backup(dst)
    src.close()
    dst.execute("DELETE FROM transforms WHERE attack = ?", (REFERENCE_TRANSFORM,))
    dst.commit()
    dst.close()
    evalrun("regrade", "--db", str(old), "--key", KEY, cwd=tmp_path)
    rows = stored(old)
    assert all("reference_detection" not in json.loads(r["metadata_json"]) for r in rows)
    tn = tn_all(rows)
    plain_verdicts = [next(iter(json.loads(r["metadata_json"])["detections"].values()))["detected"]
                      for r in rows if r["watermark"] == "none"]
    assert tn.params == {"level": "all", "tn_references": 0, "tn_outputs": 3, "tn_references_missing": 2}
    assert tn.value == pytest.approx(sum(not v for v in plain_verdicts) / 3)
    evalrun(*[str(old) if a == str(db) else a for a in args], cwd=tmp_path)  # outputs cached: references added
    again = tn_all(stored(old))
    assert again.params["tn_references"] == 2 and meta(stored(old), "c2-marked", True)["reference_detection"]["detected"]


def test_the_key_is_not_stored(run) -> None:
    _, db, _ = run
    for path in db.parent.glob("results.sqlite*"):
        assert KEY.encode() not in path.read_bytes(), path
