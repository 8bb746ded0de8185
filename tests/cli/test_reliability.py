"""Hostile inputs through the command line, each a probe that once ended in a traceback, a
silent success or a wrong result: now one line, exit 2, and nothing computed is lost."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def evalrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={k: v for k, v in os.environ.items() if k != "EVALRUN_WATERMARK_KEY"})


def one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The single stderr line of a refused command (exit 2), holding every needle."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr[-3000:])
    assert lines[0].startswith("evalrun: error: ") and all(n in lines[0] for n in needles), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of the reference solver on the WMID robustness pack (50 results)."""
    where = tmp_path_factory.mktemp("stored")
    db = where / "results.sqlite"
    proc = evalrun("run", "--pack", "watermark_robustness", "--model", "reference", "--out", str(db), "--no-progress",
                   cwd=where)
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db


def damage(source: Path, target: Path) -> Path:
    data = bytearray(source.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    pages = len(data) // page
    data[(pages // 2) * page:(pages // 2 + 2) * page] = b"\x13" * (2 * page)
    target.write_bytes(bytes(data))
    return target


@pytest.mark.parametrize("command", [
    ["report", "--db", "{db}", "--out", "{tmp}/report"],
    ["export", "--db", "{db}", "--format", "csv", "--out", "{tmp}/out.csv"],
    ["regrade", "--db", "{db}"],
    ["run", "--pack", "watermark_robustness", "--model", "reference", "--out", "{db}", "--no-progress"],
    ["view", "--db", "{db}", "--port", "0"],
])
def test_a_damaged_store_is_one_line_for_every_command(stored: Path, tmp_path: Path, command: list[str]) -> None:
    db = damage(stored, tmp_path / "damaged.sqlite")
    before = db.read_bytes()
    proc = evalrun(*(c.format(db=db, tmp=tmp_path) for c in command), cwd=tmp_path)
    one_line(proc, str(db), "damaged (", ".recover")
    assert db.read_bytes() == before


@pytest.mark.parametrize("args, needles", [
    (["--watermark", "kgw:delta=nan", "--key", "k"], ["--watermark kgw:delta=nan", "delta=nan is not a finite number"]),
    (["--watermark", "exp:skip=inf", "--key", "k"], ["skip=inf is not a finite number"]),
    (["--attack", "swap:p=nan"], ["--attack swap:p=nan", "p=nan is not a finite number"]),
    (["--attack", "typo:p=-inf"], ["p=-inf is not a finite number"]),
    (["--temperature", "nan"], ["--temperature nan: must be a finite number"]),
    (["--seed", "123456789012345678901234"], ["--seed 123456789012345678901234: must be in [-9,223,372,036,854,775,808"]),
    (["--n", "100000"], ["--n 100000: must be in [1, 10,000]"]),
    (["--max-tokens", "2000000"], ["--max-tokens 2000000: must be in [1, 1,000,000]"]),
    (["--concurrency", "99999"], ["--concurrency 99999: must be in [1, 4096]"]),
    (["--workers", "5000"], ["--workers 5000: must be in [0, 1024]"]),
    (["--model", "openai:m?timeout_s=nan", "--base-url", "http://127.0.0.1:9/v1"], ["timeout_s='nan' must be a finite"]),
])
def test_nan_infinity_and_out_of_range_numbers_are_refused_by_name(tmp_path: Path, args: list[str],
                                                                   needles: list[str]) -> None:
    db = tmp_path / "never.sqlite"
    proc = evalrun("run", "--pack", "mmw_book_reports", *args, "--out", str(db), "--no-progress", cwd=tmp_path)
    one_line(proc, *needles)
    assert list(tmp_path.iterdir()) == []  # no store, no lock left behind
