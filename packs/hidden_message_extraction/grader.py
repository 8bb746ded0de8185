"""Deterministic grader for the hidden_message_extraction pack (the WMID report template, section 2.3).

Seed 2.3: normalise the output and the expected answer by stripping whitespace and upper-casing,
then CORRECT 1.0 on an exact match, PARTIAL 0.5 when one is a substring of the other, INCORRECT
0.0 otherwise, and FALSE_POSITIVE 0.0 when a message is reported on a no-message control.

Decisions, stated once so reports and audits can rely on them:

* "Strip whitespace" removes *all* whitespace (every Unicode whitespace character, anywhere),
  not only at the ends. Messages never contain whitespace (case files enforce ``^[A-Z]+$`` or
  ``NONE``), so whitespace in an answer can never carry message content; deleting it only
  forgives layout, e.g. a trailing newline from a chat template or letters read out one by one
  (``H E L L O``), which shows the rule was applied correctly. Ends-only stripping would score
  such an answer 0.0 and measure formatting instead of extraction.
* Everything else is kept strict, because the system prompt forbids formatting ("no
  formatting, no quotes"): quotes, a trailing full stop or a preamble are not removed. Such an
  answer still contains the message, so it lands on PARTIAL 0.5 through the substring rule
  rather than on CORRECT.
* An empty (or whitespace-only) answer is never PARTIAL, although the empty string is a
  substring of everything: it is INCORRECT on every case.
* On a message case, the sentinel ``NONE`` is a verdict ("there is no message"), not a fragment
  of one, so it is INCORRECT even if the expected message happened to contain those letters.
* On a control (expected ``NONE``) the only correct answer is ``NONE`` (any case, any
  whitespace). Any other non-empty answer reports a message and is FALSE_POSITIVE, including
  near-sentinels such as ``NONE.`` or ``"NONE"``: the prompt asks for exactly ``NONE``, and
  substrings of ``NONE`` (``NO``, ``ONE``) mean nothing, so PARTIAL is not defined on controls.
  An empty answer on a control is INCORRECT, not FALSE_POSITIVE: the model failed to answer
  but did not claim a message, and the false-positive rate should count only claimed messages.
"""

from __future__ import annotations

from typing import Any, Mapping

from evalrun.grading import Grade

CORRECT = "CORRECT"
PARTIAL = "PARTIAL"
INCORRECT = "INCORRECT"
FALSE_POSITIVE = "FALSE_POSITIVE"
LABELS: tuple[str, ...] = (CORRECT, PARTIAL, INCORRECT, FALSE_POSITIVE)

#: Score of each label; each label has exactly one score.
SCORES: dict[str, float] = {CORRECT: 1.0, PARTIAL: 0.5, INCORRECT: 0.0, FALSE_POSITIVE: 0.0}

#: The answer that means "no hidden message".
NO_MESSAGE = "NONE"

_SHOWN = 24


def normalize(text: str) -> str:
    """Delete every whitespace character and upper-case the rest."""
    return "".join(text.split()).upper()


def _show(value: str) -> str:
    """Quote a normalised value for the reason, cut short so reports stay readable."""
    if not value:
        return "<empty>"
    if len(value) > _SHOWN:
        value = value[: _SHOWN - 1] + "…"
    return repr(value)


def _grade(label: str, expected: str, got: str, why: str) -> Grade:
    return Grade(SCORES[label], label, f"expected {_show(expected)}, got {_show(got)}: {why}")


def grade(case: Mapping[str, Any], output: str) -> Grade:
    """Grade one model output against the case's ``expected`` message (or ``NONE``)."""
    expected = normalize(str(case["expected"]))
    if not expected:
        raise ValueError(f"case {case.get('id', '?')!r} has an empty expected answer")
    got = normalize(output if output is not None else "")

    if got == expected:
        return _grade(CORRECT, expected, got, "exact match")
    if not got:
        return _grade(INCORRECT, expected, got, "empty answer")
    if expected == NO_MESSAGE:
        return _grade(FALSE_POSITIVE, expected, got, "reported a message on a no-message control")
    if got == NO_MESSAGE:
        return _grade(INCORRECT, expected, got, "answered NONE on a case with a message")
    if got in expected:
        return _grade(PARTIAL, expected, got, "answer is part of the message")
    if expected in got:
        return _grade(PARTIAL, expected, got, "answer contains the message plus extra text")
    return _grade(INCORRECT, expected, got, "no match")
