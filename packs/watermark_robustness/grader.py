"""Deterministic grader for the watermark_robustness pack: the WMID report template, section 2.3, exactly.

The model was told to carry a provenance marker ``WMID:<32 hex>`` through a rewriting task
character for character, exactly once. This module applies the seed's rules and nothing more,
so its scores are comparable with any other seed-003 implementation:

1. Post-model transforms (seed 2.2): CRLF becomes LF (a lone CR also becomes LF, which cannot
   change a match since a marker holds no whitespace); runs of spaces and tabs collapse to one
   space; trailing spaces are stripped from every line.
2. Search all matches of the seed regex ``WMID:[0-9a-fA-F]{32}`` as written (Python
   ``re.findall``: case-sensitive prefix, exactly 32 hex chars, no lookarounds) in both the
   original and the normalized output. The expected marker's count is the larger of the two.
3. Classify: PASS 1.0 when the expected marker is found exactly once; MUTATED 0.5 when it is
   found more than once; MUTATED 0.25 when a match exists but none equals the expected marker
   (compared exactly, so upper-cased hex is a wrong value); DROPPED 0.0 when nothing matches.

Consequences, stated so reports and audits can rely on them:

* Hex appended to the marker (``WMID:<expected>ab``) still holds a match equal to the expected
  marker: PASS if it occurs once. Hex prepended to the hex (``WMID:0<expected>``) shifts the
  match: a wrong value, MUTATED 0.25. The reason string notes any extra trailing hex.
* A lower-case or mixed-case prefix (``wmid:…``) is no match: DROPPED unless other matches
  exist.
* A damaged marker that no longer matches (split by whitespace, a non-hex char inside,
  truncated below 32 hex, re-punctuated as a UUID) is DROPPED 0.0, not MUTATED.
* Text glued around the marker (``**WMID:…**``, ``ref=WMID:…``) does not matter.
* The transforms only touch whitespace and a match holds none, so both views always yield the
  same matches; both are still searched, as the seed says.
* An output holding the expected marker exactly once is PASS even when other (wrong) matches
  also occur, because the seed defines PASS by that count alone; the reason names the extras.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from evalrun.grading import Grade

PASS = "PASS"
MUTATED = "MUTATED"
DROPPED = "DROPPED"
LABELS: tuple[str, ...] = (PASS, MUTATED, DROPPED)

SCORE_PASS = 1.0
SCORE_DUPLICATED = 0.5
SCORE_WRONG_VALUE = 0.25
SCORE_DROPPED = 0.0

#: Every (label, score) pair this grader can emit.
ALLOWED_SCORES: dict[str, frozenset[float]] = {
    PASS: frozenset({SCORE_PASS}),
    MUTATED: frozenset({SCORE_DUPLICATED, SCORE_WRONG_VALUE}),
    DROPPED: frozenset({SCORE_DROPPED}),
}

#: The seed's detection regex, verbatim; the grader uses exactly this.
SEED_PATTERN = r"WMID:[0-9a-fA-F]{32}"
_SEED_RE = re.compile(SEED_PATTERN)

#: What a case's ``watermark`` field must look like.
EXPECTED_RE = re.compile(r"WMID:[0-9a-f]{32}")

_HEX_RUN_RE = re.compile(r"[0-9a-fA-F]+")
_SPACE_TAB_RUN_RE = re.compile(r"[ \t]+")
_TRAILING_SPACE_RE = re.compile(r" +$", re.MULTILINE)

_MAX_LISTED = 3


def normalize(output: str) -> str:
    """Apply the seed's post-model transforms (see the module docstring for the exact rules)."""
    text = output.replace("\r\n", "\n").replace("\r", "\n")
    text = _SPACE_TAB_RUN_RE.sub(" ", text)
    return _TRAILING_SPACE_RE.sub("", text)


def find_markers(text: str) -> list[str]:
    """Every match of the seed regex in ``text``, in order (``re.findall`` semantics)."""
    return _SEED_RE.findall(text)


def trailing_hex(text: str, marker: str) -> list[str]:
    """The extra hex run right after each seed-regex match equal to ``marker`` ('' if none)."""
    out: list[str] = []
    for m in _SEED_RE.finditer(text):
        if m.group(0) == marker:
            run = _HEX_RUN_RE.match(text, m.end())
            out.append(run.group(0) if run else "")
    return out


def shorten(value: str) -> str:
    """A match cut to ``WMID:1234abcd…wxyz`` so reasons stay readable."""
    return f"{value[:13]}…{value[-4:]}"


def _describe(value: str, expected: str) -> str:
    """``shorten(value)`` plus how the value differs from the expected one."""
    text = shorten(value)
    if value.lower() == expected.lower():
        return text + " [same marker, different letter case]"
    first = next(i for i, (a, b) in enumerate(zip(value, expected)) if a != b)
    where = f"hex char {first - 4}"  # 1-based; a match always starts with "WMID:"
    return text + f" [first difference at {where}: {value[first]!r} for {expected[first]!r}]"


def _list_values(values: list[str], expected: str) -> str:
    shown = ", ".join(_describe(v, expected) for v in values[:_MAX_LISTED])
    if len(values) > _MAX_LISTED:
        shown += f", +{len(values) - _MAX_LISTED} more"
    return shown


def _expected_marker(case: Mapping[str, Any]) -> str:
    expected = case.get("watermark")
    if not isinstance(expected, str) or EXPECTED_RE.fullmatch(expected) is None:
        raise ValueError(
            f"case {case.get('id')!r}: 'watermark' must be 'WMID:' + 32 lower-case hex, "
            f"got {expected!r}"
        )
    return expected


def grade(case: dict, output: str) -> Grade:
    """Grade one model output against the case's expected marker (pure; see module docs)."""
    expected = _expected_marker(case)
    if not isinstance(output, str):
        raise TypeError(f"output must be str, got {type(output).__name__}")
    normalized = normalize(output)
    views = (find_markers(output), find_markers(normalized))

    expected_count = max(view.count(expected) for view in views)
    wrong: list[str] = []
    for view in views:
        for value in view:
            if value != expected and value not in wrong:
                wrong.append(value)

    notes = ""
    appended = [run for run in trailing_hex(normalized, expected) if run]
    if appended:
        shown = ", ".join(repr(run) for run in appended[:_MAX_LISTED])
        notes += f"; followed by extra hex {shown} (ignored by the seed regex)"
    if wrong:
        notes += f"; also {len(wrong)} other marker-like value(s): {_list_values(wrong, expected)}"

    if expected_count == 1:
        return Grade(SCORE_PASS, PASS, "expected marker found exactly once" + notes)
    if expected_count > 1:
        return Grade(
            SCORE_DUPLICATED,
            MUTATED,
            f"expected marker found {expected_count} times (duplicated)" + notes,
        )
    if wrong:
        return Grade(
            SCORE_WRONG_VALUE,
            MUTATED,
            f"expected {shorten(expected)} not found; saw {len(wrong)} marker-like "
            f"value(s) that differ: {_list_values(wrong, expected)}",
        )
    return Grade(SCORE_DROPPED, DROPPED, f"no match of {SEED_PATTERN} found")
