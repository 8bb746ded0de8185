"""Stored text shown to a person: control characters and bidirectional overrides made visible.

A model's output, a case file, a grader's message or a command-line argument may hold NUL, ANSI
escape sequences, a bell, a right-to-left override or a zero-width character. Raw in a report,
a terminal or a web page they hide or reorder text (or drive the terminal); shown as ``\\x1b``,
``\\u202e`` or ``\\u200b`` they are evidence. Reports, the viewer and every line evalrun
prints go through :func:`show_controls`. Newlines,
tabs and carriage returns stay: reports and pages lay text out with them.
"""

from __future__ import annotations

import re

#: C0 and C1 controls (but tab, newline, carriage return), DEL, the bidirectional marks,
#: embeddings, overrides and isolates, and the zero-width characters that hide text inside a
#: word (space, non-joiner, joiner, word joiner, byte-order mark)
HOSTILE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def show_controls(text: str) -> str:
    """``text`` with every :data:`HOSTILE` character written as its escape."""
    return HOSTILE.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) > 0xFF else f"\\x{ord(m.group()):02x}",
                       text)


def interval_text(low: float, high: float, *, digits: int = 1, percent: bool = False) -> str:
    """An interval as ``[low, high]``: brackets, a comma, and negative bounds with a true minus
    sign, so that a negative bound never reads as a range's dash (``[−15.9%, 18.1%]`` where
    ``-15.9–18.1%`` was printed). A bound that rounds to zero shows no sign."""
    scale, unit = (100.0, "%") if percent else (1.0, "")

    def bound(value: float) -> str:
        text = f"{scale * value:.{digits}f}"
        if float(text) == 0.0:
            text = text.lstrip("-")
        return text.replace("-", "\u2212") + unit

    return f"[{bound(low)}, {bound(high)}]"
