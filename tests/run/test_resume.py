"""A run killed with SIGKILL mid-generation resumes with nothing lost and nothing repeated.

The model is the real openai client talking over HTTP to the local test server, slowed down
so the kill lands while calls are in flight.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalrun.testing.chat_server import ChatServer

ANY_ANSWER = '''
from evalrun.pack.grade import Grade

def grade(case, output):
    return Grade(1.0, "OK", "answered") if output.strip() else Grade(0.0, "BAD", "empty")
'''


def _stored(db: Path) -> dict[str, str]:
    if not db.exists():
        return {}
    conn = sqlite3.connect(db, timeout=30)
    try:
        return dict(conn.execute("SELECT case_id, raw_output FROM results WHERE raw_output IS NOT NULL"))
    except sqlite3.OperationalError:  # schema not created yet
        return {}
    finally:
        conn.close()


@pytest.mark.slow
def test_sigkill_then_rerun_completes_without_repeating_finished_calls(tmp_path: Path, make_pack) -> None:
    cases = [{"id": f"c{i:02d}", "word": f"word{i:02d}", "kind": "a"} for i in range(40)]
    pack = make_pack(cases=cases, grader=ANY_ANSWER, reference=None)
    db = tmp_path / "results.sqlite"
    env = {**os.environ, "OPENAI_API_KEY": "local-test-key"}
    with ChatServer(latency_s=0.25) as server:
        cmd = [sys.executable, "-m", "evalrun.cli", "run", "--pack", str(pack), "--model", "openai:test-model",
               "--base-url", server.base_url, "--concurrency", "2", "--out", str(db), "--no-progress"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while len(_stored(db)) < 8 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = _stored(db)
        assert 8 <= len(before) < 40, f"kill did not land mid-run ({len(before)} stored)"
        while server.in_flight and time.monotonic() < deadline:  # calls the dead process left behind
            time.sleep(0.05)
        time.sleep(0.1)
        server.reset_counters()

        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        asked = [r.prompt for r in server.records()]

    # finished calls were not sent again; everything else was sent exactly once
    for case_id in before:
        assert not any(f"word{case_id[1:]}" in prompt for prompt in asked), case_id
    assert len(asked) == len(set(asked)), sorted(asked)
    assert len(asked) == 40 - len(before), (sorted(asked), sorted(before))
    after = _stored(db)
    assert set(after) == {c["id"] for c in cases}
    assert all(after[cid] == text for cid, text in before.items())  # stored outputs kept as they were
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT item_key), SUM(score) FROM results").fetchone() == (40, 40, 40.0)
        runs = conn.execute("SELECT finished_at IS NOT NULL FROM runs ORDER BY started_at").fetchall()
        assert runs == [(0,), (1,)]  # the killed run never finished; the resumed one did
        covered = conn.execute("SELECT COUNT(*) FROM run_items ri JOIN runs USING (run_id)"
                               " WHERE runs.finished_at IS NOT NULL").fetchone()[0]
        assert covered == 40
    finally:
        conn.close()
    # the report's run list says which run was killed; its stored results count as usual
    out = tmp_path / "rep"
    subprocess.run([sys.executable, "-m", "evalrun.cli", "report", "--db", str(db), "--out", str(out)], check=True)
    md = (out / "report.md").read_text()
    statuses = [line.split("|")[2].strip() for line in md.splitlines() if re.match(r"\| [0-9a-f]{32} +\|", line)]
    assert statuses == ["interrupted", "finished"]
