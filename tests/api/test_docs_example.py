"""docs/python-api.md's notebook session, run as written: its python blocks, in order, as one
fresh Python process in an empty folder (no key in the environment)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "python-api.md"

pytestmark = pytest.mark.slow


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def test_the_pages_session_runs_and_prints_what_the_page_shows(tmp_path: Path) -> None:
    code = "\n".join(blocks("python"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                          env={k: v for k, v in os.environ.items() if k != "EVALRUN_WATERMARK_KEY"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = proc.stdout.splitlines()
    shown = blocks("text")[-1].splitlines()
    # the run's own summary lines come first; the session's prints are the last lines
    mine = printed[-len(shown):]
    assert mine[0] == shown[0] == "finished 18 results"
    # counts, labels and the table's layout are the same on any CPU; p-values only in magnitude
    assert mine[1:9] == shown[1:9], "\n".join(mine)
    key_p = float(re.search(r"p = (\S+) with the key", mine[-2]).group(1))
    other_p = float(re.search(r", (\S+) with another", mine[-2]).group(1))
    own_p = float(re.search(r": p = (\S+),", mine[-1]).group(1))
    assert key_p <= 0.02 < other_p and own_p <= 0.02
    assert (tmp_path / "detection_by_attack.png").stat().st_size > 1000
    assert (tmp_path / "notebook.sqlite").is_file()
