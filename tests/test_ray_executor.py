"""``--executor ray``: a run whose generations go through Ray actors stores exactly the outputs
and grades of an in-process run (a local Ray cluster, ``ray.init(num_cpus=2)``, joined by
address as a multi-node run would join its head)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

COLUMNS = ("pack, case_id, model, params_json, watermark, attack, repetition, prompt_json, "
           "raw_output, output_tokens_json, score, label, reason, error, item_key, gen_key")


def _rows(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return sorted(conn.execute(f"SELECT {COLUMNS} FROM results"))
    finally:
        conn.close()


def _run(pack: Path, db: Path, *extra: str) -> None:
    cmd = [sys.executable, "-m", "evalrun.cli", "run", "--pack", str(pack), "--model", "reference",
           "--n", "3", "--attack", "none", "--attack", "swap:p=0.5", "--out", str(db),
           "--no-progress", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def test_ray_run_stores_what_an_in_process_run_stores(tmp_path: Path, make_pack, cluster) -> None:
    cases = [{"id": f"c{i:02d}", "word": f"word{i:02d} and more", "kind": "ab"[i % 2]}
             for i in range(24)]
    pack = make_pack(cases=cases)
    local, distributed = tmp_path / "local.sqlite", tmp_path / "ray.sqlite"
    _run(pack, local)
    _run(pack, distributed, "--executor", "ray", "--ray-address", cluster, "--ray-actors", "2")
    want, got = _rows(local), _rows(distributed)
    assert len(want) == 24 * 3 * 2
    assert all(row[8] for row in want)  # every output stored
    assert got == want


def test_unknown_executor_is_refused(tmp_path: Path, make_pack) -> None:
    cmd = [sys.executable, "-m", "evalrun.cli", "run", "--pack", str(make_pack()), "--model",
           "reference", "--executor", "dask", "--out", str(tmp_path / "r.sqlite"), "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "unknown executor 'dask'" in proc.stderr + proc.stdout
