"""benchmarks/bench_contention.py's smoke run on a short command: every arm times the command
alone and N at once, and a copy that fails stops the benchmark with its output."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_contention.py"


def _bench(tmp_path: Path, code: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = shlex.join([sys.executable, "-c", code])
    return subprocess.run([sys.executable, str(SCRIPT), "--command", command, *extra],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_each_arm_times_alone_and_together(tmp_path: Path) -> None:
    code = "import os; print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))"
    proc = _bench(tmp_path, code, "--arms", "before,after,passive", "--copies", "2",
                  "--json", str(tmp_path / "f.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads((tmp_path / "f.json").read_text())["arms"]
    assert set(figures) == {"before", "after", "passive"}
    for arm in figures.values():
        assert arm["alone_s"] >= 0
        assert len(arm["2"]["walls_s"]) == 2 and arm["2"]["slowest_over_fair_share"] > 0
    assert "job alone, after / before:" in proc.stdout


def test_a_failing_copy_stops_it_with_its_output(tmp_path: Path) -> None:
    proc = _bench(tmp_path, "import sys; print('no model here'); sys.exit(3)", "--arms", "after")
    assert proc.returncode != 0
    assert "a copy exited with 3" in proc.stderr and "no model here" in proc.stderr


def test_unknown_arm_is_named(tmp_path: Path) -> None:
    proc = _bench(tmp_path, "pass", "--arms", "after,fast")
    assert proc.returncode == 2 and "unknown fast" in proc.stderr
