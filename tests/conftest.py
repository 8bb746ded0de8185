"""Shared fixtures: a factory for small throwaway packs written to a temporary directory."""

from __future__ import annotations

import json
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

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]

#: folders whose tests compare float results of model arithmetic, BLAS or SIMD math (besides
#: modules marked one by one): ``pytest -m numeric`` selects them, and .ci/run runs them a
#: second time on another CPU path (docs/reproducibility.md)
NUMERIC_FOLDERS = ("watermark", "quality", "model", "metrics", "unlearning")


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

    provider = make_provider("embedded")
    close = getattr(provider, "close", None)
    if close is not None:
        close()
