"""The ``swap`` attack of MarkMyWords (Table II and section IV-A): remove, duplicate
or swap words.

The paper: "We scan generated text word by word, and with probability p, we either remove
the word, duplicate it, or swap it with another randomly chosen word in the sentence."

Spec: ``swap:p=P`` (the paper: each of the three edits with probability P/3), or the separate
rates ``swap:remove=R,duplicate=D,swap=S`` (each defaults to 0; R + D + S <= 1), which
express MarkMyWords' registered grid (``SwapAttack.get_param_list`` in
``src/watermark_benchmark/attacks/swap_attack.py``)::

    SwapAttack_0.05_0.05_0_0  ->  swap:duplicate=0.05,remove=0.05
    SwapAttack_0_0_0.05_0     ->  swap:swap=0.05
    SwapAttack_0_0_0.1_0      ->  swap:swap=0.1

``p`` cannot be combined with the rates; plain ``swap`` is ``swap:p=0.05``.

Semantics (words and sentences from :mod:`evalrun.attacks.words`). Words are scanned left to
right by position; at each position one number ``u = rng.random()`` is drawn and the word now
at that position is

* removed if ``u < R``: the gaps on either side merge; a space that would follow another
  space or start the text, or precede closing punctuation, a line break or the end of the
  text, is dropped (``a b c`` -> ``a c``; ``a b.`` -> ``a.``; ``a b`` -> ``a``);
* duplicated if ``R <= u < R + D``: ``w`` becomes ``w w`` (one space, as MarkMyWords' repeat
  inserts);
* swapped if ``R + D <= u < R + D + S``: exchanged with a partner drawn uniformly
  (``rng.choice``) from the other positions of the same sentence that still hold a word; with
  no such position nothing happens (the draw of ``u`` is still made).

A word moved by a swap travels with any duplicate made of it earlier; the gaps (spaces,
punctuation) stay where they were, so capitalisation is not adjusted.

Where this follows the paper rather than MarkMyWords' code: MarkMyWords runs three
independent passes (adjacent-word swaps inside each sentence, then deletions, then repeats,
each word with its own probability), so a word can be both swapped and deleted, and a swap
only ever exchanges neighbours. Here each word gets at most one of the three edits, and the
swap partner is any word of the sentence, as the paper says. MarkMyWords also replaces every
double space of the result by one (``text.replace("  ", " ")``), including ones that were in
the input; here only the gaps a removal merges are tidied. Its ``sentence_swap_probability``
(0 in all its registered variants) has no counterpart.
"""

from __future__ import annotations

import random
import re

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, spec_float
from evalrun.attacks.base import text_attack
from evalrun.attacks.words import split_words

DEFAULT_P = 0.05
_RATES = ("remove", "duplicate", "swap")
_LEADING_SPACE = re.compile(r"^[ \t]+")
_TRAILING_SPACE = re.compile(r"[ \t]+$")
_CLOSING = re.compile(r"^[,.;:!?)\]}\u201d\u2019]")


def swap_rates(spec: Spec) -> tuple[float, float, float]:
    """``(remove, duplicate, swap)`` probabilities of a ``swap`` spec."""
    given = [key for key in _RATES if key in spec.params]
    if "p" in spec.params:
        if given:
            raise SpecError(f"--attack {spec}: give either p or the rates {', '.join(_RATES)}, not both")
        p = spec_float(spec, "p", DEFAULT_P, what="--attack", lo=0.0, hi=1.0)
        return (p / 3, p / 3, p / 3)
    if not given:
        return (DEFAULT_P / 3, DEFAULT_P / 3, DEFAULT_P / 3)
    remove, duplicate, swap = (spec_float(spec, key, 0.0, what="--attack", lo=0.0, hi=1.0) for key in _RATES)
    if remove + duplicate + swap > 1.0 + 1e-12:
        raise SpecError(f"--attack {spec}: remove + duplicate + swap = "
                        f"{remove + duplicate + swap:g} is more than 1")
    return (remove, duplicate, swap)


def _merge_gaps(left: str, right: str) -> str:
    """The gap left where the word between the gaps ``left`` and ``right`` is removed."""
    if right[:1] in (" ", "\t") and (not left or left[-1].isspace()):
        return left + _LEADING_SPACE.sub("", right)  # "a b c" -> "a c"; "Hello world" -> "world"
    if left[-1:] in (" ", "\t") and (not right or right[0] in "\r\n" or _CLOSING.match(right)):
        return _TRAILING_SPACE.sub("", left) + right  # "a b." -> "a."; "a b" -> "a"
    return left + right


@text_attack("swap", keys=("p", *_RATES))
def swap(text: str, spec: Spec, rng: random.Random) -> str:
    """Remove, duplicate or swap (with a word of the same sentence) each word with probability p."""
    remove, duplicate, swap_rate = swap_rates(spec)
    split = split_words(text)
    n = len(split)
    slots: list[str | None] = list(split.words)  # None: removed
    by_sentence: dict[int, list[int]] = {}
    for i, s in enumerate(split.sentences):
        by_sentence.setdefault(s, []).append(i)
    for i in range(n):
        # slots[i] holds a word here: only step i removes position i
        u = rng.random()
        if u < remove:
            slots[i] = None
        elif u < remove + duplicate:
            slots[i] = f"{slots[i]} {slots[i]}"
        elif u < remove + duplicate + swap_rate:
            partners = [j for j in by_sentence[split.sentences[i]] if j != i and slots[j] is not None]
            if partners:
                j = rng.choice(partners)
                slots[i], slots[j] = slots[j], slots[i]
    return _rebuild(slots, list(split.gaps))


def _rebuild(slots: list[str | None], gaps: list[str]) -> str:
    words: list[str] = []
    out_gaps = [gaps[0]]
    for i, word in enumerate(slots):
        if word is None:
            out_gaps[-1] = _merge_gaps(out_gaps[-1], gaps[i + 1])
        else:
            words.append(word)
            out_gaps.append(gaps[i + 1])
    return "".join(g + w for g, w in zip(out_gaps, words)) + out_gaps[-1]
