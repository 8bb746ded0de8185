"""benchmarks/bench_generation_overhead.py's smoke run with a random model of its own
vocabulary (``--vocab``: prompts as random ids), ``--device`` and the ``--json`` figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_generation_overhead.py"


def test_smoke_run_with_vocab_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "ratios.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--vocab", "300", "--shape", "1x64",
                           "--batch-sizes", "1,2", "--pairs", "2", "--max-tokens", "2",
                           "--warmup", "0", "--only", "kgw,dipmark", "--device", "cpu",
                           "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vocabulary 300" in proc.stdout
    ratios = json.loads(out.read_text())["ratios"]
    names = {spec.split(":")[0] for spec in ratios}
    assert names == {"none (A/A)", "kgw", "dipmark"}, ratios
    assert len(ratios) == 4  # native kgw and the reference-compatible kgw
    for per_batch in ratios.values():
        assert set(per_batch) == {"1", "2"}
        assert all(r > 0 for r in per_batch.values())


def test_random_prompt_ids_are_seeded_by_the_prompt() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bench_generation_overhead as bench
    finally:
        sys.path.remove(str(SCRIPT.parent))
    from evalrun.model.generation import Prompt

    a = bench.random_prompt_ids(Prompt(None, "Chapter 1."), 128256)
    assert a == bench.random_prompt_ids(Prompt(None, "Chapter 1."), 128256)
    assert a != bench.random_prompt_ids(Prompt(None, "Chapter 2."), 128256)
    assert len(a) == bench.PROMPT_IDS
    assert all(bench.FIRST_PLAIN_ID <= i < 128256 for i in a)
    assert max(a) >= 8192  # beyond the embedded tokenizer's vocabulary
    assert bench.bench_key("synthid:depth=3") and bench.bench_key("none") is None
