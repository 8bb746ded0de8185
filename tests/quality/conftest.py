"""A store of the embedded model's outputs with and without a watermark, made once per test
session by a real ``evalrun run``, and copied for each test that writes to it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

KEY = "quality-test-key"
ENV = {**os.environ, "OPENAI_API_KEY": "local-test-key", "EVALRUN_WATERMARK_KEY": KEY}
#: the watermark of the shared store (strong, so that 6 tokens carry it)
MARK = "kgw:delta=4"
CASES = 30


def evalrun(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=ENV, timeout=timeout)


def write_words_pack(root: Path, cases: int = CASES) -> Path:
    pack = root / "words"
    (pack / "cases").mkdir(parents=True, exist_ok=True)
    (pack / "pack.toml").write_text(textwrap.dedent('''
        name = "words"
        version = "1.0"
        description = "test pack: continue a word"
        labels = ["OK"]
        pass_score = 0.0
        system_prompt = "Continue."
        prompt_template = "Write about {word}"
        [defaults]
        temperature = 1.0
        max_tokens = 6
    '''))
    (pack / "grader.py").write_text("from evalrun.pack.grade import Grade\n\n"
                                    "def grade(case, output):\n    return Grade(1.0, 'OK', 'seen')\n")
    with (pack / "cases" / "cases.jsonl").open("w") as fh:
        for i in range(cases):
            fh.write(json.dumps({"id": f"c{i:02d}", "word": f"word {i}"}) + "\n")
    return pack


@pytest.fixture(scope="session")
def marked_store(tmp_path_factory) -> Path:
    """``evalrun run`` of 30 cases on the embedded model, unwatermarked and under ``MARK``."""
    tmp = tmp_path_factory.mktemp("marked")
    pack = write_words_pack(tmp / "packs")
    db = tmp / "marked.sqlite"
    run = evalrun("run", "--pack", str(pack), "--model", "embedded", "--watermark", "none", "--watermark", MARK,
                  "--out", str(db), "--no-progress", cwd=tmp)
    assert run.returncode == 0, run.stderr[-2000:]
    return db


@pytest.fixture
def store_copy(marked_store: Path, tmp_path: Path) -> Path:
    """A private copy of the shared store (SQLite's backup: WAL content included)."""
    dst = tmp_path / "copy.sqlite"
    src_conn, dst_conn = sqlite3.connect(marked_store), sqlite3.connect(dst)
    try:
        src_conn.backup(dst_conn)
    finally:
        src_conn.close()
        dst_conn.close()
    return dst


def detection_pack(root: Path, name: str, cases: int, *, description: str, topic: str,
                   z_threshold: float | None = None) -> Path:
    """A small detection pack (the shared detection grader, 16 sampled tokens per case) whose
    case i asks to write about ``f"{topic} {i}"``."""
    pack = root / name
    (pack / "cases").mkdir(parents=True)
    z_line = f"z_threshold = {z_threshold}\n" if z_threshold is not None else ""
    (pack / "pack.toml").write_text(
        f'name = "{name}"\nversion = "1.0"\ndescription = "{description}"\n'
        'labels = ["DETECTED", "NOT_DETECTED"]\npass_score = 0.0\n' + z_line +
        'system_prompt = "Continue."\nprompt_template = "Write about {word}"\n'
        '[defaults]\ntemperature = 1.0\nmax_tokens = 16\n')
    (pack / "grader.py").write_text("from evalrun.pack.detection_grader import grade_detection\n\n"
                                    "def grade(case, output, context):\n"
                                    "    return grade_detection(case, output, context)\n")
    (pack / "cases" / "c.jsonl").write_text("".join(json.dumps({"id": f"c{i}", "word": f"{topic} {i}"}) + "\n"
                                                    for i in range(cases)))
    return pack


@pytest.fixture
def make_detection_pack():
    """:func:`detection_pack` for the tests (conftest helpers are reached through fixtures)."""
    return detection_pack
