"""contraction / expansion: do not <-> don't (HELM's perturbations, as MarkMyWords runs them)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun.attacks import ATTACKS, parse_attack
from evalrun.attacks.contraction import CONTRACTIONS, EXPANSIONS

FAST = settings(max_examples=150, deadline=None)


def contract(text: str) -> str:
    return parse_attack("contraction").apply(text, 0)


def expand(text: str) -> str:
    return parse_attack("expansion").apply(text, 0)


@pytest.mark.parametrize("text, expected", [
    ("She is a doctor, and I am a student", "She's a doctor, and I'm a student"),
    ("They are sure we do not know it.", "They're sure we don't know it."),
    ("Yes, it is.", "Yes, it is."),                       # nothing follows: left alone (HELM)
    ("it is\nhere", "it is\nhere"),                        # only a space counts as following
    ("it  is here", "it  is here"),                        # words must be one space apart
    ("I cannot go", "I can't go"),
    ("IT IS DONE", "IT'S DONE"),
    ("It is not that", "It's not that"),                   # leftmost pair first, as re.sub
    ("this is not bad", "this isn't bad"),
    ("Who is there? You are ", "Who's there? You're "),
])
def test_contraction(text: str, expected: str) -> None:
    assert contract(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("She's a doctor, and I'm a student", "She is a doctor, and I am a student"),
    ("They’re sure we don’t know it.", "They are sure we do not know it."),
    ("DON'T stop", "DO NOT stop"),
    ("Won't it? It won't.", "Will not it? It will not."),
    ("the dog's bone", "the dog's bone"),
    ("I'd've", "I'd've"),
])
def test_expansion(text: str, expected: str) -> None:
    assert expand(text) == expected


def test_table_is_one_to_one_and_deterministic() -> None:
    assert len(EXPANSIONS) == len(CONTRACTIONS)
    assert ATTACKS.get("contraction").random is False
    assert ATTACKS.get("expansion").random is False


@pytest.mark.parametrize("short", sorted(CONTRACTIONS))
def test_every_entry_round_trips(short: str) -> None:
    long = CONTRACTIONS[short]
    assert expand(f"So {short} x") == f"So {long} x"
    if " " in long or long == "cannot":
        assert contract(f"So {long} x") == f"So {short} x"
        assert contract(f"So {long.upper()} x") == f"So {short.upper()} x"


@FAST
@given(st.lists(st.sampled_from(["it is", "do not", "They are", "cat", "I am", "x", "cannot"]), max_size=10),
       st.integers(0, 2**32))
def test_expansion_undoes_contraction(phrases: list[str], seed: int) -> None:
    text = " ".join(phrases) + " end"
    assert expand(contract(text)) == text


@FAST
@given(st.text())
def test_texts_without_table_entries_are_unchanged(text: str) -> None:
    if "'" in text or "\u2019" in text or " " in text or "cannot" in text.lower():
        return
    assert contract(text) == text and expand(text) == text
