"""A real store for the viewer's tests (the embedded model under kgw and without a watermark,
attacked and not, with perplexity judgements), and a running viewer on it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

from evalrun.view.server import Viewer, make_server

KEY = "viewer-test-key-5831"
KGW = "kgw:gamma=0.25,delta=2"


@pytest.fixture(scope="session")
def view_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("view-store")
    db = where / "results.sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "evalrun.cli", "run", "--pack", "mmw_book_reports", "--watermark", "none",
         "--watermark", KGW, "--attack", "none", "--attack", "lowercase", "--judge", "perplexity:embedded",
         "--select", "book-00", "--max-tokens", "60", "--key", KEY, "--out", str(db), "--no-progress"],
        cwd=where, capture_output=True, text=True, timeout=600, env={k: v for k, v in os.environ.items()
                                                                     if k != "EVALRUN_WATERMARK_KEY"})
    assert proc.returncode == 0, proc.stderr
    return db


def serve(db: Path, key: str | None, *, warm: bool = True) -> Iterator[str]:
    """A viewer served on a free port, warming its caches as ``evalrun view`` does (unless not
    ``warm``); stopped with its warmer, so that no thread of it outlives the fixture."""
    viewer = Viewer(db, key=key)
    server = make_server(viewer, "127.0.0.1", 0, warm=warm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        viewer.close()
        assert not warm or viewer.warmed.wait(timeout=300), "the cache warmer did not stop"


@pytest.fixture(scope="module")
def viewer_url(view_db: Path) -> Iterator[str]:
    """A viewer of ``view_db`` holding the key."""
    yield from serve(view_db, KEY)


@pytest.fixture(scope="module")
def keyless_url(view_db: Path) -> Iterator[str]:
    yield from serve(view_db, None)


@pytest.fixture(scope="session")
def view_key() -> str:
    return KEY


@pytest.fixture(scope="session")
def view_kgw() -> str:
    return KGW
