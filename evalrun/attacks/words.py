"""Words and sentences of a text: the one tokenisation every word-level attack uses.

:func:`split_words` cuts a text into words and the *gaps* between them (whitespace,
punctuation, symbols), so an attack changes the words it means to change and puts every other
character back: ``split_words(t).text() == t`` for every string ``t``.

* A **word** is a run of letters or digits, with single apostrophes or hyphens inside it:
  ``don't``, ``well-known``, ``rock-n-roll``, ``1990s``, ``café``. ``3.14`` is two words (``3``
  and ``14``); ``_`` is not part of a word. MarkMyWords' ``SwapAttack.word_regex``
  (``src/watermark_benchmark/attacks/swap_attack.py``) instead takes any run of characters
  other than whitespace and ``.!?,:"``, so its words keep brackets and semicolons attached
  (``(hello``); here those stay in the gaps.
* A **sentence** ends in a gap that holds ``.``, ``!`` or ``?`` (optionally followed by closing
  quotes or brackets) followed by whitespace, or that holds a line break. There is no
  abbreviation list: ``Mr. Smith`` is two sentences, as it is for MarkMyWords'
  ``sentence_regex``; ``3.5`` and ``e.g.x`` are not split (no whitespace after the dot).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

#: letters/digits (not ``_``), joined by single inner apostrophes (straight or curly) or hyphens
WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u2019\u201d)\]]*\s|\n")


@dataclass(frozen=True)
class Words:
    """A text as ``gaps[0] + words[0] + gaps[1] + … + words[n-1] + gaps[n]``.

    ``sentences[i]`` numbers the sentence of ``words[i]`` (0, 1, …, non-decreasing).
    """

    words: tuple[str, ...]
    gaps: tuple[str, ...]
    sentences: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.words)

    def text(self) -> str:
        """The text these words and gaps came from."""
        return join_words(self.words, self.gaps)

    def starts_sentence(self, i: int) -> bool:
        """Whether ``words[i]`` is the first word of its sentence."""
        return i == 0 or self.sentences[i] != self.sentences[i - 1]


def split_words(text: str) -> Words:
    """Cut ``text`` into words, the gaps around them and sentence numbers (see module doc)."""
    words: list[str] = []
    gaps: list[str] = []
    sentences: list[int] = []
    sentence = 0
    end = 0
    for match in WORD.finditer(text):
        gap = text[end:match.start()]
        if words and _SENTENCE_END.search(gap):
            sentence += 1
        gaps.append(gap)
        words.append(match.group())
        sentences.append(sentence)
        end = match.end()
    gaps.append(text[end:])
    return Words(tuple(words), tuple(gaps), tuple(sentences))


def join_words(words: Sequence[str], gaps: Sequence[str]) -> str:
    """``gaps[0] + words[0] + gaps[1] + … + gaps[-1]``; ``len(gaps) == len(words) + 1``."""
    if len(gaps) != len(words) + 1:
        raise ValueError(f"{len(words)} words need {len(words) + 1} gaps, got {len(gaps)}")
    parts = [gaps[0]]
    for word, gap in zip(words, gaps[1:]):
        parts.append(word)
        parts.append(gap)
    return "".join(parts)


def match_case(source: str, target: str) -> str:
    """``target`` in the letter case of ``source``: all lower, ALL UPPER (two letters or more)
    or Capitalised; otherwise ``target`` unchanged.

    The rule of HELM's ``helm.common.general.match_case`` (used by its misspelling and
    contraction perturbations), except that only letters count (HELM reads ``"don't"`` as
    not lower-case because of the apostrophe) and Capitalised keeps the rest of ``target`` as
    it is (HELM's ``str.capitalize`` lower-cases it: ``Puerto Rican`` -> ``Puerto rican``).
    """
    letters = [c for c in source if c.isalpha()]
    if not letters:
        return target
    if all(c.islower() for c in letters):
        return target.lower()
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return target.upper()
    if letters[0].isupper():
        return target[:1].upper() + target[1:]
    return target
