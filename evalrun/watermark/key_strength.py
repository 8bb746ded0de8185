"""Whether a watermark key is easy to guess, and the one-line warning commands print for it.

Anyone holding watermarked text can test a guessed key by running detection (docs/pipeline.md,
"Watermark keys and the store"), so a key protects only as much as it is hard to guess. The
rule is deliberately simple and stated in full in docs/pipeline.md: a key is weak when it is
shorter than 16 characters, uses fewer than 8 distinct characters, or is made only of letters
and separators with fewer than 5 words (a passphrase under about 64 bits at Diceware's 12.9
bits a word). The warning never blocks a command and never shows the key.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

from evalrun.watermark.registry import KEY_ENV

MIN_LENGTH = 16
MIN_DISTINCT = 8
MIN_WORDS = 5
#: letters and separators only: a phrase of dictionary-like words
_PHRASE = re.compile(r"[^\W\d_]+(?:[\s._-]+[^\W\d_]+)*")
#: its words: runs of letters, split also at a capital that starts a word ("MyKey", "HTTPServer")
_WORD = re.compile(r"[A-Z]+(?![^\W\d_A-Z])|[A-Z]?[^\W\d_A-Z]+")


def weakness(key: str) -> str | None:
    """Why ``key`` is easy to guess under the module's rule, or None."""
    if len(key) < MIN_LENGTH:
        return f"shorter than {MIN_LENGTH} characters"
    distinct = len(set(key))
    if distinct < MIN_DISTINCT:
        return f"only {distinct} distinct character{'s' * (distinct != 1)}"
    if _PHRASE.fullmatch(key):
        words = len(_WORD.findall(key))
        if words < MIN_WORDS:
            return f"{words} word{'s' * (words != 1)} of letters only, guessable from a dictionary"
    return None


def warn_if_weak(key: str | None, from_option: bool, stream: TextIO | None = None) -> None:
    """Print one warning line naming where ``key`` came from (``--key`` when ``from_option``,
    else the environment variable) when it is weak; nothing for no key."""
    why = None if not key else weakness(key)
    where = "--key" if from_option else f"${KEY_ENV}"
    if why is not None:
        print(f"evalrun: warning: the watermark key ({where}) is easy to guess: {why}; anyone holding "
              "its watermarked text can test guesses. Fine for a public benchmark; for a key that "
              "matters, make one with `evalrun key new`", file=stream or sys.stderr)
