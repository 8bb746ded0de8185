"""The ``typo`` attack (MarkMyWords, Table II "Misspelling & Typo"; HELM's typos perturbation, as
MarkMyWords runs it): letters replaced by a neighbouring key of a QWERTY keyboard.

``typo:p=P`` (default 0.05; MarkMyWords registers 0.05 and 0.1): each ASCII letter of the
text, in order, draws ``rng.random()``; below P it becomes one of its keyboard neighbours
(``rng.choice`` over :data:`QWERTY_NEIGHBOURS`, in the order listed there), upper-case if the
letter was. Every other character is kept. This is the loop of ``TypoAttack.warp`` in
MarkMyWords' ``src/watermark_benchmark/attacks/helm_attacks.py`` (copied from HELM's
``TyposPerturbation``, ``helm/benchmark/augmentations/typos_perturbation.py``).

The neighbour table is derived here from the key positions of a staggered QWERTY keyboard
(rows ``qwertyuiop`` / ``asdfghjkl`` / ``zxcvbnm`` shifted right by a quarter and three
quarters of a key): two keys are neighbours when they are next to each other in a row, or in
adjacent rows less than one key width apart. The relation is symmetric. HELM's hand-written
table agrees except that it also gives each top-row key the home-row key below and to its
right (``q``-``s``, ``w``-``d``, ``e``-``f``, ``r``-``g``, ``t``-``h``, ``y``-``j``, ``u``-``k``,
``i``-``l``), one way only.

Before this attack took the name, ``typo`` replaced letters by uniformly random letters; that
attack is now ``random_letters`` (:mod:`evalrun.attacks.text`).
"""

from __future__ import annotations

import random

from evalrun._util.specs import Spec, spec_float
from evalrun.attacks.base import text_attack

_ROWS = (("qwertyuiop", 0.0), ("asdfghjkl", 0.25), ("zxcvbnm", 0.75))


def _neighbours() -> dict[str, str]:
    position = {key: (r, c + shift) for r, (row, shift) in enumerate(_ROWS) for c, key in enumerate(row)}
    table = {}
    for key, (r, x) in position.items():
        near = [other for other, (r2, x2) in position.items() if other != key
                and ((r2 == r and abs(x2 - x) == 1) or (abs(r2 - r) == 1 and abs(x2 - x) < 1))]
        table[key] = "".join(sorted(near))
    return table


#: letter -> its QWERTY neighbours, alphabetical (``s`` -> ``adewxz``)
QWERTY_NEIGHBOURS: dict[str, str] = _neighbours()


@text_attack("typo", keys=("p",), characters=True)
def typo(text: str, spec: Spec, rng: random.Random) -> str:
    """Replace each letter with a QWERTY keyboard neighbour with probability p."""
    p = spec_float(spec, "p", 0.05, what="--attack", lo=0.0, hi=1.0)
    out = []
    for ch in text:
        lower = ch.lower()
        near = QWERTY_NEIGHBOURS.get(lower) if ch.isascii() else None
        if near is not None and rng.random() < p:
            new = rng.choice(near)
            ch = new.upper() if ch != lower else new
        out.append(ch)
    return "".join(out)
