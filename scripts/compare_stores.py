"""Compare two evalrun stores row for row, leaving out what differs between any two runs.

    python scripts/compare_stores.py OLD.sqlite NEW.sqlite [--across-secrets]

Run ids, wall-clock times and latencies (columns and ``extra_json``'s ``batch_ms``) change from
run to run; everything else -- outputs, token ids, attacked texts, judge answers, scores,
labels, grade metadata, grader fingerprints -- must be equal when the code change claims to
change no result. Exits 1 and names the first differing row when they are not.

``--across-secrets`` compares stores written with different cache secrets (two machines, see
evalrun/_util/cache_secret.py): the cache keys of watermarked results then differ by design,
and every column holding a key is left out; the results themselves must still be equal.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from typing import Any

#: columns that record when or how fast, or which run: never part of a result
VOLATILE = {"run_id", "started_at", "finished_at", "created_at", "graded_at", "latency_ms", "git_sha", "git_dirty",
            "argv", "packages_json", "python", "platform", "evalrun_version", "status", "result_id", "seconds",
            "host", "pid"}
#: columns holding cache keys, which the cache secret enters for watermarked results
KEYS = {"gen_key", "item_key", "transform_key", "judgement_key", "subjects_json"}
#: wall-clock keys inside ``extra_json``
VOLATILE_EXTRA = {"batch_ms"}


def _clean(column: str, value: Any) -> Any:
    if column == "extra_json" and value:
        extra = json.loads(value)
        return json.dumps({k: v for k, v in extra.items() if k not in VOLATILE_EXTRA}, sort_keys=True)
    return value


def compare(old: str, new: str, *, across_secrets: bool = False) -> bool:
    a, b = sqlite3.connect(old), sqlite3.connect(new)
    same = a.execute("pragma user_version").fetchone() == b.execute("pragma user_version").fetchone()
    tables = [r[0] for r in a.execute("select name from sqlite_master where type='table' order by name")]
    for table in tables:
        columns = [r[1] for r in a.execute(f"pragma table_info({table})")]
        keep = [c for c in columns if c not in VOLATILE and not c.endswith("_at")
                and not (across_secrets and c in KEYS)]
        if not keep:
            continue
        query = f"select {', '.join(keep)} from {table}"
        rows = [sorted(tuple(_clean(c, v) for c, v in zip(keep, r)) for r in db.execute(query)) for db in (a, b)]
        diff = next((i for i, (x, y) in enumerate(zip(*rows)) if x != y), None)
        ok = len(rows[0]) == len(rows[1]) and diff is None
        same &= ok
        print(f"{table:16s} {len(rows[0]):7d} rows vs {len(rows[1]):7d}  {'identical' if ok else 'DIFFERENT'}"
              f"  ({len(keep)} of {len(columns)} columns compared)")
        if diff is not None:
            print(f"  first difference:\n  {rows[0][diff]}\n  {rows[1][diff]}")
    return same


if __name__ == "__main__":
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(paths) != 2 or set(flags) - {"--across-secrets"}:
        sys.exit(__doc__)
    sys.exit(0 if compare(*paths, across_secrets="--across-secrets" in flags) else 1)
