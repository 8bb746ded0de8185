"""The rerun promise of docs/reproducibility.md: on one machine, with the same thread count and
wheels, the README's main job run again into a fresh store stores the same rows, as
``scripts/compare_stores.py`` compares them (run ids and times aside)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _compare_stores():
    spec = importlib.util.spec_from_file_location("compare_stores", REPO / "scripts" / "compare_stores.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compare


@pytest.mark.slow
def test_the_main_job_rerun_on_one_machine_stores_identical_rows(tmp_path: Path, capsys) -> None:
    """The main command on 19 book reports and 40 tokens: three watermarks, an attack, MAUVE
    and perplexity, generated, attacked, judged, graded twice into two fresh stores."""
    args = ["run", "--pack", "mmw_book_reports", "--select", "book-00 or book-01", "--watermark", "none",
            "--watermark", "kgw:gamma=0.5,delta=2", "--watermark", "exp:context=3,skip=0.05", "--attack", "none",
            "--attack", "typo:p=0.05", "--judge", "mauve:embedded", "--judge", "perplexity:embedded",
            "--max-tokens", "40", "--key", "a rerun key", "--no-progress"]
    stores = [tmp_path / "first.sqlite", tmp_path / "second.sqlite"]
    for store in stores:
        proc = subprocess.run([sys.executable, "-m", "evalrun.cli", *args, "--out", str(store)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600,
                              env={k: v for k, v in os.environ.items() if k != "EVALRUN_WATERMARK_KEY"})
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert _compare_stores()(str(stores[0]), str(stores[1]))
    table = capsys.readouterr().out
    assert "DIFFERENT" not in table and "results              114 rows" in table, table
