"""``evalrun view`` as a user starts it: one line for every mistake, a URL when it serves."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest


def view(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", "view", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("setup, message", [
    (lambda p: None, "no such database"),
    (lambda p: p.write_text("hello"), "not an SQLite file"),
    (lambda p: p.mkdir(), "is a directory"),
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
