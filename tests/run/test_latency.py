"""Per-item latency of batched local generation adds up to the batch's wall time, and the
report says which kind of latency it shows."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from evalrun.model.generation import Generation
from evalrun.plugins.providers.local_model import batch_shares


def test_shares_follow_generated_tokens_and_sum_to_one() -> None:
    gens = [Generation(text="a", tokens_out=n) for n in (3, 1, 0, 4)]
    assert batch_shares(gens) == [3 / 8, 1 / 8, 0.0, 4 / 8]
    assert batch_shares([Generation(text="a", tokens_out=None), Generation(text="b", tokens_out=2)]) == [0.5, 0.5]
    assert batch_shares([Generation(text="a", tokens_out=0)] * 4) == [0.25] * 4
    assert batch_shares([]) == []


@pytest.mark.slow
def test_batched_items_carry_their_share_and_the_batch_facts(tmp_path: Path) -> None:
    db = tmp_path / "lat.sqlite"
    proc = subprocess.run([sys.executable, "-m", "evalrun.cli", "run", "--pack", "watermark_robustness",
                           "--model", "embedded", "--temperature", "1", "--max-tokens", "12", "--select",
                           "rewrite_00", "--out", str(db), "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT latency_ms, tokens_out, extra_json FROM results").fetchall()
    conn.close()
    assert len(rows) == 9
    batches: dict[float, list[tuple[float, int]]] = defaultdict(list)
    for latency, tokens_out, extra_json in rows:
        extra = json.loads(extra_json)
        assert extra["latency_kind"] == "batch share"
        batches[extra["batch_ms"]].append((latency, tokens_out, extra["batch_size"]))
    for batch_ms, members in batches.items():
        assert len(members) == members[0][2]
        assert sum(m[0] for m in members) == pytest.approx(batch_ms, rel=1e-9)
        total = sum(m[1] for m in members)
        for latency, tokens, _ in members:
            assert latency == pytest.approx(batch_ms * tokens / total, rel=1e-9)
    assert any(len(m) > 1 for m in batches.values())
    assert all(m[0] < batch_ms for batch_ms, ms in batches.items() for m in ms if len(ms) > 1)  # a share,
    # not the batch's whole time copied to every item
    out = tmp_path / "rep"
    subprocess.run([sys.executable, "-m", "evalrun.cli", "report", "--db", str(db), "--out", str(out)],
                   check=True, capture_output=True)
    md = (out / "report.md").read_text()
    latency_section = md[md.index("### Latency"):md.index("### Token usage")]
    row = next(line for line in latency_section.splitlines() if line.startswith("| embedded"))
    assert [c.strip() for c in row.split("|")[1:3]] == ["embedded", "batch share"]
    assert "divided over its items by generated tokens" in latency_section
