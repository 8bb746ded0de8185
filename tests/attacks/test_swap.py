"""swap: remove / duplicate / swap with a word of the same sentence (MarkMyWords, section IV-A)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun._util.errors import SpecError
from evalrun._util.specs import parse_spec
from evalrun.attacks import parse_attack
from evalrun.attacks.swap import swap as SWAP
from evalrun.attacks.swap import swap_rates
from evalrun.attacks.words import split_words
from evalrun.testing.rng import ScriptedRandom

swap = SWAP.fn

FAST = settings(max_examples=120, deadline=None)


def run(spec: str, text: str, draws: list[float], picks: list[int] = ()) -> str:
    rng = ScriptedRandom(draws, picks)
    out = swap(text, parse_spec(spec), rng)
    assert rng.unused == ([], []), "every scripted draw is used"
    return out


def test_one_draw_per_word_picks_the_edit() -> None:
    # p=0.3: remove below 0.1, duplicate below 0.2, swap below 0.3
    # "a" removed, "b" duplicated, "c" swapped with the only other word left in its sentence
    # ("b b", position 1); "d", "e" (next sentence) kept
    assert run("swap:p=0.3", "a b c. d e", [0.05, 0.15, 0.25, 0.9, 0.9], [0]) == "c b b. d e"


def test_swap_partner_comes_from_the_same_sentence() -> None:
    # only "c" swaps; its sentence ("c d e") offers positions 3 and 4: pick 1 -> "e"
    assert run("swap:swap=0.5", "a b. c d e", [0.9, 0.9, 0.1, 0.9, 0.9], [1]) == "a b. e d c"


def test_positions_are_scanned_in_order_after_earlier_swaps() -> None:
    # swap=1: a<->b, then position 1 (now "a") swaps back with position 0; in "c d e":
    # c<->e (pick 1 of [3, 4]), position 3 (d) <-> 2 (e), position 4 (c) <-> 2 (d)
    assert run("swap:swap=1", "a b. c d e", [0.5] * 5, [0, 0, 1, 0, 0]) == "a b. c e d"


def test_a_word_alone_in_its_sentence_is_not_swapped() -> None:
    # "Hi" draws a swap but has no partner, so no choice() is made
    assert run("swap:swap=0.5", "Hi. There now", [0.1, 0.1, 0.9], [0]) == "Hi. now There"


@pytest.mark.parametrize("text, removed, expected", [
    ("a b c", 1, "a c"),
    ("a b c", 0, "b c"),
    ("a b c", 2, "a b"),
    ("x b.", 1, "x."),
    ("x, b, c", 1, "x,, c"),
    ("a\nb c", 1, "a\nc"),
    ("a b\nc", 1, "a\nc"),
    ("(a) b", 0, "() b"),
    ("one", 0, ""),
    ("  one two  ", 0, "  two  "),
])
def test_removal_tidies_the_merged_gap(text: str, removed: int, expected: str) -> None:
    n = len(split_words(text))
    draws = [0.0 if i == removed else 0.99 for i in range(n)]
    assert run("swap:remove=0.5", text, draws) == expected


def test_duplicate_inserts_the_word_and_one_space() -> None:
    assert run("swap:duplicate=1", "Stop, dog.", [0.5, 0.5]) == "Stop Stop, dog dog."


def test_p_one_edits_every_word() -> None:
    assert run("swap:p=1", "a b c", [0.5, 0.5, 0.5]) == "a a b b c c"


@pytest.mark.parametrize("spec, rates", [
    ("swap", (0.05 / 3,) * 3),
    ("swap:p=0.3", (0.1, 0.1, 0.1)),
    ("swap:remove=0.05,duplicate=0.05", (0.05, 0.05, 0.0)),
    ("swap:swap=0.1", (0.0, 0.0, 0.1)),
])
def test_rates(spec: str, rates: tuple[float, float, float]) -> None:
    assert swap_rates(parse_spec(spec)) == pytest.approx(rates)


@pytest.mark.parametrize("spec, message", [
    ("swap:p=1.5", "p=1.5 out of range"),
    ("swap:remove=-1", "remove=-1 out of range"),
    ("swap:p=0.1,swap=0.1", "either p or the rates"),
    ("swap:remove=0.5,duplicate=0.5,swap=0.5", "is more than 1"),
    ("swap:q=1", "unknown key(s) q"),
    ("swap:p=x", "is not a number"),
])
def test_bad_specs_are_spec_errors_naming_attack(spec: str, message: str) -> None:
    with pytest.raises(SpecError, match="--attack") as info:
        parse_attack(spec)
    assert message in str(info.value)


def test_p_form_and_rates_form_agree() -> None:
    text = "One two three four five. Six seven eight nine ten eleven."
    a, b = parse_attack("swap:p=0.6"), parse_attack("swap:duplicate=0.2,remove=0.2,swap=0.2")
    assert [a.apply(text, s) for s in range(20)] == [b.apply(text, s) for s in range(20)]


WORDS = st.sampled_from(["alpha", "beta", "Gamma", "don't", "x-y", "7", "delta", "eps"])
SEPS = st.sampled_from([" ", " ", " ", ", ", ". ", "! ", "\n", " (", ") ", " - "])


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(WORDS, max_size=14))
    seps = draw(st.lists(SEPS, min_size=len(words), max_size=len(words)))
    return "".join(w + s for w, s in zip(words, seps)).strip(" ")


def per_sentence(text: str) -> list[Counter[str]]:
    split = split_words(text)
    out: dict[int, Counter[str]] = {}
    for word, s in zip(split.words, split.sentences):
        out.setdefault(s, Counter())[word] += 1
    return [out[k] for k in sorted(out)]


@FAST
@given(texts(), st.integers(0, 2**32), st.floats(0, 1))
def test_swaps_only_permute_words_within_sentences_and_keep_gaps(text: str, seed: int, rate: float) -> None:
    out = swap(text, parse_spec(f"swap:swap={rate}"), random.Random(seed))
    assert per_sentence(out) == per_sentence(text)
    assert split_words(out).gaps == split_words(text).gaps


@FAST
@given(texts(), st.integers(0, 2**32), st.floats(0, 1))
def test_removals_leave_a_subsequence(text: str, seed: int, rate: float) -> None:
    out = split_words(swap(text, parse_spec(f"swap:remove={rate}"), random.Random(seed))).words
    it = iter(split_words(text).words)
    assert all(any(w == v for v in it) for w in out)


@FAST
@given(texts(), st.integers(0, 2**32), st.floats(0, 1))
def test_duplicates_repeat_words_in_place(text: str, seed: int, rate: float) -> None:
    words = split_words(text).words
    out = split_words(swap(text, parse_spec(f"swap:duplicate={rate}"), random.Random(seed))).words
    # reachable (i, j): words[:i] produce out[:j], each word once or twice
    states = {(0, 0)}
    for i, word in enumerate(words):
        states = {(i + 1, j + k) for (_, j) in states for k in (1, 2) if out[j:j + k] == (word,) * k}
    assert (len(words), len(out)) in states


@FAST
@given(texts(), st.integers(0, 2**32))
def test_p_zero_is_the_identity(text: str, seed: int) -> None:
    assert swap(text, parse_spec("swap:p=0"), random.Random(seed)) == text
