"""A ``random.Random`` whose draws are scripted, for hand-computed tests of random attacks.

    rng = ScriptedRandom(draws=[0.9, 0.01], picks=[2])
    rng.random()          # 0.9, then 0.01
    rng.choice("abc")     # "c" (index 2)

Only ``random()`` and ``choice()`` are scripted; any other draw raises, so a test notices an
attack that draws in a way it did not expect. Running out of script raises too.
"""

from __future__ import annotations

import random
from typing import Iterable, Sequence, TypeVar

T = TypeVar("T")


class ScriptedRandom(random.Random):
    """``random()`` returns ``draws`` in order; ``choice(seq)`` returns ``seq[picks[k]]``."""

    def __init__(self, draws: Iterable[float] = (), picks: Iterable[int] = ()) -> None:
        self._draws = list(draws)
        self._picks = list(picks)
        super().__init__(0)

    @property
    def unused(self) -> tuple[list[float], list[int]]:
        """Draws and picks not consumed yet."""
        return list(self._draws), list(self._picks)

    def random(self) -> float:
        if not self._draws:
            raise AssertionError("ScriptedRandom: random() called more often than scripted")
        return self._draws.pop(0)

    def choice(self, seq: Sequence[T]) -> T:  # type: ignore[override]  # a test double: scripts picks from sequences only
        if not self._picks:
            raise AssertionError(f"ScriptedRandom: choice({list(seq)!r}) called more often than scripted")
        index = self._picks.pop(0)
        if not 0 <= index < len(seq):
            raise AssertionError(f"ScriptedRandom: pick {index} out of range for {list(seq)!r}")
        return seq[index]

    def getrandbits(self, k: int) -> int:
        raise AssertionError("ScriptedRandom: only random() and choice() are scripted")
