"""Reading JSON-lines files line by line under a size limit per line.

Case files and replay files come from users and can be huge (a model's dump, a wrong file).
Lines are read with a bounded ``readline`` so one oversized line costs at most the limit in
memory: the rest of it is skipped in chunks, and the caller reports it with its size.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

#: default size limit of one case (a .json file or a .jsonl line) and of one replay line
MAX_RECORD_BYTES = 1_000_000
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Line:
    """One line: its text, or None when it is over the limit (then ``size`` is its length)."""

    number: int
    text: str | None
    size: int


def read_lines(path: Path, limit: int = MAX_RECORD_BYTES) -> Iterator[Line]:
    """Non-blank lines of ``path`` (UTF-8) with their 1-based numbers; a line longer than
    ``limit`` bytes comes back with ``text=None`` instead of being read into memory."""
    with path.open("rb") as fh:
        number = 0
        while True:
            raw = fh.readline(limit + 1)
            if not raw:
                return
            number += 1
            size = len(raw)
            if len(raw) > limit and not raw.endswith(b"\n"):
                while True:  # skip the rest of the line without keeping it
                    more = fh.readline(_CHUNK)
                    size += len(more)
                    if not more or more.endswith(b"\n"):
                        break
                yield Line(number, None, size)
                continue
            text = raw.decode("utf-8").rstrip("\r\n")
            if text.strip():
                yield Line(number, text, size)
