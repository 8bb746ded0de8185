"""Grading a stored run: detection graders item by item against the same graders prepared in
bulk (grader.py's ``prepare``: every watermark's texts detected in one batched call).

Regrades two copies of one store (``evalrun regrade``'s code path, in this process, one
thread): once with the packs' ``prepare`` hidden, once as shipped. Prints both times, their
ratio, and checks that both copies hold the same grades, row for row.

    python benchmarks/bench_grading.py --db results.sqlite --key public-example-key

(``results.sqlite``: e.g. the store of the README's main command.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from evalrun.pack.loading import Pack  # noqa: E402
from evalrun.run.regrade import regrade  # noqa: E402

GRADES = ("SELECT result_id, label, score, reason, metadata_json FROM results "
          "ORDER BY result_id")


def timed_regrade(db: Path, key: str, prepared: bool) -> tuple[float, int]:
    original = Pack.prepares
    if not prepared:
        Pack.prepares = property(lambda self: False)  # type: ignore[method-assign,assignment]
    try:
        start = time.process_time()
        summary = regrade(db, key=key)
        return time.process_time() - start, summary.regraded
    finally:
        Pack.prepares = original  # type: ignore[method-assign]


def grades(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute(GRADES).fetchall()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--key", default=os.environ.get("EVALRUN_WATERMARK_KEY"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one, two = Path(tmp) / "items.sqlite", Path(tmp) / "prepared.sqlite"
        shutil.copy(args.db, one)
        shutil.copy(args.db, two)
        print(f"store: {args.db}; load before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        t_items, n = timed_regrade(one, args.key, prepared=False)
        t_prep, m = timed_regrade(two, args.key, prepared=True)
        same = grades(one) == grades(two)
    print(f"item by item: {n} grades in {t_items:.2f} CPU-s ({t_items / max(n, 1) * 1e3:.2f} ms each)")
    print(f"prepared:     {m} grades in {t_prep:.2f} CPU-s ({t_prep / max(m, 1) * 1e3:.2f} ms each)")
    print(f"ratio: {t_items / t_prep:.2f}x; identical grades: {same}")
    if not same:
        raise SystemExit("grades differ")


if __name__ == "__main__":
    main()
