"""Opening the results database: every bad path is one line naming the path and the cause,
exit 2, nothing created or changed; readers open read-only, on read-only media too."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RELEASE1 = REPO / "tests" / "data" / "release1.sqlite"
RUN = ["run", "--pack", "watermark_robustness", "--model", "reference", "--select", "rewrite_001"]


def evalrun(*args: str, cwd: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "evalrun.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its content digest and mode: "untouched" means equal."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("evalrun: error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout and "INTERNALERROR" not in proc.stdout


@pytest.mark.parametrize("kind", ["directory", "text file", "foreign sqlite", "under a file",
                                  "read-only file"])
def test_run_refuses_a_path_that_cannot_be_its_store(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out.sqlite"
    needle = {"directory": "is a directory", "text file": "not an SQLite file",
              "foreign sqlite": "not an evalrun results database (it has tables",
              "under a file": "cannot create directory", "read-only file": "read-only: report and export"
              " open it read-only, run and regrade need write access"}[kind]
    if kind == "directory":
        target.mkdir()
    elif kind == "text file":
        target.write_text("these are my notes, not a database\n" * 50)
    elif kind == "foreign sqlite":
        conn = sqlite3.connect(target)
        conn.execute("CREATE TABLE notes (t TEXT)")
        conn.commit()
        conn.close()
    elif kind == "under a file":
        (tmp_path / "afile").write_text("x")
        target = tmp_path / "afile" / "sub" / "out.sqlite"
    else:
        shutil.copy(RELEASE1, target)
        target.chmod(0o444)
    before = fingerprint(tmp_path)
    proc = evalrun(*RUN, "--out", str(target), cwd=tmp_path)
    one_line_error(proc, f"--out {target}: {needle}")
    assert fingerprint(tmp_path) == before  # no WAL, no lock file, nothing rewritten


def test_regrade_refuses_a_read_only_store_and_plain_pytest_says_one_line(tmp_path: Path) -> None:
    db = tmp_path / "r1.sqlite"
    shutil.copy(RELEASE1, db)
    db.chmod(0o444)
    before = fingerprint(tmp_path)
    one_line_error(evalrun("regrade", "--db", str(db), cwd=tmp_path), f"--db {db}: read-only")
    assert fingerprint(tmp_path) == before
    folder = tmp_path / "adir"
    folder.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pytest", "packs", "-k", "rewrite_001", "-q", "-p", "no:randomly",
                           "--evalrun-db", str(folder)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: --evalrun-db {folder}: is a directory" in proc.stderr
    assert "INTERNALERROR" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", ["report", "export"])
def test_readers_refuse_paths_that_are_not_stores(tmp_path: Path, command: str) -> None:
    folder = tmp_path / "adir"
    folder.mkdir()
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    tail = ["--out", str(tmp_path / "rep")] if command == "report" else ["--format", "csv", "--out",
                                                                          str(tmp_path / "x.csv")]
    before = fingerprint(tmp_path)
    one_line_error(evalrun(command, "--db", str(folder), *tail, cwd=tmp_path), f"--db {folder}: is a directory")
    one_line_error(evalrun(command, "--db", str(text), *tail, cwd=tmp_path), f"--db {text}: not an SQLite file")
    one_line_error(evalrun(command, "--db", str(tmp_path / "none.sqlite"), *tail, cwd=tmp_path),
                   "no such database")
    assert fingerprint(tmp_path) == before


def _read_only_media(folder: Path) -> tuple[str, ...]:
    """A command prefix under which ``folder`` is read-only media. As root (whom file modes do
    not stop) a private mount namespace bind-mounts it read-only; otherwise modes suffice."""
    if os.geteuid() == 0:
        script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
        return ("unshare", "--mount", "sh", "-c", script, str(folder))
    for p in folder.iterdir():
        p.chmod(0o444)
    folder.chmod(0o555)
    return ()


def test_report_and_export_read_a_store_on_read_only_media(tmp_path: Path) -> None:
    media = tmp_path / "media"
    media.mkdir()
    db = media / "r1.sqlite"
    shutil.copy(RELEASE1, db)
    prefix = _read_only_media(media)
    before = fingerprint(media)
    proc = evalrun("report", "--db", str(db), "--out", str(tmp_path / "rep"), cwd=tmp_path, prefix=prefix)
    assert proc.returncode == 0, proc.stderr
    assert "watermark_robustness" in (tmp_path / "rep" / "report.md").read_text()
    proc = evalrun("export", "--db", str(db), "--format", "jsonl", "--out", str(tmp_path / "x.jsonl"),
                   cwd=tmp_path, prefix=prefix)
    assert proc.returncode == 0, proc.stderr
    assert len((tmp_path / "x.jsonl").read_text().splitlines()) == 18
    assert fingerprint(media) == before
    media.chmod(0o755)


def test_report_reads_a_store_while_a_writer_holds_it(tmp_path: Path) -> None:
    db = tmp_path / "busy.sqlite"
    shutil.copy(RELEASE1, db)
    assert evalrun("regrade", "--db", str(db), cwd=tmp_path).returncode == 0  # now this release's schema
    writer = sqlite3.connect(db, isolation_level=None, timeout=1)
    writer.execute("BEGIN IMMEDIATE")  # a running `evalrun run` in the middle of storing a result
    writer.execute("UPDATE results SET reason = 'being rewritten' WHERE result_id = 1")
    try:
        proc = evalrun("report", "--db", str(db), "--out", str(tmp_path / "rep"), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        proc = evalrun("export", "--db", str(db), "--format", "csv", "--out", str(tmp_path / "x.csv"),
                       cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "being rewritten" not in (tmp_path / "x.csv").read_text()  # readers see committed data
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.mark.parametrize("model, needle", [
    ("replay:missing.jsonl", "--model replay:missing.jsonl: no such file"),
    ("replay:bad.jsonl", "bad.jsonl:2: invalid JSON"),
    ("hf:/no/such/model/dir", "--model hf:/no/such/model/dir: no such model directory"),
    ("hf:afile", "--model hf:afile: not a directory"),
])
def test_an_unresolvable_model_is_reported_before_anything_is_created(tmp_path: Path, model: str,
                                                                        needle: str) -> None:
    (tmp_path / "bad.jsonl").write_text('{"case_id": "rewrite_001", "output": "x"}\n{oops\n')
    (tmp_path / "afile").write_text("not a model")
    before = fingerprint(tmp_path)
    proc = evalrun("run", "--pack", "watermark_robustness", "--model", model, "--out", str(tmp_path / "o.sqlite"),
                   cwd=tmp_path)
    one_line_error(proc, needle)
    assert "generating" not in proc.stderr
    assert fingerprint(tmp_path) == before
