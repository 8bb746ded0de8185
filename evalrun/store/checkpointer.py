"""Checkpoints of a store's write-ahead log, run from a thread of their own.

With one transaction per stored result, a run commits thousands of small transactions. In
WAL mode with ``synchronous = NORMAL`` a commit does not wait for the disk, but every
automatic checkpoint (each 1,000 log pages, from inside a commit) copies the log into the
database file and waits for two fsyncs: on this project's reference machine about half the
wall time of storing 10,000 reference-solver results. Running the checkpoints on a second
connection in a thread, as SQLite's documentation suggests for busy writers, lets those waits
overlap the run's own work; durability is unchanged (the same fsyncs happen, in the same
order relative to the log). The writer keeps an automatic checkpoint of its own, at
:data:`WRITER_PAGES`, so the log stays bounded even when the thread cannot keep up.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

#: log pages after which the writer checkpoints itself (40 MiB of 4 KiB pages): the log's bound
WRITER_PAGES = 10_000

#: seconds of commits gathered before a checkpoint runs
SETTLE_S = 0.05
#: longest wait before retrying a checkpoint that could not copy the whole log
RETRY_MAX_S = 1.0


class Checkpointer:
    """Wakes when the writer commits (:meth:`poke`), waits :data:`SETTLE_S` for more commits,
    then runs a passive checkpoint, which never blocks the writer or any reader; one that
    leaves part of the log behind is retried, after up to :data:`RETRY_MAX_S`."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._delay = SETTLE_S
        self._thread = threading.Thread(target=self._run, name=f"evalrun-checkpoint:{path.name}", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        self._delay = SETTLE_S  # a commit ends any back-off: checkpoints follow commits
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(str(self._path), isolation_level=None, check_same_thread=True)
        except sqlite3.Error:
            return  # the writer's own automatic checkpoint still bounds the log
        try:
            conn.execute("PRAGMA synchronous = NORMAL")
            while not self._stop.is_set():
                self._wake.wait()
                if self._stop.wait(self._delay):
                    break
                self._wake.clear()
                try:
                    # fetchall: the statement must finish, or it holds a read lock that keeps
                    # the writer from ever restarting the log
                    busy, log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0]
                except sqlite3.OperationalError:  # busy: another process's checkpoint
                    busy, log, copied = 1, 1, 0
                if busy or copied < log:
                    # part of the log is still to copy (another checkpoint ran, or a reader
                    # held an older snapshot): retry, backing off, without waiting for a
                    # commit that may never come
                    self._delay = min(2 * self._delay, RETRY_MAX_S)
                    self._wake.set()
        except sqlite3.Error:
            pass  # as above: the writer's automatic checkpoint takes over
        finally:
            conn.close()
