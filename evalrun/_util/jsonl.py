"""Reading JSON-lines files line by line under a size limit per line.

Case files and replay files come from users and can be huge (a model's dump, a wrong file).
Lines are read with a bounded ``readline`` so one oversized line costs at most the limit in
memory: the rest of it is skipped in chunks, and the caller reports it with its size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

#: default size limit of one case (a .json file or a .jsonl line) and of one replay line
MAX_RECORD_BYTES = 1_000_000
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Line:
    """One line: its text, or None when it is over the limit (then ``size`` is its length) or
    is not UTF-8 (then ``problem`` says where)."""

    number: int
    text: str | None
    size: int
    problem: str | None = None


def not_utf8(exc: UnicodeDecodeError) -> str:
    return f"not UTF-8 text (byte {exc.start}: {exc.object[exc.start:exc.start + 4]!r})"


def lone_surrogate(value: Any) -> tuple[str, int] | None:
    """Where a string of a parsed JSON value holds a lone surrogate (``"\\ud800"`` without its
    pair: valid JSON, but no UTF-8 text, so it cannot be stored): its JSON path and character,
    ``("$.output", 5)``; None when every string is text. Walked without recursion (parsed JSON
    may nest deeply)."""
    todo: list[tuple[str, Any]] = [("$", value)]
    while todo:
        path, item = todo.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return path, exc.start
        elif isinstance(item, dict):
            todo += [(f"{path}.{k}", v) for k, v in reversed(list(item.items()))]
            todo += [(f"{path} (a key)", k) for k in item]
        elif isinstance(item, list):
            todo += [(f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item)))]
    return None


def parse_json(text: str) -> Any:
    """``json.loads``, with nesting too deep for the parser (a RecursionError deep in it)
    reported as the :class:`json.JSONDecodeError` every caller already handles."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested deeper than the JSON reader allows (about 1,000 levels)", text, 0) from None


def read_text(path: Path) -> str:
    """A user's text file as UTF-8; a file that is not raises :class:`UnicodeDecodeError`
    whose :func:`not_utf8` names the byte."""
    return path.read_bytes().decode("utf-8")


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
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:  # this line only: the lines after it are still read
                yield Line(number, None, size, problem=not_utf8(exc))
                continue
            if text.strip():
                yield Line(number, text, size)
