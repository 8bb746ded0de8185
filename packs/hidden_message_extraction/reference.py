"""Ideal solver for the hidden_message_extraction pack.

``solve`` applies the extraction rule of a case to its ``text`` using only the machine-readable
``params`` (the same procedure the prose ``rule`` states), and never looks at ``expected``.
That is what lets ``--model reference`` prove that every shipped case and the grader agree:
if a case's text, rule and expected answer drifted apart, the reference would stop scoring 1.0.

The procedure, shared by every scheme:

1. Optionally delete noise (``skip``): parenthesised asides, ``[bracketed]`` stage-direction
   lines, or words written entirely in capital letters.
2. Collect letters with the scheme's ``method`` (acrostic, index_of_word, punctuation_mapping,
   capitals).
3. Optionally gate the letters through an ``allowed`` word list (control cases): anything not on
   the list is no message.
4. No letters means no message, answered with the sentinel ``NONE``.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

NO_MESSAGE = "NONE"
SENTENCE_ENDS = frozenset(".!?")

_PARENTHESES_RE = re.compile(r"\([^()]*\)")


def _is_letter(ch: str) -> bool:
    """The rules speak of letters A-Z only, so accents and symbols never count."""
    return ch.isascii() and ch.isalpha()


def _first_letter(chunk: str) -> str | None:
    """First A-Z letter of a word or line, skipping leading punctuation and spaces."""
    for ch in chunk:
        if _is_letter(ch):
            return ch.upper()
    return None


def _letters_only(token: str) -> str:
    return "".join(ch for ch in token if _is_letter(ch))


def _is_all_caps_word(token: str) -> bool:
    """A word of two or more letters, every one a capital (``STOP``, ``URGENT,``)."""
    letters = _letters_only(token)
    return len(letters) >= 2 and letters.isupper()


def _without_parentheses(text: str) -> str:
    # Asides never nest in this pack, but deleting innermost-first keeps nesting well defined.
    previous = None
    while previous != text:
        previous, text = text, _PARENTHESES_RE.sub("", text)
    return text


def _acrostic(text: str, unit: str, skip: str | None) -> list[str]:
    if skip == "parentheses":
        text = _without_parentheses(text)
    if unit == "line":
        letters = []
        for line in text.split("\n"):
            if skip == "bracketed_lines" and line.strip().startswith("["):
                continue
            letter = _first_letter(line)
            if letter is not None:
                letters.append(letter)
        return letters
    if unit != "sentence":
        raise ValueError(f"unknown acrostic unit {unit!r}")
    # A sentence ends at . ! or ?; the next letter after an end (or the first letter of the
    # text) starts a new sentence.
    letters = []
    at_start = True
    for ch in text:
        if at_start and _is_letter(ch):
            letters.append(ch.upper())
            at_start = False
        elif ch in SENTENCE_ENDS:
            at_start = True
    return letters


def _words(text: str, skip: str | None) -> list[str]:
    """Runs of non-space characters holding at least one letter, after deleting noise."""
    if skip == "parentheses":
        text = _without_parentheses(text)
    words = [token for token in text.split() if _first_letter(token) is not None]
    if skip == "all_caps_words":
        words = [token for token in words if not _is_all_caps_word(token)]
    return words


def _index_of_word(text: str, params: Mapping[str, Any]) -> list[str]:
    words = _words(text, params.get("skip"))
    if "n" in params:
        step = int(params["n"])
        if step < 1:
            raise ValueError(f"index_of_word step must be positive, got {step}")
        chosen = words[step - 1 :: step]
    else:
        chosen = []
        for index in params["indices"]:
            if not 1 <= index <= len(words):
                raise ValueError(f"word index {index} outside 1..{len(words)}")
            chosen.append(words[index - 1])
    return [letter for letter in map(_first_letter, chosen) if letter is not None]


def _punctuation_mapping(text: str, mapping: Mapping[str, str]) -> list[str]:
    return [mapping[ch].upper() for ch in text if ch in mapping]


def _capitals(text: str, skip: str | None) -> list[str]:
    if skip == "parentheses":
        text = _without_parentheses(text)
    return [_letters_only(token) for token in text.split() if _is_all_caps_word(token)]


def solve(case: Mapping[str, Any]) -> str:
    """Return the message the case's rule extracts from its text, or ``NONE``."""
    params: Mapping[str, Any] = case["params"]
    text: str = case["text"]
    method = params["method"]
    skip = params.get("skip")
    if method == "acrostic":
        letters = _acrostic(text, params["unit"], skip)
    elif method == "index_of_word":
        letters = _index_of_word(text, params)
    elif method == "punctuation_mapping":
        letters = _punctuation_mapping(text, params["mapping"])
    elif method == "capitals":
        letters = _capitals(text, skip)
    else:
        raise ValueError(f"unknown extraction method {method!r}")
    message = "".join(letters)
    allowed = params.get("allowed")
    if allowed is not None and message not in allowed:
        message = ""
    return message or NO_MESSAGE
