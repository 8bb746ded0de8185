"""Text attacks that need no data and no model: ``lowercase``, and the two attacks that were
called ``swap`` and ``typo`` before the seed-000 attacks took those names.

Renamed, not changed (store compatibility): ``neighbour_swap:p=…`` is the attack that was
registered as ``swap:p=…`` (exchange a word with its right neighbour) and
``random_letters:p=…`` the one registered as ``typo:p=…`` (replace a letter by a random
letter). Their functions are moved here unchanged, so for a given text, spec and seed they
give the same output as before; a store migration renames old ``swap``/``typo`` rows to these
names. ``swap`` (:mod:`evalrun.attacks.swap`) and ``typo`` (:mod:`evalrun.attacks.typo`) are
now the attacks of MarkMyWords (Table II).
"""

from __future__ import annotations

import random

from evalrun._util.specs import Spec, spec_float
from evalrun.attacks.base import text_attack


@text_attack("lowercase", random=False, characters=True)
def lowercase(text: str, spec: Spec, rng: random.Random) -> str:
    """Lower-case the whole text (MarkMyWords' and HELM's ``LowercaseAttack``: ``str.lower``)."""
    return text.lower()


@text_attack("neighbour_swap", keys=("p",))
def neighbour_swap(text: str, spec: Spec, rng: random.Random) -> str:
    """Swap each word with its right neighbour with probability p (the former ``swap``)."""
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


@text_attack("random_letters", keys=("p",), characters=True)
def random_letters(text: str, spec: Spec, rng: random.Random) -> str:
    """Replace each letter with a random lower-case letter with probability p (the former ``typo``)."""
    p = spec_float(spec, "p", 0.05, what="--attack", lo=0.0, hi=1.0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(rng.choice(letters) if ch.isalpha() and rng.random() < p else ch for ch in text)
