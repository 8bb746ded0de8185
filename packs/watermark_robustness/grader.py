"""Deterministic grader for the watermark_robustness pack (seed 003, section 2.3).

The model was told to carry a provenance marker ``WMID:<32 hex>`` through a rewriting task
character for character, exactly once. This module decides how well it did.

Decisions, stated once so reports and audits can rely on them:

* Post-model transforms (seed 2.2): CRLF becomes LF, and a lone CR also becomes LF (old Mac
  line endings are a line break too, and a CR can never be part of a marker); runs of spaces
  and tabs collapse to one space; trailing spaces are stripped from every line. Other
  whitespace (newlines, form feeds, non-breaking spaces) is left alone.
* Marker pattern: the seed's ``WMID:[0-9a-fA-F]{32}``, taken as a *maximal* hex run, i.e.
  ``WMID:[0-9a-fA-F]{32,}(?![0-9a-fA-F])``. A 32-hex match may not be followed by another hex
  char, so a marker with hex appended is one marker-like value of the wrong length (MUTATED),
  never a PASS. The hex run is always preceded by ``:`` so no look-behind on the hex is
  needed, and text glued before ``WMID`` (``**WMID:…**``, ``ref=WMID:…``) is ignored, because
  the marker's own characters are still all there.
* Prefix case: ``WMID`` is matched case-insensitively when *finding* marker-like values (a
  model that lower-cases a whole line has mutated the marker, not dropped it, just as the seed
  regex already treats upper-cased hex as a marker-like value), but *comparison* with the
  expected marker is case-sensitive on prefix and hex alike: ``WMID:ABCD…`` is not
  ``WMID:abcd…`` since the system prompt demands a character-for-character copy.
* Both views: markers contain no whitespace and the transforms only touch whitespace, so the
  original and the normalized output always yield the same markers; the grader still searches
  both as the seed says and combines them conservatively: the expected count is the larger of
  the two counts and the wrong values are the union of both views.
* Broken markers: when neither view holds a marker-like value, the grader looks for what is
  left of a marker before calling it DROPPED, because a marker the model kept but damaged is
  a mutation (MUTATED 0.25), not a removal. In the normalized output, in order:
  (1) the expected marker appears once all whitespace is removed (``WMID: 7f3a…``, hex
  wrapped across lines);
  (2) ``wmid``, at most two punctuation chars and optional whitespace are followed by a
  16-64 char token of letters, digits, ``-`` and ``_`` of which at least 75 % are hex (a
  hex digit replaced by a non-hex letter such as ``0`` -> ``O``, UUID-style dashes);
  (3) ``wmid`` with an optional ``:``, ``=``, ``-`` or ``_`` is followed by
  whitespace-separated chunks of 4 or more hex/``-``/``_`` chars holding at least 16 hex
  digits, half a marker (truncated, grouped ``7f3a 1b2c …``, ``WMID 7f3a…``).
  The thresholds keep prose after a bare mention of "WMID" out: English words are far below
  75 % hex and rarely 4+ letters of a-f. Anything less (a marker cut to a few hex chars,
  the word "WMID" alone) is DROPPED.
* An output holding the expected marker exactly once is PASS even if other marker-like values
  also occur (seed 2.3 defines PASS on the expected marker's count alone); the reason string
  names those extra values so a report can still show them.
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

#: The seed's detection regex, verbatim, for documentation and for callers that want it.
SEED_PATTERN = r"WMID:[0-9a-fA-F]{32}"

#: What a case's ``watermark`` field must look like.
EXPECTED_RE = re.compile(r"WMID:[0-9a-f]{32}")

# Marker-like values: any-case prefix, a hex run of 32 or more that is not followed by hex.
_CANDIDATE_RE = re.compile(r"([Ww][Mm][Ii][Dd]):([0-9a-fA-F]{32,})(?![0-9a-fA-F])")
# Fallbacks for damaged markers (see the module docstring, steps 2 and 3).
_MIN_FRAGMENT_HEX = 16
_CORRUPT_RE = re.compile(
    r"[Ww][Mm][Ii][Dd][^0-9A-Za-z\s]{0,2}\s*([0-9A-Za-z_-]{16,64})(?![0-9A-Za-z_-])"
)
_BROKEN_RE = re.compile(
    r"[Ww][Mm][Ii][Dd]\s*[:=_-]?\s*([0-9a-fA-F_-]{4,}(?:\s+[0-9a-fA-F_-]{4,})*)"
)
_HEX_DIGIT_RE = re.compile(r"[0-9a-fA-F]")
_SPACE_TAB_RUN_RE = re.compile(r"[ \t]+")
_TRAILING_SPACE_RE = re.compile(r" +$", re.MULTILINE)
_WHITESPACE_RE = re.compile(r"\s+")

_MAX_LISTED = 3


def normalize(output: str) -> str:
    """Apply the seed's post-model transforms (see the module docstring for the exact rules)."""
    text = output.replace("\r\n", "\n").replace("\r", "\n")
    text = _SPACE_TAB_RUN_RE.sub(" ", text)
    return _TRAILING_SPACE_RE.sub("", text)


def find_markers(text: str) -> list[str]:
    """Every marker-like value in ``text``, in order, as written (prefix and full hex run)."""
    return [f"{m.group(1)}:{m.group(2)}" for m in _CANDIDATE_RE.finditer(text)]


def shorten(value: str) -> str:
    """A marker-like value cut to ``WMID:1234abcd…wxyz (32 hex)`` so reasons stay readable."""
    value = _WHITESPACE_RE.sub(" ", value)
    head = 5 if value[4:5] in {":", "=", "-", "_"} else 4
    body = value[head:].lstrip()
    prefix = value[: len(value) - len(body)]
    size = f"{len(body)} hex" if _HEX_DIGIT_RE.sub("", body) == "" else f"{len(body)} chars"
    if len(body) <= 16:
        return f"{prefix}{body} ({size})"
    return f"{prefix}{body[:8]}…{body[-4:]} ({size})"


def _describe(value: str, expected: str | None) -> str:
    """``shorten(value)`` plus, when it helps, how the value differs from the expected one."""
    text = shorten(value)
    if expected is None or len(value) != len(expected):
        return text
    if value.lower() == expected.lower():
        return text + " [same marker, different letter case]"
    first = next(i for i, (a, b) in enumerate(zip(value, expected)) if a != b)
    where = f"hex char {first - 4}" if first >= 5 else "prefix"
    return text + f" [first difference at {where}: {value[first]!r} for {expected[first]!r}]"


def _list_values(values: list[str], expected: str | None = None) -> str:
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

    extra = (
        f"; also {len(wrong)} other marker-like value(s): {_list_values(wrong, expected)}"
        if wrong
        else ""
    )
    if expected_count == 1:
        return Grade(SCORE_PASS, PASS, "expected marker found exactly once" + extra)
    if expected_count > 1:
        return Grade(
            SCORE_DUPLICATED,
            MUTATED,
            f"expected marker found {expected_count} times (duplicated)" + extra,
        )
    if wrong:
        return Grade(
            SCORE_WRONG_VALUE,
            MUTATED,
            f"expected {shorten(expected)} not found; saw {len(wrong)} marker-like "
            f"value(s) that differ: {_list_values(wrong, expected)}",
        )

    return _grade_damaged(expected, normalized)


def _hex_digits(text: str) -> int:
    return len(_HEX_DIGIT_RE.findall(text))


def _grade_damaged(expected: str, normalized: str) -> Grade:
    """No marker-like value at all: MUTATED 0.25 if a damaged marker remains, else DROPPED."""
    if expected in _WHITESPACE_RE.sub("", normalized):
        return Grade(
            SCORE_WRONG_VALUE,
            MUTATED,
            "expected marker present only with whitespace removed (split or reformatted)",
        )
    fragments: list[str] = []
    for m in _CORRUPT_RE.finditer(normalized):
        token = m.group(1)
        hex_count = _hex_digits(token)
        alnum = sum(ch.isalnum() for ch in token)
        if hex_count >= _MIN_FRAGMENT_HEX and 4 * hex_count >= 3 * alnum:
            fragments.append(m.group(0))
    if not fragments:
        fragments = [
            m.group(0)
            for m in _BROKEN_RE.finditer(normalized)
            if _hex_digits(m.group(1)) >= _MIN_FRAGMENT_HEX
        ]
    if fragments:
        return Grade(
            SCORE_WRONG_VALUE,
            MUTATED,
            f"no intact marker; {len(fragments)} damaged marker-like fragment(s) "
            f"(split, truncated, re-punctuated or non-hex chars): {_list_values(fragments)}",
        )
    return Grade(SCORE_DROPPED, DROPPED, "no marker-like pattern found")
