# mypy: allow-redefinition
# (decode_lines narrows ``fast`` by reassigning it)
"""Token-id JSON lines (``{"id": ..., "token_ids": [...]}``) read at array speed.

``evalrun detect --tokens`` reads files of millions of ids; ``json.loads`` turns each id into
a Python int (about 80 ns an id here), several times what the batched detector spends on it.
A line of the common shape is split instead: the text between the brackets of
``"token_ids"`` is parsed by numpy as comma-separated int64, and the rest of the line (the
same line with an empty list) by ``json``. The fast path only answers when the result is
certainly what ``json.loads`` gives; any doubt sends the line to ``json.loads`` itself, so
every line is judged by one JSON parser and one set of error messages:

* no backslash in the line and ``"token_ids"`` exactly once: the match is then a real key
  (a string cannot hide a quote) and no duplicate key can override it;
* the bracket text holds only digits, commas, minus signs and JSON whitespace, no field is
  empty, and every minus sign starts a number; numpy reads all of it (its partial-read warning counts as
  doubt), finds as many numbers as there are commas plus one, none of them an int64 limit
  (numpy clamps an overflow to one), and the text has no more digits than the numbers
  written without leading zeros;
* the line without the ids decodes to an object whose ``token_ids`` is that empty list.

Where the install built ``evalrun.kernels._token_ids`` (``kernels/token_ids.c``), the bracket
texts are read in one pass by the JSON grammar for integers instead, int64 limits included;
numpy's parse and the checks above are the fallback. Both vouch only for what ``json.loads``
reads the same.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import numpy as np

_KEY = '"token_ids"'
_OPEN = re.compile(r'"token_ids"[ \t\n\r]*:[ \t\n\r]*\[')
_SPACE = b" \t\n\r"
_ALLOWED = b"0123456789,-" + _SPACE
_DIGITS = b"0123456789"
_LONE_MINUS = re.compile(rb"-(?![0-9])|[0-9]-")
_INT64 = np.iinfo(np.int64)
_EMPTY = np.zeros(0, dtype=np.int64)

try:  # built by setup.py where a C compiler exists
    from evalrun.kernels import _token_ids as _compiled
except ImportError:  # pragma: no cover - depends on the install
    _compiled = None


def split_line(line: str) -> tuple[dict[str, Any], bytes] | None:
    """``(the decoded object with token_ids=[], the bracket text)`` of a line of the common
    shape, or None (then ``json.loads`` decides). The bracket text is checked later, with
    those of other lines (:func:`parse_bodies`)."""
    if "\\" in line or line.count(_KEY) != 1:
        return None
    m = _OPEN.search(line)
    if m is None:
        return None
    a = m.end()
    b = line.find("]", a)
    if b < 0:
        return None
    try:
        body = line[a:b].encode("ascii")
        obj = json.loads(line[:a] + line[b:])
    except (UnicodeEncodeError, json.JSONDecodeError):
        return None
    if not isinstance(obj, dict) or obj.get("token_ids") != []:
        return None
    return obj, body


def parse_bodies(bodies: list[bytes]) -> list[np.ndarray] | None:
    """The int64 ids of every bracket text, or None when any of them is in doubt (see the
    module docstring). All texts are checked and parsed together: the compiled reader, or
    plain byte-string methods and one numpy parse over the joined texts, since per-line calls
    or a regular expression over every id would cost more than numpy's parse itself."""
    sizes = [0 if not body.strip() else body.count(b",") + 1 for body in bodies]
    joined = b",".join(body for body, size in zip(bodies, sizes) if size)
    if joined and _compiled is not None:
        # every comma of the joined text separates two fields, so the fields number sum(sizes)
        flat = np.empty(sum(sizes), dtype=np.int64)
        if _compiled.read(joined, flat) != len(flat):
            return None
    elif joined:
        if joined.translate(None, _ALLOWED):
            return None
        compact = joined.translate(None, _SPACE)
        if b",," in compact or compact.startswith(b",") or compact.endswith(b","):
            return None  # an empty field (``[1,,2]``, ``[1, ]``): numpy may read a number there
        if b"-" in joined and _LONE_MINUS.search(joined):
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                flat = np.fromstring(joined, dtype=np.int64, sep=",")
            except (ValueError, DeprecationWarning):
                return None
        if len(flat) != sum(sizes) or int(flat.min()) == _INT64.min or int(flat.max()) == _INT64.max:
            return None
        if _digit_count(flat) != len(joined) - len(joined.translate(None, _DIGITS)):
            return None  # some number has a leading zero
    else:
        flat = _EMPTY
    return np.split(flat, np.cumsum(sizes)[:-1]) if bodies else []


def _digit_count(ids: np.ndarray) -> int:
    """Digits of the ids written as JSON writes them (no leading zeros, ``-0`` as ``0``).

    Each comma-separated field holds at least the digits of its number, and exactly those
    unless it has a leading zero (``007``, which numpy reads and JSON refuses): comparing the
    totals finds one without searching the text. A comparison per power of ten up to the
    largest id: a few passes over the ids."""
    if not len(ids):
        return 0
    mag = np.abs(ids)
    return len(ids) + sum(int(np.count_nonzero(mag >= 10 ** k))
                          for k in range(1, len(str(int(mag.max())))))


def decode_lines(lines: list[str]) -> list[tuple[Any, Any] | json.JSONDecodeError]:
    """For each line, ``(the decoded object, its token_ids)`` -- an int64 array on the fast
    path, else whatever ``json.loads`` found (the caller checks it) -- or the
    ``json.JSONDecodeError`` that ``json.loads`` raised."""
    out: list[tuple[Any, Any] | json.JSONDecodeError | None] = [None] * len(lines)
    fast = [(i, split_line(line)) for i, line in enumerate(lines)]
    fast = [(i, found) for i, found in fast if found is not None]
    arrays: list[np.ndarray] | list[np.ndarray | None] | None = parse_bodies([body for _, (_, body) in fast])
    if arrays is None:  # some text in doubt: each line on its own
        singles = (parse_bodies([body]) for _, (_, body) in fast)
        arrays = [one[0] if one is not None else None for one in singles]
    for (i, (obj, _)), ids in zip(fast, arrays):
        if ids is not None:
            out[i] = (obj, ids)
    for i, line in enumerate(lines):
        if out[i] is None:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                out[i] = exc
                continue
            out[i] = (obj, obj.get("token_ids") if isinstance(obj, dict) else None)
    return out  # type: ignore[return-value]
