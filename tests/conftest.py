"""Shared fixtures: a factory for small throwaway packs written to a temporary directory."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest
import scipy.special  # noqa: E402,F401
import scipy.stats  # noqa: E402,F401

# pytester's in-process runs (runpytest) forget the modules an inner run imported, and the
# C extensions of numpy and scipy cannot be loaded twice in one process: an inner run's
# summary (metrics.json) imports them, so they are loaded here, before any inner run, and
# the tests do not depend on which test pytest-randomly happens to run first (evalrun
# imports scipy's modules only where it calls them, hence the explicit ones)
import evalrun.metrics  # noqa: E402,F401
from evalrun.model.providers import parse_model  # noqa: E402

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]

#: folders whose tests compare float results of model arithmetic, BLAS or SIMD math (besides
#: modules marked one by one): ``pytest -m numeric`` selects them, and .ci/run runs them a
#: second time on another CPU path (docs/reproducibility.md)
NUMERIC_FOLDERS = ("watermark", "judges", "analysis", "kernels", "model", "metrics", "unlearning")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = REPO / "tests"
    for item in items:
        path = Path(str(item.fspath))
        if path.is_relative_to(tests) and path.relative_to(tests).parts[0] in NUMERIC_FOLDERS:
            item.add_marker(pytest.mark.numeric)

ECHO_GRADER = '''
from evalrun.pack.grade import Grade

def grade(case, output):
    if output == case["word"]:
        return Grade(1.0, "OK", "exact")
    return Grade(0.0, "BAD", f"expected {case['word']!r}, got {output!r}")
'''

ECHO_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["id", "word", "kind"],
    "properties": {"id": {"type": "string"}, "word": {"type": "string"}, "kind": {"enum": ["a", "b"]}},
    "additionalProperties": False,
}


def write_pack(root: Path, name: str = "echo", cases: Sequence[dict[str, Any]] | None = None, *,
               grader: str = ECHO_GRADER, reference: str | None = "def solve(case):\n    return case['word']\n",
               schema: dict[str, Any] | None = ECHO_SCHEMA, golden: Sequence[dict[str, Any]] = ()) -> Path:
    """Write a pack whose ideal answer repeats the case's ``word``."""
    pack = root / name
    (pack / "cases").mkdir(parents=True, exist_ok=True)
    (pack / "pack.toml").write_text(textwrap.dedent(f'''
        name = "{name}"
        version = "1.0"
        description = "test pack"
        labels = ["OK", "BAD"]
        group_field = "kind"
        pass_score = 1.0
        system_prompt = "Repeat the word."
        prompt_template = "Say {{word}}"
        [defaults]
        temperature = 0.0
        max_tokens = 8
    '''))
    (pack / "grader.py").write_text(grader)
    if reference is not None:
        (pack / "reference.py").write_text(reference)
    if schema is not None:
        (pack / "case.schema.json").write_text(json.dumps(schema))
    for case in cases if cases is not None else [
        {"id": f"c{i}", "word": f"w{i}", "kind": "a" if i % 2 else "b"} for i in range(1, 5)
    ]:
        (pack / "cases" / f"{case['id']}.json").write_text(json.dumps(case, indent=2))
    if golden:
        (pack / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden))
    return pack


@pytest.fixture
def make_pack(tmp_path: Path) -> Callable[..., Path]:
    def factory(name: str = "echo", cases: Sequence[dict[str, Any]] | None = None, *,
                root: Path | None = None, **kwargs: Any) -> Path:
        return write_pack(root or tmp_path / "packs", name, cases, **kwargs)

    return factory


@pytest.fixture(scope="session")
def embedded_model_loaded() -> None:
    """The embedded model loaded once in this process, for tests whose in-process pytest run
    (pytester's runpytest) loads it: the modules torch and transformers import on first load
    are then in sys.modules before the inner run, so the run's clean-up cannot drop them, and a
    later test loading the model does not register torch's operators twice."""
    from evalrun.model.providers import make_provider

    provider = make_provider(parse_model("embedded"))
    close = getattr(provider, "close", None)
    if close is not None:
        close()


# ------------------------------------------------------------------------------------------
# A store of the embedded model's outputs with and without a watermark, made once per test
# session by a real ``evalrun run`` and copied for each test that writes to it (the judges',
# the analyses' and the report's quality tests), and small detection packs
# ------------------------------------------------------------------------------------------
QUALITY_KEY = "quality-test-key"
QUALITY_ENV = {**os.environ, "OPENAI_API_KEY": "local-test-key", "EVALRUN_WATERMARK_KEY": QUALITY_KEY}
#: the watermark of the shared store (strong, so that 6 tokens carry it)
MARK = "kgw:delta=4"
CASES = 30


def run_evalrun(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=QUALITY_ENV, timeout=timeout)


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
    run = run_evalrun("run", "--pack", str(pack), "--model", "embedded", "--watermark", "none", "--watermark", MARK,
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
