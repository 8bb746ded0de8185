"""Text attacks that need no data and no model: case, word order and letters."""

from __future__ import annotations

import random

from evalrun.attacks.base import text_attack
from evalrun.specs import Spec, spec_float


@text_attack("lowercase", random=False)
def lowercase(text: str, spec: Spec, rng: random.Random) -> str:
    """Lower-case the whole text."""
    return text.lower()


@text_attack("swap", keys=("p",))
def swap(text: str, spec: Spec, rng: random.Random) -> str:
    """Swap each word with its right neighbour with probability p."""
    p = spec_float(spec, "p", 0.05, what="--attack", lo=0.0, hi=1.0)
    words = text.split(" ")
    i = 0
    while i < len(words) - 1:
        if rng.random() < p:
            words[i], words[i + 1] = words[i + 1], words[i]
            i += 2
        else:
            i += 1
    return " ".join(words)


@text_attack("typo", keys=("p",))
def typo(text: str, spec: Spec, rng: random.Random) -> str:
    """Replace each letter with a random lower-case letter with probability p."""
    p = spec_float(spec, "p", 0.05, what="--attack", lo=0.0, hi=1.0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(rng.choice(letters) if ch.isalpha() and rng.random() < p else ch for ch in text)
