"""benchmarks/bench_permutation.py's smoke run: both paths time, the figures come out and every
detection is checked identical (the script exits 1 on a difference)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evalrun.kernels import offset_scores as osk

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_permutation.py"


@pytest.mark.skipif(not osk.compiled_available(),
                    reason="the compiled kernel was not built with this install")
def test_smoke_run_compares_every_build() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--texts", "2", "--tokens", "12",
                           "--min-seconds", "0", "--variant", "all"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines() if "randomness=fixed" in line]
    assert len(rows) == 3 * len(osk.variants())
    assert all("  yes (2 texts" in row and "x " in row for row in rows), proc.stdout
