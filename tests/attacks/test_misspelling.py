"""misspelling: words replaced by common misspellings (HELM's list from Wikipedia)."""

from __future__ import annotations

import hashlib
import json
import random
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun._util.errors import SpecError
from evalrun._util.specs import parse_spec
from evalrun.attacks import parse_attack
from evalrun.attacks.misspelling import misspelling as MISSPELLING
from evalrun.attacks.misspelling import misspellings
from evalrun.attacks.words import match_case
from evalrun.testing.rng import ScriptedRandom

misspell = MISSPELLING.fn
FAST = settings(max_examples=100, deadline=None)
HELM_SHA256 = "2f8e118895e52426bacd0cd32dfd0c14708e845c910d129f2d03571fe9f75c8b"


def run(text: str, draws: list[float], picks: list[int] = (), p: float = 0.5) -> str:
    rng = ScriptedRandom(draws, picks)
    out = misspell(text, parse_spec(f"misspelling:p={p}"), rng)
    assert rng.unused == ([], [])
    return out


def test_the_list_is_helms_file_unchanged() -> None:
    blob = resources.files("evalrun.attacks").joinpath("data", "correct_to_misspelling.json").read_bytes()
    assert hashlib.sha256(blob).hexdigest() == HELM_SHA256
    table = misspellings()
    assert len(table) == 6523 and sum(len(v) for _, v in table.values()) == 9053
    assert table["about"] == (10, ("boaut", "baout", "abbout", "abotu"))
    assert misspellings() is table, "loaded once"


def test_listed_words_draw_and_others_do_not() -> None:
    # HELM's docstring example. Listed: "Already", "the", "not", "available"; "new",
    # "product", "is" are not and draw nothing. Draws: Already 0.1 < 0.5 -> pick 0 (Aready);
    # the 0.9 kept; not 0.9 kept; available 0.2 -> pick 4 (availible)
    out = run("Already, the new product is not available.", [0.1, 0.9, 0.9, 0.2], [0, 4])
    assert out == "Aready, the new product is not availible."


def test_keys_are_case_sensitive_like_helm() -> None:
    assert "ALREADY" not in misspellings()
    assert run("ALREADY", [], []) == "ALREADY"


def test_two_word_key_wins_only_when_listed_before_its_first_word() -> None:
    table = misspellings()
    # "about" is listed before "about a", so "about a" never matches (as in HELM's regex)
    assert table["about"][0] < table["about a"][0]
    assert run("about a", [0.1], [0]) == table["about"][1][0] + " a"
    # "a" is not a key and "a lot" is, so the pair is one match
    assert "a" not in table
    assert run("a lot", [0.1], [0]) == table["a lot"][1][0]
    # not when the words are not separated by exactly one space
    assert run("a  lot", [], []) == "a  lot"


SAMPLES = ["about", "Definitely", "definitely", "cat", "x-ray", "42", "lot", "Wednesday"]


def test_samples_form_no_two_word_key() -> None:
    table = misspellings()
    assert not any(f"{a} {b}" in table for a in SAMPLES for b in SAMPLES)


@FAST
@given(st.lists(st.sampled_from(SAMPLES), min_size=1, max_size=12), st.integers(0, 2**32))
def test_p_one_changes_exactly_the_listed_words(words: list[str], seed: int) -> None:
    table = misspellings()
    out = misspell(" ".join(words), parse_spec("misspelling:p=1"), random.Random(seed)).split(" ")
    assert len(out) == len(words)
    for old, new in zip(words, out):
        assert new in {match_case(old, m) for m in table[old][1]} if old in table else new == old


@FAST
@given(st.text(), st.integers(0, 2**32))
def test_p_zero_is_the_identity(text: str, seed: int) -> None:
    assert misspell(text, parse_spec("misspelling:p=0"), random.Random(seed)) == text


def test_out_of_range() -> None:
    with pytest.raises(SpecError, match=r"--attack misspelling:p=2: p=2 out of range"):
        parse_attack("misspelling:p=2")


def test_data_ships_with_a_readme_naming_licences() -> None:
    readme = resources.files("evalrun.attacks").joinpath("data", "README.md").read_text(encoding="utf-8")
    assert "Apache License 2.0" in readme and "CC BY-SA" in readme and "Wikipedia" in readme
    json.loads(resources.files("evalrun.attacks").joinpath("data", "correct_to_misspelling.json")
               .read_text(encoding="utf-8"))
