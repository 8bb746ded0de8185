"""The README's test command after its main command: plain `pytest` on this repository keeps
its stores to itself and never touches the user's results.sqlite or results.metrics.json."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_plain_pytest_in_the_repository_never_writes_the_users_results(tmp_path: Path) -> None:
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(REPO / "packs" / "watermark_robustness", tmp_path / "packs" / "watermark_robustness")
    users = {name: f"the user's {name}\n".encode() for name in ("results.sqlite", "results.metrics.json")}
    for name, content in users.items():
        (tmp_path / name).write_bytes(content)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "packs", "-q", "-p", "no:randomly", "-k", "format_convert"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert {name: (tmp_path / name).read_bytes() for name in users} == users
    assert (tmp_path / ".evalrun" / "pytest-results.sqlite").stat().st_size > 0
    assert (tmp_path / ".evalrun" / "pytest-results.metrics.json").is_file()
