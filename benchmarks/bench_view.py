"""The viewer on large stores: start-up time and page times at 10,000 and 100,000 results.

Builds each store from a real one (default: the README's main command's ``results.sqlite``)
by copying its results under new case ids until there are N (transforms, judgements and runs
come along), then starts ``evalrun view`` as a user does and times, over HTTP:
  * start-up: process start to the first answered request;
  * the results page unfiltered, filtered (watermark + attack), text-searched, sorted by
    score, and its last page; the JSON listing; one result with token evidence (first: the
    tokenizer loads; then another); the comparison of two watermarks; the charts (first: the
    report's computation over every result; then cached).
The baseline, measured in the same run, is SQLite answering the listing's own COUNT query on
the same file; each page's ratio to it is printed.

    python benchmarks/bench_view.py [--from results.sqlite] [--sizes 10000 100000] [--key public-example-key]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode


def build(source: Path, target: Path, n: int) -> None:
    """``target``: ``source`` with its results copied under new case ids until there are ``n``."""
    shutil.copy(source, target)
    conn = sqlite3.connect(target)
    conn.execute("PRAGMA journal_mode = DELETE")
    base = conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    columns = [r[1] for r in conn.execute("PRAGMA table_info(results)") if r[1] != "result_id"]
    copy = 1
    while conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] < n:
        need = n - conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        chosen = ", ".join(f"case_id || '~{copy}'" if c == "case_id" else f"item_key || '~{copy}'" if c == "item_key"
                           else c for c in columns)
        conn.execute(f"INSERT INTO results ({', '.join(columns)}) SELECT {chosen} FROM results"
                     f" WHERE result_id <= {base} ORDER BY result_id LIMIT {need}")
        copy += 1
    conn.execute("INSERT OR IGNORE INTO run_items (run_id, result_id) SELECT run_id, result_id FROM results")
    conn.commit()
    conn.close()


def timed_get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        response.read()
        assert response.status == 200, url
    return time.perf_counter() - start


def measure(db: Path, key: str) -> list[tuple[str, float]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    wm = conn.execute("SELECT watermark FROM results WHERE watermark != 'none' LIMIT 1").fetchone()[0]
    attack = conn.execute("SELECT attack FROM results WHERE attack != 'none' LIMIT 1").fetchone()[0]
    marked = [r[0] for r in conn.execute("SELECT result_id FROM results WHERE watermark = ? AND attack = ?"
                                         " ORDER BY result_id DESC LIMIT 2", (wm, attack))]
    total = conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    start = time.perf_counter()
    for _ in range(5):
        conn.execute("SELECT COUNT(*) FROM results WHERE watermark = ? AND attack = ?", (wm, attack)).fetchone()
    baseline = (time.perf_counter() - start) / 5
    conn.close()
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "evalrun.cli", "view", "--db", str(db), "--port", "0",
                             "--key", key], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        url = line.split(" at ", 1)[1].split()[0].rstrip("/")
        timed_get(f"{url}/api/runs")
        rows = [("baseline: SQLite COUNT of the filtered listing", baseline),
                ("start-up (process start to first answer)", time.perf_counter() - started)]
        pages = [
            ("results page", "/"),
            ("results page, filtered by watermark and attack", "/?" + urlencode({"watermark": wm, "attack": attack})),
            ("results page, text search", "/?q=the%20house"),
            ("results page, sorted by score", "/?sort=score&order=desc"),
            ("results page, last page", f"/?offset={max(0, total - 50)}"),
            ("JSON listing, 500 rows", "/api/results?limit=500"),
            ("first result with token evidence", f"/results/{marked[0]}"),
            ("another result with token evidence", f"/results/{marked[1]}"),
            ("compare two watermarks", "/compare?" + urlencode({"watermark_a": "none", "watermark_b": wm})),
            ("charts (the report's computation)", "/charts"),
            ("charts again (cached)", "/charts"),
        ]
        rows += [(name, timed_get(url + path)) for name, path in pages]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", type=Path, default=Path("results.sqlite"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--key", default="public-example-key")
    args = parser.parse_args()
    if not args.source.is_file():
        print(f"bench_view: --from {args.source}: no such store (run the README's main command first)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="evalrun-bench-view-") as tmp:
        for n in args.sizes:
            db = Path(tmp) / f"view-{n}.sqlite"
            build(args.source, db, n)
            rows = measure(db, args.key)
            baseline = rows[0][1]
            print(f"\n{n:,} results")
            for name, seconds in rows:
                print(f"  {name:<52} {seconds * 1000:9.1f} ms  {seconds / baseline:8.1f}x baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
