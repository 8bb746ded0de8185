"""typo: letters replaced by QWERTY keyboard neighbours (HELM's typos, as MarkMyWords runs it)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun._util.errors import SpecError
from evalrun._util.specs import parse_spec
from evalrun.attacks import parse_attack
from evalrun.attacks.typo import QWERTY_NEIGHBOURS
from evalrun.attacks.typo import typo as TYPO
from evalrun.testing.rng import ScriptedRandom

typo = TYPO.fn

FAST = settings(max_examples=150, deadline=None)


def test_neighbour_table() -> None:
    assert sorted(QWERTY_NEIGHBOURS) == list("abcdefghijklmnopqrstuvwxyz")
    assert QWERTY_NEIGHBOURS["q"] == "aw"
    assert QWERTY_NEIGHBOURS["s"] == "adewxz"
    assert QWERTY_NEIGHBOURS["g"] == "bfhtvy"
    assert QWERTY_NEIGHBOURS["p"] == "lo"
    assert QWERTY_NEIGHBOURS["m"] == "jkn"
    for key, near in QWERTY_NEIGHBOURS.items():
        assert key not in near and len(near) >= 2
        assert all(key in QWERTY_NEIGHBOURS[other] for other in near), "symmetric"


def test_each_letter_draws_once_and_keeps_its_case() -> None:
    rng = ScriptedRandom(draws=[0.01, 0.9, 0.01], picks=[0, 2])
    # "A" -> neighbours of a ("qswz")[0] = "Q"; "b" kept; "c" -> "dfvx"[2] = "v"; "1", " " and
    # "é" draw nothing
    assert typo("Ab1 é c", parse_spec("typo:p=0.05"), rng) == "Qb1 é v"
    assert rng.unused == ([], [])


@FAST
@given(st.text(), st.integers(0, 2**32))
def test_p_one_changes_every_ascii_letter_to_a_neighbour(text: str, seed: int) -> None:
    out = typo(text, parse_spec("typo:p=1"), random.Random(seed))
    assert len(out) == len(text)
    for old, new in zip(text, out):
        if old.isascii() and old.isalpha():
            assert new.lower() in QWERTY_NEIGHBOURS[old.lower()]
            assert new.isupper() == old.isupper()
        else:
            assert new == old


@FAST
@given(st.text(), st.integers(0, 2**32))
def test_p_zero_is_the_identity(text: str, seed: int) -> None:
    assert typo(text, parse_spec("typo:p=0"), random.Random(seed)) == text


@pytest.mark.parametrize("spec", ["typo:p=1.01", "typo:p=-1"])
def test_out_of_range(spec: str) -> None:
    with pytest.raises(SpecError, match=r"--attack typo:p=.* out of range"):
        parse_attack(spec)
