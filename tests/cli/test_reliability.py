"""Hostile inputs through the command line, each a probe that once ended in a traceback, a
silent success or a wrong result: now one line, exit 2, and nothing computed is lost."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
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


def _limited(max_bytes: int):  # type: ignore[no-untyped-def]
    """A preexec_fn: the child may write files of at most ``max_bytes`` (a full disk, in small)."""
    def limit() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return limit


def limited(*args: str, cwd: Path, max_bytes: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, preexec_fn=_limited(max_bytes))


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_failed_export_leaves_the_previous_file_intact(stored: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"results.{fmt}"
    out.write_text("the previous export\n")
    proc = limited("export", "--db", str(stored), "--format", fmt, "--out", str(out), cwd=tmp_path, max_bytes=20_000)
    one_line(proc, f"--out {out}: cannot write it", "the previous file, if any, is unchanged")
    assert out.read_text() == "the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no temporary file left


def test_a_failed_report_leaves_the_previous_report_intact(stored: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    assert evalrun("report", "--db", str(stored), "--out", str(reports), cwd=tmp_path).returncode == 0
    before = {p.name: p.read_bytes() for p in reports.iterdir()}
    proc = limited("report", "--db", str(stored), "--out", str(reports), cwd=tmp_path, max_bytes=30_000)
    one_line(proc, f"--out {reports}", "cannot write it")
    after = {p.name: p.read_bytes() for p in reports.iterdir()}
    assert {k: v for k, v in after.items() if k in ("report.md", "report.html", "metrics.json")} == \
        {k: v for k, v in before.items() if k in ("report.md", "report.html", "metrics.json")}
    assert not [n for n in after if n.endswith(".tmp")]


@pytest.mark.parametrize("command", [
    ["export", "--db", "{db}", "--format", "csv", "--out", "{blocker}/x.csv"],
    ["report", "--db", "{db}", "--out", "{blocker}/reports"],
])
def test_an_unwritable_destination_is_one_line(stored: Path, tmp_path: Path, command: list[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    proc = evalrun(*(c.format(db=stored, blocker=blocker) for c in command), cwd=tmp_path)
    one_line(proc, str(blocker))


HOSTILE = {
    "acrostic_001": "=HYPERLINK(\"http://evil.example\",\"click\")",
    "acrostic_002": "+1+1",
    "acrostic_003": "-2+3",
    "acrostic_004": "@SUM(A1:A2)",
    "acrostic_005": "red \x1b[31mALERT\x1b[0m bell\x07 nul\x00 rlo\u202eevil zw\u200bsp zwj\u200djoin",
}


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("hostile")
    outputs = where / "outputs.jsonl"
    outputs.write_text("".join(json.dumps({"case_id": k, "output": v}) + "\n" for k, v in HOSTILE.items()))
    db = where / "hostile.sqlite"
    proc = evalrun("grade", "--pack", "hidden_message_extraction", "--outputs", str(outputs), "--out", str(db),
                   "--select", "acrostic_001 or acrostic_002 or acrostic_003 or acrostic_004 or acrostic_005",
                   "--no-progress", cwd=where)
    assert proc.returncode == 0, proc.stderr
    return db


def test_csv_cells_that_start_like_formulas_are_neutralised(hostile_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "safe.csv"
    assert evalrun("export", "--db", str(hostile_store), "--format", "csv", "--out", str(out), cwd=tmp_path).returncode == 0
    with out.open(newline="", encoding="utf-8") as fh:
        outputs = {r["case_id"]: r["raw_output"] for r in csv.DictReader(fh)}
    for case_id in ("acrostic_001", "acrostic_002", "acrostic_003", "acrostic_004"):
        assert outputs[case_id] == "'" + HOSTILE[case_id]
    raw = tmp_path / "raw.csv"
    assert evalrun("export", "--db", str(hostile_store), "--format", "csv", "--out", str(raw), "--raw-csv",
                   cwd=tmp_path).returncode == 0
    with raw.open(newline="", encoding="utf-8") as fh:
        assert {r["case_id"]: r["raw_output"] for r in csv.DictReader(fh)}["acrostic_001"] == HOSTILE["acrostic_001"]


def test_reports_show_control_characters_instead_of_passing_them_through(hostile_store: Path,
                                                                         tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    assert evalrun("report", "--db", str(hostile_store), "--out", str(reports), cwd=tmp_path).returncode == 0
    for name in ("report.md", "report.html"):
        text = (reports / name).read_text(encoding="utf-8")
        assert not any(c in text for c in ("\x1b", "\x07", "\x00", "\u202e", "\u200b", "\u200d")), name
        shown = text.replace("\\[", "[").replace("\\\\", "\\")  # report.md escapes [ and \\
        assert "\\x1b[31mALERT" in shown and "\\u202eevil" in shown, name
        assert "zw\\u200bsp" in shown and "zwj\\u200djoin" in shown, name   # zero-width: shown too


def test_a_run_that_fills_the_disk_is_failed_not_finished(tmp_path: Path) -> None:
    """A file-size limit stands for a full disk: the run stops with one reason, exit 3, no
    traceback; what was stored stays, and the run is never listed as finished."""
    db = tmp_path / "full.sqlite"
    proc = limited("run", "--pack", "hidden_message_extraction", "--model", "reference", "--n", "20", "--out", str(db),
                   "--no-progress", cwd=tmp_path, max_bytes=300_000)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr and "INTERNALERROR" not in proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("evalrun: error: run ") and " failed: " in last and "is the disk full?" in last
    assert "0 of 1040 selected items reached the end of grading" in last
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] > 0
        assert conn.execute("SELECT status FROM runs").fetchone()[0] != "finished"
    # with room again, the same command resumes and finishes
    proc = evalrun("run", "--pack", "hidden_message_extraction", "--model", "reference", "--n", "20", "--out", str(db),
                   "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status, reason FROM runs ORDER BY started_at DESC").fetchone() == ("finished", None)


HOSTILE_GRADER = '''
import sys
from evalrun.pack.grade import Grade

def grade(case, output):
    if case["word"] == "w1":
        while True:  # a grader that never returns
            pass
    if case["word"] == "w2":
        sys.exit(3)
    return Grade(1.0, "OK", "fine")
'''


def test_a_looping_or_exiting_grader_is_an_error_of_its_item_and_the_run_goes_on(tmp_path: Path, make_pack) -> None:
    pack = make_pack(grader=HOSTILE_GRADER)
    db = tmp_path / "g.sqlite"
    proc = evalrun("run", "--pack", str(pack), "--model", "reference", "--grader-timeout", "1", "--out", str(db),
                   "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT case_id, COALESCE(label, '') || ' ' || COALESCE(error, '') FROM results"))
        status = conn.execute("SELECT status FROM runs").fetchone()[0]
    assert rows["c1"] == "GRADER_ERROR grader timed out after 1 s (case c1)"
    assert rows["c2"] == "GRADER_ERROR grader raised SystemExit: 3 (case c2)"
    assert rows["c3"].startswith("OK") and rows["c4"].startswith("OK") and status == "finished"
    assert "errors: 0 generation, 2 grader/attack" in proc.stdout
    assert "grader timed out after 1 s" in proc.stderr and "grader raised SystemExit: 3" in proc.stderr


def test_a_grader_that_exits_at_import_is_an_error_of_its_pack_only(tmp_path: Path, make_pack) -> None:
    good = make_pack("good")
    make_pack("broken", grader="import sys\nsys.exit('no')\n")
    listing = evalrun("list", "--packs-dir", str(good.parent), cwd=tmp_path)
    assert listing.returncode == 1 and "good" in listing.stdout, listing.stderr
    assert "broken" in listing.stdout + listing.stderr and "SystemExit" in listing.stdout + listing.stderr
    # on the search path of a run that names another pack, it is not loaded: --pack means what it says
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", str(good), "--model", "reference", "--out", str(db),
                   "--packs-dir", str(good.parent), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0 and "broken" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM results WHERE label = 'OK'").fetchone()[0] == 4
    # under plain pytest, which collects the whole folder, it fails that pack only: the others run
    plain = subprocess.run([sys.executable, "-m", "pytest", "--evalrun-packs-dir", str(good.parent), "-p", "no:randomly",
                            "-p", "no:cacheprovider", "--evalrun-db", str(tmp_path / "p.sqlite"), "-q"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert plain.returncode == 3 and "broken/grader.py: import failed: SystemExit: no" in plain.stdout
    assert "failed: pack(s) broken could not be loaded; 4 of 4 selected items reached the end of grading" in plain.stderr
    with sqlite3.connect(tmp_path / "p.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM results WHERE label = 'OK'").fetchone()[0] == 4
    # named on its own, it is refused before anything is created
    proc = evalrun("run", "--pack", str(good.parent / "broken"), "--model", "reference", "--out",
                   str(tmp_path / "never.sqlite"), "--no-progress", cwd=tmp_path)
    one_line(proc, "broken/grader.py: import failed: SystemExit: no")
    assert not (tmp_path / "never.sqlite").exists()


def test_unusual_pack_and_replay_files_are_one_line_naming_file_and_line(tmp_path: Path, make_pack) -> None:
    deep = make_pack("deep")
    (deep / "cases" / "deep.jsonl").write_text(
        '{"id": "d1", "word": ' + "[" * 100_000 + "]" * 100_000 + ', "kind": "a"}\n'
        + '{"id": "d2", "word": ' + "[" * 400 + "]" * 400 + ', "kind": "a"}\n')
    (deep / "cases" / "bytes.jsonl").write_bytes(b'{"id": "b1", "word": "\xff", "kind": "a"}\n'
                                                 b'{"id": "b2", "word": "after", "kind": "b"}\n')
    (deep / "cases" / "bytes.json").write_bytes(b'{"id": "b3", "word": "\xff", "kind": "a"}')
    make_pack("badtoml").joinpath("pack.toml").write_bytes(b'name = "x\xff"\n')
    make_pack("badschema").joinpath("case.schema.json").write_bytes(b'{"type": "object", "x": "\xff"}')
    proc = evalrun("validate", "--packs-dir", str(deep.parent), cwd=tmp_path)
    out = proc.stdout
    assert proc.returncode == 1 and "Traceback" not in out + proc.stderr, proc.stderr[-2000:]
    assert "deep.jsonl:1: $: invalid JSON: nested deeper than the JSON reader allows" in out
    assert "deep.jsonl:2: $.word:" in out and "…" in out  # checked against the schema, message cut
    assert "bytes.jsonl:1: $: not UTF-8 text (byte 22" in out and "bytes.json: $: not UTF-8 text" in out
    assert "badtoml: FAIL -- cannot be loaded" in out and "pack.toml: not UTF-8 text (byte 9" in out
    assert "badschema: FAIL -- cannot be loaded" in out and "case.schema.json: not UTF-8 text" in out
    listing = evalrun("list", "--packs-dir", str(deep.parent), cwd=tmp_path)
    assert listing.returncode == 1 and "deep " in listing.stdout and "badtoml" in listing.stdout
    # the line after a non-UTF-8 one is still read: b2 is a case of the pack
    proc = evalrun("run", "--pack", str(deep), "--model", "reference", "--out", str(tmp_path / "d.sqlite"),
                   "--no-progress", "--select", "b2", cwd=tmp_path)
    assert proc.returncode == 0 and "1 results graded" in proc.stdout, proc.stderr[-2000:]
    replay = tmp_path / "replay.jsonl"
    replay.write_text('{"case_id": "c1", "output": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    proc = evalrun("run", "--pack", str(deep), "--model", f"replay:{replay}", "--out", str(tmp_path / "x.sqlite"),
                   cwd=tmp_path)
    one_line(proc, f"{replay}:1: invalid JSON: nested deeper than the JSON reader allows")
    replay.write_bytes(b'{"case_id": "c1", "output": "ok"}\n{"case_id": "c2", "output": "\xff"}\n')
    proc = evalrun("run", "--pack", str(deep), "--model", f"replay:{replay}", "--out", str(tmp_path / "x.sqlite"),
                   cwd=tmp_path)
    one_line(proc, f"{replay}:2: not UTF-8 text (byte 29")


def test_a_run_refused_at_generation_leaves_nothing_behind(tmp_path: Path) -> None:
    """No API key: refused when the provider is built, after the store was opened: one line
    with evalrun's prefix, and no empty store, no lock file beside it."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    proc = subprocess.run([sys.executable, "-m", "evalrun.cli", "run", "--pack", "watermark_robustness", "--model",
                           "openai:gpt-x", "--out", str(tmp_path / "r.sqlite"), "--no-progress"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=env)
    one_line(proc, "openai:gpt-x: no API key")
    assert "ERROR:" not in proc.stdout + proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_resuming_the_judge_stage_gives_bit_identical_answers(tmp_path: Path) -> None:
    """A run killed in the judge stage leaves some answers missing; the resumed run computes
    them in the same batches as an uninterrupted run, so every answer has the same bits."""
    db = tmp_path / "whole.sqlite"
    args = ["run", "--pack", "mmw_book_reports", "--select", "book-00 or book-01", "--watermark", "none",
            "--attack", "none", "--attack", "lowercase", "--judge", "perplexity:embedded", "--max-tokens", "60",
            "--no-progress"]
    assert evalrun(*args, "--out", str(db), cwd=tmp_path).returncode == 0
    with sqlite3.connect(db) as conn:
        whole = dict(conn.execute("SELECT judgement_key, raw_answer FROM judgements"))
    assert len(whole) == 38
    resumed = tmp_path / "resumed.sqlite"
    resumed.write_bytes(db.read_bytes())
    with sqlite3.connect(resumed) as conn:  # what a kill in the judge stage leaves: some answers missing
        lost = sorted(whole)[::3]
        conn.executemany("DELETE FROM judged WHERE judgement_key = ?", [(k,) for k in lost])
        conn.executemany("DELETE FROM judgements WHERE judgement_key = ?", [(k,) for k in lost])
    proc = evalrun(*args, "--out", str(resumed), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with sqlite3.connect(resumed) as conn:
        again = dict(conn.execute("SELECT judgement_key, raw_answer FROM judgements"))
    assert again == whole


@pytest.mark.slow
def test_the_store_does_not_let_a_guessed_key_be_tested(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cache keys of watermarked outputs come from the key and a secret kept outside the
    store: the derivation that once let a store confirm a guess (a fixed-salt PBKDF2 of the
    key) matches nothing in it; caching and resume still work with the same secret."""
    import hashlib

    from evalrun._util import cache_secret
    from evalrun.pack.loading import load_pack, shipped_packs_dir
    from evalrun.run import plan
    from evalrun.run.options import run_options

    secret, key = "ab" * 32, "the-real-key"
    db = tmp_path / "k.sqlite"
    args = ["run", "--pack", "mmw_book_reports", "--select", "book-00", "--watermark", "kgw", "--max-tokens", "30",
            "--key", key, "--out", str(db), "--no-progress"]
    env = {**os.environ, cache_secret.ENV: secret}
    run = subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600, env=env)
    assert run.returncode == 0 and "9 results generated" in run.stdout, run.stderr[-2000:]
    conn = sqlite3.connect(db)
    stored = {r[0] for r in conn.execute("SELECT gen_key FROM results")}
    conn.close()  # before reading the files: another open descriptor would drop SQLite's locks
    assert all(secret.encode() not in p.read_bytes() and bytes.fromhex(secret) not in p.read_bytes()
               for p in tmp_path.iterdir() if p.name.startswith("k.sqlite"))

    monkeypatch.setenv(cache_secret.ENV, secret)
    cache_secret.cache_secret.cache_clear()
    cache_secret.key_fingerprint.cache_clear()
    pack = load_pack(shipped_packs_dir() / "mmw_book_reports")
    options = run_options({"models": ["embedded"], "watermarks": ["kgw"], "max_tokens": 30, "key": key},
                          default_models=("embedded",))
    planned = {it.gen_key for it in plan.make_items(pack, options) if it.case.id.startswith("book-00")}
    assert planned == stored  # the planning here is the run's
    legacy = {"v": hashlib.pbkdf2_hmac("sha256", key.encode(), b"evalrun-cache-key", 200_000).hex()}
    monkeypatch.setattr(plan, "key_fingerprint", lambda k: legacy["v"] if k else "")
    guessed = {it.gen_key for it in plan.make_items(pack, options) if it.case.id.startswith("book-00")}
    assert not guessed & stored  # the guess test of earlier releases confirms nothing
    cache_secret.cache_secret.cache_clear()
    cache_secret.key_fingerprint.cache_clear()
    # the same secret resumes from the store; another one (another machine) regenerates
    again = subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=tmp_path, capture_output=True, text=True,
                           timeout=600, env=env)
    assert again.returncode == 0 and "results generated" not in again.stdout  # nothing to generate
    other = subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=tmp_path, capture_output=True, text=True,
                           timeout=600, env={**env, cache_secret.ENV: "cd" * 32})
    assert "9 results generated, 0 cached" in other.stdout, other.stdout[-2000:]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT raw_output) FROM results").fetchone() == (18, 9)
    conn.close()


def test_an_internal_error_is_a_failed_run_with_its_reason(tmp_path: Path, make_pack) -> None:
    """A plugin hook that raises mid-run (here a pack's conftest.py): the run is recorded as
    failed with the error, not finished, and the exit status says so."""
    pack = make_pack()
    (pack / "conftest.py").write_text("def pytest_runtest_logreport(report):\n"
                                      "    if report.when == 'call':\n"
                                      "        raise RuntimeError('boom in a hook')\n")
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", str(pack), "--model", "reference", "--out", str(db), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines()[-1].startswith("evalrun: error: run ")
    assert "failed: RuntimeError: boom in a hook;" in proc.stderr
    conn = sqlite3.connect(db)
    status, reason = conn.execute("SELECT status, reason FROM runs").fetchone()
    conn.close()
    assert status == "failed" and reason.startswith("RuntimeError: boom in a hook; ")


def test_detect_text_that_is_not_utf8_is_one_line_naming_the_byte(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0, "cafe": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    text = tmp_path / "latin1.txt"
    text.write_bytes("un café noir".encode("latin-1"))
    proc = evalrun("detect", "--watermark", "kgw", "--key", "k", "--text", str(text), "--tokenizer",
                   str(tmp_path / "tokenizer.json"), cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]   # was a UnicodeDecodeError traceback
    assert "latin1.txt: cannot read: not UTF-8" in lines[0] and "byte 6" in lines[0], lines[0]


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_export_refuses_a_target_that_is_not_a_regular_file(stored: Path, tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out.csv"
    real = tmp_path / "real.csv"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        real.write_text("kept\n")
        target.symlink_to(real)
    proc = evalrun("export", "--db", str(stored), "--format", "csv", "--out", str(target), cwd=tmp_path)
    one_line(proc, "--out", "out.csv", "a FIFO" if kind == "fifo" else "a symbolic link", "not a regular file")
    if kind == "fifo":   # was replaced by a regular file, exit 0
        assert target.is_fifo()
    else:
        assert target.is_symlink() and real.read_text() == "kept\n"


def test_a_malformed_select_is_refused_before_anything_is_generated(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", "watermark_robustness", "--model", "reference", "--select", "((((",
                   "--out", str(db), "--no-progress", cwd=tmp_path)
    one_line(proc, "--select", "is not a pytest -k expression")   # was: all items generated, then exit 3
    assert not db.exists()


@pytest.mark.parametrize("content,env,needles", [
    (b"", None, ("cache-secret: 0 bytes", "delete")),              # an empty file was used as the secret
    (b"ab\n", None, ("cache-secret: 1 bytes", "delete")),
    (b"not a secret\n", None, ("cache-secret: not hex digits", "delete")),
    (None, "abcd", ("EVALRUN_CACHE_SECRET: 2 bytes", "64 hex digits")),   # was swallowed in collection
])
def test_a_short_or_malformed_cache_secret_is_refused_in_one_line(tmp_path: Path, content: bytes | None,
                                                                 env: str | None, needles: tuple[str, ...]) -> None:
    secret = tmp_path / "xdg" / "evalrun" / "cache-secret"
    if content is not None:
        secret.parent.mkdir(parents=True)
        secret.write_bytes(content)
    environ = {k: v for k, v in os.environ.items() if k not in ("EVALRUN_WATERMARK_KEY", "EVALRUN_CACHE_SECRET")}
    environ["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    if env is not None:
        environ["EVALRUN_CACHE_SECRET"] = env
    db = tmp_path / "r.sqlite"
    proc = subprocess.run([sys.executable, "-m", "evalrun.cli", "run", "--pack", "mmw_book_reports", "--select",
                           "book-00", "--watermark", "kgw", "--max-tokens", "10", "--key", "a-long-enough-test-key",
                           "--out", str(db), "--no-progress"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env=environ)
    one_line(proc, *needles)
    assert not db.exists()
    if content is not None:
        assert secret.read_bytes() == content   # left as it was


def test_a_failed_report_leaves_the_previous_report_whole(tmp_path: Path) -> None:
    import resource

    db, rep = tmp_path / "k.sqlite", tmp_path / "rep"
    proc = evalrun("run", "--pack", "mmw_book_reports", "--select", "book-00", "--watermark", "none", "--watermark",
                   "kgw", "--attack", "none", "--attack", "typo:p=0.05", "--max-tokens", "20", "--key",
                   "a-long-enough-test-key", "--out", str(db), "--report", str(rep), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before = {f.name: f.read_bytes() for f in rep.iterdir()}
    assert {"report.md", "report.html", "metrics.json", "attacks.png", "watermark_size.png"} <= set(before)

    def small_files() -> None:  # `ulimit -f 8`: the first chart cannot be written
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    failed = subprocess.run([sys.executable, "-m", "evalrun.cli", "report", "--db", str(db), "--out", str(rep)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600, preexec_fn=small_files)
    one_line(failed, "--out", "File too large")
    # was: the previous charts deleted, report.md/html linking to missing files
    assert {f.name: f.read_bytes() for f in rep.iterdir()} == before


@pytest.mark.parametrize("command", [
    ["run", "--pack", "watermark_robustness", "--model", "reference", "--out", "{db}", "--no-progress"],
    ["regrade", "--db", "{db}"],
    ["report", "--db", "{db}", "--out", "{tmp}/report"],
    ["export", "--db", "{db}", "--format", "csv", "--out", "{tmp}/out.csv"],
])
def test_a_foreign_sqlite_file_with_a_schema_version_is_refused_and_left_untouched(tmp_path: Path,
                                                                                  command: list[str]) -> None:
    db = tmp_path / "f.sqlite"
    with sqlite3.connect(db) as conn:   # another program's database that happens to set user_version
        conn.execute("CREATE TABLE foo(x)")
        conn.execute("PRAGMA user_version = 5")
    conn.close()
    before = db.read_bytes()
    proc = evalrun(*(a.format(db=db, tmp=tmp_path) for a in command), cwd=tmp_path)
    # was: 42 INTERNALERROR lines and the file switched to WAL (header bytes 18-19 from 1 1 to 2 2)
    one_line(proc, "f.sqlite", "not an evalrun results database", "no results or runs table")
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["f.sqlite"]


def test_another_applications_sqlite_file_is_refused_by_its_header(tmp_path: Path) -> None:
    db = tmp_path / "app.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA application_id = 1234")
        conn.execute("CREATE TABLE results(x)")
        conn.execute("CREATE TABLE runs(x)")
        conn.execute("PRAGMA user_version = 5")
    conn.close()
    before = db.read_bytes()
    one_line(evalrun("regrade", "--db", str(db), cwd=tmp_path), "another application's SQLite file")
    assert db.read_bytes() == before


def test_a_lone_surrogate_in_a_replay_line_loses_that_line_only(tmp_path: Path, make_pack) -> None:
    pack = make_pack("echo", cases=[{"id": f"c{i}", "word": f"w{i}", "kind": "a"} for i in range(5)])
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join('{"case_id": "c%d", "output": "%s"}\n' % (i, "lone \\ud800 surrogate" if i == 0 else f"w{i}")
                              for i in range(5)))
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", str(pack), "--model", f"replay:{replay}", "--out", str(db), "--no-progress",
                   cwd=tmp_path)
    # was: an INTERNALERROR traceback, exit 3, none of the 5 stored
    assert "Traceback" not in proc.stdout + proc.stderr and "INTERNALERROR" not in proc.stdout, proc.stdout[-2000:]
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT case_id, COALESCE(error, raw_output) FROM results").fetchall())
    conn.close()
    assert {k: rows[k] for k in ("c1", "c2", "c3", "c4")} == {f"c{i}": f"w{i}" for i in range(1, 5)}
    assert f"{replay}:1: field 'output' is not text: a lone surrogate" in rows["c0"]
    assert f"{replay}:1: field 'output' is not text" in proc.stderr


def test_a_lone_surrogate_in_a_case_file_is_that_cases_error(tmp_path: Path, make_pack) -> None:
    pack = make_pack("echo")
    (pack / "cases" / "bad.jsonl").write_text('{"id": "s1", "word": "lone \\ud800", "kind": "a"}\n'
                                              '{"id": "s2", "word": "fine", "kind": "a"}\n')
    proc = evalrun("validate", "--packs-dir", str(pack.parent), cwd=tmp_path)
    assert "bad.jsonl:1: $: case 's1' holds a lone surrogate" in proc.stdout, proc.stdout[-2000:]
    db = tmp_path / "r.sqlite"
    run = evalrun("run", "--pack", str(pack), "--model", "reference", "--out", str(db), "--no-progress", cwd=tmp_path)
    assert "Traceback" not in run.stdout + run.stderr and "INTERNALERROR" not in run.stdout, run.stdout[-2000:]
    with sqlite3.connect(db) as conn:   # was: the whole pack dropped with no reason
        stored = {r[0] for r in conn.execute("SELECT case_id FROM results")}
    conn.close()
    assert stored == {"c1", "c2", "c3", "c4", "s2"}


LONG = "x" * 300


@pytest.mark.parametrize("command", [
    ["run", "--pack", "watermark_robustness", "--model", "reference", "--out", f"{LONG}.sqlite", "--no-progress"],
    ["run", "--pack", LONG, "--model", "reference", "--out", "z.sqlite", "--no-progress"],
    ["report", "--db", f"{LONG}.sqlite", "--out", "rep"],
    ["report", "--db", "{db}", "--out", LONG],
    ["export", "--db", "{db}", "--format", "csv", "--out", f"{LONG}.csv"],
    ["regrade", "--db", f"{LONG}.sqlite"],
    ["view", "--db", f"{LONG}.sqlite", "--port", "0"],
    ["run", "--pack", "watermark_robustness", "--model", "reference", "--out", "loop.sqlite", "--no-progress"],
    ["report", "--db", "loop.sqlite", "--out", "rep"],
])
def test_long_names_and_symlink_loops_are_one_line(stored: Path, tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "loop.sqlite").symlink_to("loop.sqlite")
    proc = evalrun(*(a.format(db=stored) for a in command), cwd=tmp_path)   # was: OSError/RuntimeError tracebacks
    line = one_line(proc)
    assert ("File name too long" in line and "characters)" in line) or "--out" in line or "loop" in line, line


@pytest.mark.parametrize("damage_sql,needle", [
    ("UPDATE results SET metadata_json = '{not json' WHERE result_id = 3", "result 3: column metadata_json is not JSON"),
    ("UPDATE results SET score = 'abc' WHERE result_id = 4", "result 4: column score holds text, not a number"),
])
@pytest.mark.parametrize("command", [["report", "--db", "{db}", "--out", "{tmp}/rep"],
                                     ["export", "--db", "{db}", "--format", "jsonl", "--out", "{tmp}/out.jsonl"]])
def test_a_damaged_row_in_a_sound_store_is_named_in_one_line(stored: Path, tmp_path: Path, damage_sql: str,
                                                             needle: str, command: list[str]) -> None:
    db = tmp_path / "d.sqlite"
    shutil.copy(stored, db)
    with sqlite3.connect(db) as conn:
        conn.execute(damage_sql)
    conn.close()
    proc = evalrun(*(a.format(db=db, tmp=tmp_path) for a in command), cwd=tmp_path)
    one_line(proc, "--db", needle, "restore the store from a copy")   # was: a JSONDecodeError/TypeError traceback


@pytest.mark.parametrize("line,replacement,needle", [
    ("pass_score = 1.0", "pass_score = nan", "pass_score = nan: must be a finite number in [0, 1]"),
    ("pass_score = 1.0", 'pass_score = "high"', "pass_score = 'high': must be a number in [0, 1]"),
    ("pass_score = 1.0", "pass_score = 1.0\ndetection_threshold = nan",
     "detection_threshold = nan: must be a finite number in [0, 1]"),
    ("max_tokens = 8", "max_tokens = 1000000000000", "[defaults] max_tokens = 1000000000000: must be in [1, 1,000,000]"),
    ("temperature = 0.0", "temperature = nan", "[defaults] temperature = nan: must be a finite number in [0, 5]"),
])
def test_pack_toml_numbers_follow_the_options_rules(tmp_path: Path, make_pack, line: str, replacement: str,
                                                    needle: str) -> None:
    pack = make_pack("echo")
    toml = pack / "pack.toml"
    assert line in toml.read_text()
    toml.write_text(toml.read_text().replace(line, replacement))
    # was: accepted (a NaN pass score passes nothing; 10^12 tokens asked of the model)
    one_line(evalrun("run", "--pack", str(pack), "--model", "reference", "--out", str(tmp_path / "r.sqlite"),
                     "--no-progress", cwd=tmp_path), "pack.toml", needle)
    checked = evalrun("validate", "--packs-dir", str(pack.parent), cwd=tmp_path)
    assert checked.returncode == 1 and needle in checked.stdout, checked.stdout[-2000:]


@pytest.mark.parametrize("kind,needle", [
    ("ids", "all.jsonl:2: $.id: 5 is not of type 'string'"),
    ("template", "c1.json: $.nosuchfield: field required by prompt_template is missing"),
    ("reference", "--model reference: pack echo has no reference solver (a reference.py, or a built-in grader"),
])
def test_a_pack_that_produces_no_items_says_why_and_fails(tmp_path: Path, make_pack, kind: str, needle: str) -> None:
    pack = make_pack("echo", reference=None if kind == "reference" else "def solve(case):\n    return case['word']\n")
    if kind == "ids":
        for case in (pack / "cases").iterdir():
            case.unlink()
        (pack / "cases" / "all.jsonl").write_text('{"word": "w1", "kind": "a"}\n{"id": 5, "word": "w2", "kind": "a"}\n')
    elif kind == "template":
        toml = pack / "pack.toml"
        toml.write_text(toml.read_text().replace("Say {word}", "Say {nosuchfield}"))
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", str(pack), "--model", "reference", "--out", str(db), "--no-progress", cwd=tmp_path)
    # was: exit 0 with only pytest's "FF" or "s", no store and no reason
    assert proc.returncode == 2 and needle in proc.stderr, (proc.returncode, proc.stderr[-2000:])
    assert all(line.startswith("evalrun: error: ") for line in proc.stderr.strip().splitlines())
    assert not db.exists()


def test_a_watermark_key_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    environ = {**os.environ, "EVALRUN_WATERMARK_KEY": os.fsdecode(b"key\xff\xfe-long-enough")}
    proc = subprocess.run([sys.executable, "-m", "evalrun.cli", "run", "--pack", "mmw_book_reports", "--select",
                           "book-00", "--watermark", "kgw", "--max-tokens", "5", "--out", str(tmp_path / "u.sqlite"),
                           "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=environ)
    # was: only pytest's "Interrupted: 1 error during collection"
    one_line(proc, "EVALRUN_WATERMARK_KEY: not UTF-8 text (byte 3 of the key)")
    assert not (tmp_path / "u.sqlite").exists()


def test_exit_statuses_of_evalrun_run_are_the_documented_ones(tmp_path: Path) -> None:
    """Every status `evalrun run` ends with is in docs/pipeline.md's table: here 5, no items."""
    table = (REPO / "docs" / "pipeline.md").read_text(encoding="utf-8")
    documented = {int(m) for m in re.findall(r"^\| (\d+) \| ", table, flags=re.M)}
    assert {0, 1, 2, 3, 5, 130, 143} <= documented, documented
    proc = evalrun("run", "--pack", "watermark_robustness", "--model", "reference", "--select", "no_such_case",
                   "--out", str(tmp_path / "r.sqlite"), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 5 and "no items selected" in proc.stderr and proc.returncode in documented


def test_a_grader_raising_keyboardinterrupt_is_that_items_error(tmp_path: Path, make_pack) -> None:
    grader = ("from evalrun.pack.grade import Grade\n\n"
              "def grade(case, output):\n"
              "    if case['id'] == 'c2':\n"
              "        raise KeyboardInterrupt\n"
              "    return Grade(1.0, 'OK', 'fine')\n")
    pack = make_pack("echo", grader=grader)
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", str(pack), "--model", "reference", "--out", str(db), "--no-progress", cwd=tmp_path)
    # was: the whole run stopped, as if Ctrl-C had been pressed
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT case_id, COALESCE(label, '') || ' ' || COALESCE(error, '') FROM results"))
        status = conn.execute("SELECT status FROM runs").fetchone()[0]
    conn.close()
    assert status == "finished" and all(rows[c].startswith("OK") for c in ("c1", "c3", "c4"))
    assert rows["c2"].startswith("GRADER_ERROR") and "KeyboardInterrupt" in rows["c2"], rows["c2"]


def test_a_grader_error_holding_the_keys_hex_or_base64_is_scrubbed(tmp_path: Path, make_pack) -> None:
    import base64

    key = "a-long-enough-test-key"
    grader = ("import base64\nfrom evalrun.pack.grade import Grade\n\n"
              "def grade(case, output, context):\n"
              "    raw = context.key.encode()\n"
              "    raise ValueError('hex ' + raw.hex() + ' b64 ' + base64.b64encode(raw).decode())\n")
    pack = make_pack("echo", grader=grader)
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", str(pack), "--model", "reference", "--key", key, "--out", str(db),
                   "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    raw = key.encode()
    stored = db.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("r.sqlite*"))
    for form in (raw.hex(), base64.b64encode(raw).decode()):   # was: stored verbatim in results.error
        assert form.encode() not in stored and form not in proc.stdout + proc.stderr
    with sqlite3.connect(db) as conn:
        errors = [r[0] for r in conn.execute("SELECT error FROM results")]
    conn.close()
    assert errors and all("hex *** b64 ***" in e for e in errors), errors[:1]


def test_evalrun_key_new_prints_a_fresh_256_bit_key(tmp_path: Path) -> None:
    keys = [evalrun("key", "new", cwd=tmp_path) for _ in range(2)]
    assert all(k.returncode == 0 and re.fullmatch(r"[0-9a-f]{64}\n", k.stdout) for k in keys), keys[0].stderr
    assert keys[0].stdout != keys[1].stdout
    # the docs no longer claim that a store alone lets no guess be tested
    doc = (REPO / "docs" / "pipeline.md").read_text(encoding="utf-8")
    assert "none can be tested" not in doc and "Any watermarked text tests a guess" in doc


def test_a_run_with_a_weak_key_warns_once_and_goes_on(tmp_path: Path) -> None:
    strong = evalrun("key", "new", cwd=tmp_path).stdout.strip()
    for key, why in (("my-secret-key", ["(--key) is easy to guess: shorter than 16 characters"]), (strong, [])):
        proc = evalrun("run", "--pack", "watermark_robustness", "--model", "reference", "--key", key,
                       "--out", str(tmp_path / f"{len(why)}.sqlite"), "--no-progress", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        warnings = [line for line in proc.stderr.splitlines() if "warning: the watermark key" in line]
        assert len(warnings) == len(why) and all(w in line for w, line in zip(why, warnings)), warnings
        assert key not in proc.stdout + proc.stderr


def test_escape_sequences_from_a_grader_or_an_argument_never_reach_the_terminal(tmp_path: Path, make_pack) -> None:
    hostile = "\\x1b]0;PWNED-TITLE\\x07\\x1b[31mred\\u202eevil\\u200bhidden"
    grader = ("from evalrun.pack.grade import Grade\n\n"
              "def grade(case, output):\n"
              f"    raise ValueError('{hostile}')\n")
    pack = make_pack("echo", grader=grader)
    proc = evalrun("run", "--pack", str(pack), "--model", "reference", "--out", str(tmp_path / "r.sqlite"),
                   "--no-progress", "--", "-rf", cwd=tmp_path)
    printed = proc.stdout + proc.stderr
    # was: the title, the colour and the override written raw to the user's terminal
    assert not any(c in printed for c in ("\x1b", "\x07", "\u202e", "\u200b")), repr(printed[-1500:])
    assert "grader error" in printed and "\\x1b]0;PWNED-TITLE\\x07" in printed and "\\u202e" in printed
    assert "\\u200b" in printed
    refused = evalrun("run", "--pack", "bad\x1b[31m", "--model", "reference", "--out", str(tmp_path / "z.sqlite"),
                      cwd=tmp_path)
    assert "\x1b" not in refused.stderr and "--pack bad\\x1b[31m" in one_line(refused)


def test_library_errors_and_option_names_are_the_users_in_one_line(tmp_path: Path, make_pack) -> None:
    pack = make_pack("badschema")
    (pack / "case.schema.json").write_text('{"type": "nonsense-type"}')
    # was: 11 lines of jsonschema's message
    one_line(evalrun("run", "--pack", str(pack), "--model", "reference", "--out", str(tmp_path / "a.sqlite"),
                     "--no-progress", cwd=tmp_path), "case.schema.json: invalid schema at $.type")
    # was: transformers' 5-line message
    proc = evalrun("detect", "--watermark", "kgw", "--key", "k", "--text", "/etc/hostname", "--tokenizer", "/etc",
                   cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    # was: "ERROR: --evalrun-packs-dir /nonexistent: no such directory", an option evalrun run has not
    one_line(evalrun("run", "--pack", "watermark_robustness", "--model", "reference", "--packs-dir",
                     str(tmp_path / "nonexistent"), "--out", str(tmp_path / "b.sqlite"), cwd=tmp_path),
             "--packs-dir", "no such directory")
