"""Harness overhead: 10,000 cases with the reference model, end to end, store writes included.

Builds a synthetic pack from the shipped watermark_robustness pack (its grader and reference
solver, each case cloned until there are N), then measures in one run:
  * baseline: solve + grade every case in a plain Python loop (no pytest, no store);
  * collection: `pytest --collect-only` over the pack (process wall time);
  * end to end: `evalrun run --model reference` (process wall time: generation phase, one
    pytest item per case run by the lean item protocol, one transaction per stored result
    and per grade);
  * the same with pytest's own item protocol (`-- --capture=sys` turns the lean one off:
    evalrun.plugins.item_protocol), the baseline of the lean protocol;
  * the same with `--commit-ms 50` (fast results and grades committed in groups holding at
    most 50 ms of work: evalrun.store.commit_batch) on a fresh store;
  * a second, cached run of the default command (nothing regenerated).
The generation phase of each fresh run is read from the store's timestamps (run start to the
last stored generation), so the harness alone (the issue's "plus generation") shows too.
Prints the figures and the ratios against the baseline and against an empty pytest process.
Usage: python benchmarks/bench_harness.py [--cases 10000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from evalrun.pack.loading import load_pack, shipped_packs_dir


def build_pack(root: Path, n: int) -> Path:
    src = shipped_packs_dir() / "watermark_robustness"
    dst = root / "bench_pack"
    (dst / "cases").mkdir(parents=True)
    for name in ("pack.toml", "grader.py", "reference.py"):
        shutil.copy(src / name, dst / name)
    text = (dst / "pack.toml").read_text().replace('name = "watermark_robustness"', 'name = "bench_pack"')
    (dst / "pack.toml").write_text(text)
    base = [json.loads(p.read_text()) for p in sorted((src / "cases").glob("*.json"))]
    with open(dst / "cases" / "all.jsonl", "w") as fh:
        for i in range(n):
            case = dict(base[i % len(base)])
            case["id"] = f"{case['id']}_{i:05d}"
            fh.write(json.dumps(case) + "\n")
    return dst


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}")
    return elapsed


def generation_seconds(db: Path) -> float:
    """The first run's generation phase, from the store's own timestamps: from the run's start
    to its last stored generation."""
    with sqlite3.connect(db) as conn:
        started, = conn.execute("SELECT started_at FROM runs ORDER BY started_at LIMIT 1").fetchone()
        last, = conn.execute("SELECT MAX(created_at) FROM results").fetchone()
    return (datetime.fromisoformat(last) - datetime.fromisoformat(started)).total_seconds()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pack_dir = build_pack(root, args.cases)

        start = time.perf_counter()
        pack = load_pack(pack_dir)
        load_s = time.perf_counter() - start
        start = time.perf_counter()
        for case in pack.cases:
            pack.grade(case.data, pack.solve(case.data))
        baseline_s = time.perf_counter() - start

        empty = root / "empty"
        empty.mkdir()
        (empty / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
        pytest_cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
        empty_s = timed(pytest_cmd + [str(empty)], root)
        collect_s = timed(pytest_cmd + ["--collect-only", str(pack_dir)], root)
        db = root / "bench.sqlite"
        run_cmd = [sys.executable, "-m", "evalrun.cli", "run", "--pack", str(pack_dir), "--model", "reference",
                   "--out", str(db), "--no-progress"]
        run_s = timed(run_cmd, root)
        gen_s = generation_seconds(db)
        cached_s = timed(run_cmd, root)
        pytest_protocol_s = timed([*run_cmd[:-2], str(root / "protocol.sqlite"), "--no-progress", "--",
                                   "--capture=sys"], root)
        pytest_protocol_gen_s = generation_seconds(root / "protocol.sqlite")
        grouped_cmd = [*run_cmd[:-2], str(root / "grouped.sqlite"), "--no-progress", "--commit-ms", "50"]
        grouped_s = timed(grouped_cmd, root)
        grouped_gen_s = generation_seconds(root / "grouped.sqlite")

    n = args.cases
    print(f"cases: {n}")
    print(f"pack load (parse + schema-less validation): {load_s:.2f} s")
    print(f"baseline solve+grade loop (no harness):   {baseline_s:.2f} s")
    print(f"empty pytest process:                      {empty_s:.2f} s")
    print(f"collection of {n} items (process):       {collect_s:.2f} s"
          f"  ({collect_s - empty_s:.2f} s above an empty pytest; target <= 3 s)")
    print(f"evalrun run, end to end (process):         {run_s:.2f} s  (target <= 20 s)"
          f"  = {run_s / n * 1000:.2f} ms per case")
    print(f"  of which the generation phase:           {gen_s:.2f} s; the rest "
          f"{(run_s - gen_s) / n * 1000:.2f} ms per case")
    print(f"with pytest's own item protocol:           {pytest_protocol_s:.2f} s  = "
          f"{pytest_protocol_s / n * 1000:.2f} ms per case; besides its generation phase "
          f"({pytest_protocol_gen_s:.2f} s) {(pytest_protocol_s - pytest_protocol_gen_s) / n * 1000:.2f} ms"
          f" per case: the lean protocol is {pytest_protocol_s / run_s:.2f}x faster end to end")
    print(f"evalrun run --commit-ms 50:                {grouped_s:.2f} s"
          f"  = {grouped_s / n * 1000:.2f} ms per case ({run_s / grouped_s:.2f}x faster)")
    print(f"  of which the generation phase:           {grouped_gen_s:.2f} s; the rest "
          f"{(grouped_s - grouped_gen_s) / n * 1000:.2f} ms per case")
    print(f"evalrun run again, all cached:             {cached_s:.2f} s")
    print(f"ratio end-to-end / baseline loop:          {run_s / baseline_s:.1f}x")
    print(f"ratio end-to-end / empty pytest:           {run_s / empty_s:.1f}x")


if __name__ == "__main__":
    main()
