"""Attacks: perturbations applied to a stored output before it is graded.

Each attack is deterministic given its spec and a seed, so grading a stored output is
reproducible. Scheme benchmarks add more attacks to :data:`ATTACKS`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from evalrun.errors import SpecError
from evalrun.specs import Spec, check_keys, parse_spec, spec_float

AttackFn = Callable[[str, Spec, random.Random], str]


@dataclass(frozen=True)
class Attack:
    spec: Spec
    fn: AttackFn

    @property
    def name(self) -> str:
        return self.spec.canonical()

    def apply(self, text: str, seed: int) -> str:
        return self.fn(text, self.spec, random.Random(seed))


def _lowercase(text: str, spec: Spec, rng: random.Random) -> str:
    return text.lower()


def _swap(text: str, spec: Spec, rng: random.Random) -> str:
    """Swap each word with its right neighbour with probability p (seed 000, Table II)."""
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


def _typo(text: str, spec: Spec, rng: random.Random) -> str:
    """Replace each letter with a random lower-case letter with probability p."""
    p = spec_float(spec, "p", 0.05, what="--attack", lo=0.0, hi=1.0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(rng.choice(letters) if ch.isalpha() and rng.random() < p else ch for ch in text)


#: attack name -> (allowed keys, function)
ATTACKS: dict[str, tuple[frozenset[str], AttackFn]] = {
    "lowercase": (frozenset(), _lowercase),
    "swap": (frozenset({"p"}), _swap),
    "typo": (frozenset({"p"}), _typo),
}


def parse_attack(text: str) -> Attack | None:
    """``none`` gives None; unknown names and keys are errors naming ``--attack``."""
    if text is None or text.strip().lower() in ("", "none"):
        return None
    spec = parse_spec(text, what="--attack")
    entry = ATTACKS.get(spec.name)
    if entry is None:
        raise SpecError(f"--attack {text}: unknown attack {spec.name!r}; known: {', '.join(sorted(ATTACKS))}")
    allowed, fn = entry
    check_keys(spec, allowed, what="--attack")
    attack = Attack(spec=spec, fn=fn)
    attack.apply("probe text", 0)  # validates parameter values now, not mid-run
    return attack


def canonical_attack(text: str) -> str:
    attack = parse_attack(text)
    return "none" if attack is None else attack.name
