#!/usr/bin/env python3
"""The MarkMyWords benchmark on the embedded model, stage by stage.

All prompts of the three generation packs (book reports, stories, news: 296), one scheme, the
``mmw`` attack suite's offline attacks plus ``none``, optionally a quality judge (``--judge
perplexity:embedded``), then the report; the wall time of each stage is read from the store's own timestamps, and the same run
is repeated with ``--workers 2`` (pytest-xdist grading) on a fresh store beside it. Prints
seconds per stage and the ratio of the two totals.

    python benchmarks/bench_mmw.py [--max-tokens 200] [--scheme kgw] [--judge SPEC] [--limit N]

Translation attacks need a model the benchmark does not have offline: they are left out, and
the output says so.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

PACKS = ("mmw_book_reports", "mmw_stories", "mmw_news")


def offline_suite() -> list[str]:
    from evalrun.attacks.suites import read_suite

    return [a for a in read_suite("mmw").attacks if not a.startswith("translate:")]


def _span(db: Path, sql: str) -> float:
    conn = sqlite3.connect(db)
    try:
        first, last = conn.execute(sql).fetchone()
    finally:
        conn.close()
    if not first or not last:
        return 0.0
    return (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()


def run_once(out: Path, args: argparse.Namespace, workers: int) -> dict[str, float]:
    db = out / "bench.sqlite"
    cmd = [sys.executable, "-m", "evalrun.cli", "run", *[a for p in PACKS for a in ("--pack", p)],
           "--model", "embedded", "--watermark", "none", "--watermark", args.scheme, "--attack", "none",
           *[a for spec in offline_suite() for a in ("--attack", spec)], *(["--judge", args.judge] if args.judge else []),
           "--key", "bench-key", "--max-tokens", str(args.max_tokens), "--out", str(db), "--no-progress",
           "--workers", str(workers)]
    if args.limit:  # a quick check: only items whose id holds 001 .. 00N
        cmd += ["--select", " or ".join(f"00{i}" for i in range(1, args.limit + 1))]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    total = time.perf_counter() - start
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "evalrun.cli", "report", "--db", str(db), "--out", str(out / "rep")],
                   check=True, capture_output=True)
    report = time.perf_counter() - t0
    generation = _span(db, "SELECT MIN(r.started_at), MAX(s.created_at) FROM runs r, results s")
    transform = _span(db, "SELECT MIN(created_at), MAX(created_at) FROM transforms")
    judge = _span(db, "SELECT MIN(created_at), MAX(created_at) FROM judgements")
    grading = _span(db, "SELECT MIN(graded_at), MAX(graded_at) FROM results")
    return {"generation": generation, "transform": transform, "judge": judge,
            "detection and grading": grading, "run total": total, "report": report}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--scheme", default="kgw")
    parser.add_argument("--judge", default="", help="a judge stage too, e.g. perplexity:embedded (default: none)")
    parser.add_argument("--limit", type=int, default=0, help="only cases whose id holds 001..00N (a quick check)")
    args = parser.parse_args()
    print(f"attacks: none + {len(offline_suite())} of the mmw suite (translations need a model: left out)")
    rows = {}
    for workers in (0, 2):
        with tempfile.TemporaryDirectory() as tmp:
            rows[workers] = run_once(Path(tmp), args, workers)
    print(f"{'stage':<24}{'in-process s':>14}{'--workers 2 s':>15}")
    for stage in rows[0]:
        print(f"{stage:<24}{rows[0][stage]:>14.1f}{rows[2][stage]:>15.1f}")
    base, other = rows[0]["run total"], rows[2]["run total"]
    print(f"--workers 2 / in-process (run total): {other / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
