"""A store written by release 1 (tests/data/release1.sqlite): read as it is by report and
export, upgraded in place by regrade and run with nothing lost; a newer store is refused."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalrun.store.database import SCHEMA_VERSION

RELEASE1 = Path(__file__).resolve().parents[1] / "data" / "release1.sqlite"


def evalrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def q(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "r1.sqlite"
    shutil.copy(RELEASE1, db)
    return db


def test_the_fixture_is_a_release_1_store() -> None:
    assert q(RELEASE1, "PRAGMA user_version") == [(1,)]
    assert q(RELEASE1, "SELECT COUNT(*), COUNT(DISTINCT run_id) FROM results") == [(18, 4)]


def test_report_and_export_read_it_as_it_is(store: Path, tmp_path: Path) -> None:
    digest = hashlib.sha256(store.read_bytes()).hexdigest()
    proc = evalrun("report", "--db", str(store), "--out", str(tmp_path / "rep"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "18 results (17 graded, 1 generation errors, 0 grader errors)" in md
    assert md.count("| finished ") >= 4  # release 1 recorded finished_at for every run
    for fmt in ("csv", "jsonl"):
        proc = evalrun("export", "--db", str(store), "--format", fmt, "--out", str(tmp_path / f"x.{fmt}"),
                       cwd=tmp_path)
        assert proc.returncode == 0 and "exported 18 results" in proc.stdout, proc.stderr
    assert hashlib.sha256(store.read_bytes()).hexdigest() == digest
    assert q(store, "PRAGMA user_version") == [(1,)]


def test_regrade_upgrades_it_in_place_keeping_every_row(store: Path, tmp_path: Path) -> None:
    before = q(store, "SELECT result_id, raw_output, score, label, attacked_output FROM results ORDER BY 1")
    legacy = {v for row in q(store, "SELECT gen_key, item_key FROM results WHERE watermark != 'none'") for v in row}
    old_attacks = q(store, "SELECT result_id, attack FROM results ORDER BY 1")
    proc = evalrun("regrade", "--db", str(store), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "regraded 17 results, 0 changed" in proc.stdout
    assert q(store, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert q(store, "SELECT result_id, raw_output, score, label, attacked_output FROM results ORDER BY 1") == before
    assert q(store, "SELECT DISTINCT status FROM runs") == [("finished",)]
    # release 1's swap was the neighbour swap: renamed, with its item key, and its attacked texts
    # kept as transforms so regrading read exactly the text release 1 graded
    new_attacks = dict(q(store, "SELECT result_id, attack FROM results"))
    for result_id, attack in old_attacks:
        assert new_attacks[result_id] == ("neighbour_swap:p=0.2" if attack == "swap:p=0.2" else attack)
    from evalrun._util.hashing import sha256_hex
    for gen_key, attack, item_key, watermark in q(store, "SELECT gen_key, attack, item_key, watermark FROM results"):
        # watermarked results' keys were derived from the watermark key: re-keyed (schema 5), so
        # nothing in the store lets a guessed key be tested; the others keep their derivation
        assert (item_key == sha256_hex("item", gen_key, attack)) == (watermark == "none")
    moved = q(store, "SELECT t.text, r.attacked_output FROM results r JOIN transforms t USING (transform_key)")
    assert len(moved) == 7 and all(text == attacked for text, attacked in moved)
    # the key-derived values of release 1 (a fixed-salt digest of the key: testable) are gone
    assert legacy and not any(v.encode() in store.read_bytes() for v in legacy)


def test_a_new_run_goes_into_it(store: Path, tmp_path: Path) -> None:
    proc = evalrun("run", "--pack", "watermark_robustness", "--model", "reference", "--select",
                   "rewrite_001 or rewrite_003", "--out", str(store), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 results generated, 1 cached" in proc.stdout
    assert q(store, "SELECT COUNT(*), COUNT(DISTINCT run_id) FROM results") == [(19, 5)]
    assert q(store, "SELECT status FROM runs ORDER BY started_at DESC LIMIT 1") == [("finished",)]


def test_a_store_from_a_newer_release_is_refused(store: Path, tmp_path: Path) -> None:
    conn = sqlite3.connect(store)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    for args in (["report", "--db", str(store), "--out", str(tmp_path / "rep")],
                 ["regrade", "--db", str(store)],
                 ["run", "--pack", "watermark_robustness", "--model", "reference", "--out", str(store)]):
        proc = evalrun(*args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert (f"written by a newer evalrun (schema version {SCHEMA_VERSION + 1}); this evalrun reads"
                f" versions 1 to {SCHEMA_VERSION}: upgrade evalrun") in proc.stderr
