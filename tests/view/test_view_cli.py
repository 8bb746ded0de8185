"""``evalrun view`` as a user starts it: one line for every mistake, a URL when it serves."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from evalrun.view.server import Viewer

RELEASE1 = Path(__file__).resolve().parents[1] / "data" / "release1.sqlite"


def view(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", "view", *args], capture_output=True, text=True,
                          timeout=120)


def damaged(path: Path) -> None:
    """A store whose pages past the header are overwritten."""
    shutil.copy(RELEASE1, path)
    data = bytearray(path.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)
    path.write_bytes(bytes(data))


def foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (x TEXT)")


@pytest.mark.parametrize("setup, message", [
    (lambda p: None, "no such database"),
    (lambda p: p.write_text("hello"), "not an SQLite file"),
    (lambda p: p.mkdir(), "is a directory"),
    (damaged, "database disk image is malformed"),
    (foreign, "not an evalrun results database"),
])
def test_a_store_that_cannot_be_viewed_is_one_line_and_exit_2(tmp_path: Path, setup, message: str) -> None:
    db = tmp_path / "x.sqlite"
    setup(db)
    proc = view("--db", str(db), "--port", "0")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"evalrun: error: --db {db}") and message in proc.stderr


def test_a_port_in_use_is_one_line_and_exit_2(view_db: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = view("--db", str(view_db), "--port", str(port))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert f"--port {port}: already in use" in proc.stderr


def test_it_serves_until_interrupted_and_never_prints_the_key(view_db: Path, view_key: str) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "evalrun.cli", "view", "--db", str(view_db), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "EVALRUN_WATERMARK_KEY": view_key})
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert "(with token evidence)" in line and "ready in" in line
        url = line.split(" at ", 1)[1].split()[0]
        with urllib.request.urlopen(f"{url}api/runs", timeout=60) as response:
            assert len(json.load(response)) == 1
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "stopped" in err
    assert view_key not in line + out + err


def test_listening_beyond_loopback_warns(view_db: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "evalrun.cli", "view", "--db", str(view_db), "--port", "0",
                             "--host", "0.0.0.0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdout.readline()  # type: ignore[union-attr]
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert "warning: listening on 0.0.0.0, not loopback" in err


def test_a_store_of_the_first_release_is_viewed_as_it_is(tmp_path: Path) -> None:
    """Schema version 1 (no transforms, judgements or grade metadata): every page answers."""
    db = tmp_path / "release1.sqlite"
    shutil.copy(RELEASE1, db)
    before = db.read_bytes()
    viewer = Viewer(db, key="k")
    with sqlite3.connect(db) as conn:
        ids = [r[0] for r in conn.execute("SELECT result_id FROM results")]
    paths = ["/", "/runs", "/compare", "/charts", "/api/runs", "/api/packs", "/api/results", "/api/facets",
             *(f"/results/{i}" for i in ids), *(f"/api/results/{i}" for i in ids)]
    assert [viewer.handle(path, {})[0] for path in paths] == [200] * len(paths)
    viewer.store.close()
    assert db.read_bytes() == before


def test_hostile_clients_get_json_errors_and_leave_no_traceback(view_db: Path) -> None:
    """Clients that reset the connection mid-answer, a search too long for SQLite's LIKE, a
    NUL search, and a burst of 200 parallel requests (the listen backlog was 5)."""
    import struct
    import urllib.error
    from concurrent.futures import ThreadPoolExecutor

    proc = subprocess.Popen([sys.executable, "-m", "evalrun.cli", "view", "--db", str(view_db), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().split(" at ", 1)[1].split()[0]  # type: ignore[union-attr]
        host, port = url.split("//", 1)[1].rstrip("/").split(":")
        for _ in range(20):  # ask for a large page, then reset the connection (RST, not FIN)
            s = socket.create_connection((host, int(port)))
            s.sendall(f"GET /api/results?limit=500 HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        for query, status, needle in (("q=" + "x" * 60_000, 400, "at most 1,000"), ("q=%00", 200, None)):
            try:
                with urllib.request.urlopen(f"{url}api/results?{query}", timeout=60) as response:
                    got, body = response.status, json.load(response)
            except urllib.error.HTTPError as exc:
                got, body = exc.code, json.load(exc)
            assert got == status, (query[:20], got, body)
            if needle:   # was: HTML 500 "LIKE or GLOB pattern too complex"
                assert needle in body["error"]
            else:        # was: every result (LIKE stops at NUL); no stored text holds one
                assert body["total"] == 0

        def fetch(i: int) -> int:
            with urllib.request.urlopen(f"{url}{'api/results' if i % 2 else ''}", timeout=60) as response:
                response.read()
                return int(response.status)

        with ThreadPoolExecutor(200) as pool:   # every one answered (was: 10-40% left to time out)
            assert list(pool.map(fetch, range(200))) == [200] * 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err, err[-3000:]
