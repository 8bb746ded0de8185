"""benchmarks/gpu_check.py's smoke run on the CPU (what CI can run; a GPU machine runs the same
script with --device cuda): the checks run, the figures come out, and a parity break fails it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"
QUICK = ["--device", "cpu", "--texts", "2", "--speed-texts", "2", "--speed-tokens", "40", "--min-seconds", "0.05"]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_cpu_smoke_run_passes_and_writes_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), *QUICK, "--skip-vllm", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "gpu_check: 2 of 2 checks passed or skipped"
    figures = json.loads(out.read_text())
    assert figures["machine"]["device"] == "cpu"
    parity, speed = figures["checks"]
    assert parity["status"] == "passed" and parity["figures"]["mismatches"] == []
    # every spec's detections (2 texts) and its logits processor were compared
    assert parity["figures"]["comparisons"] == 3 * len(load_script().PARITY_SPECS)
    # the schemes without a torch kernel are named, so the GPU figures say what they left out
    assert set(parity["figures"]["numpy_only"]) == {"kgw_compat", "synthid", "unigram", "waterfall", "dipmark",
                                                    "pf", "exp_gumbel", "morphmark", "sweet", "ewd", "unbiased"}
    assert all(row["ratio"] > 0 for row in speed["figures"].values()) and len(speed["figures"]) == 3


def test_a_device_result_that_differs_from_numpy_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load_script()
    scheme_type = type(module.parse_watermark("kgw"))
    original = scheme_type.prefix_p_values

    def off_by_one_ulp(self, token_ids, key, vocab_size, *, backend=None):  # type: ignore[no-untyped-def]
        values = original(self, token_ids, key, vocab_size, backend=backend)
        return values if backend == "numpy" or len(values) == 0 else values * (1 + 2 ** -52)

    monkeypatch.setattr(scheme_type, "prefix_p_values", off_by_one_ulp)
    check = module.kernel_parity("cpu", texts=2)
    assert check.status == "failed" and "differ" in check.detail


def test_cuda_without_a_gpu_is_one_line_and_exit_2() -> None:
    """With every GPU hidden from torch (as on a machine without one), --device cuda is refused."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cuda"], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "--device cpu" in proc.stderr
