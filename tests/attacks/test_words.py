"""The tokenisation helper every word-level attack shares (evalrun.attacks.words)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun.attacks.words import join_words, match_case, split_words

FAST = settings(max_examples=150, deadline=None)


def test_words_gaps_and_sentences() -> None:
    split = split_words("Hello, world! It's a well-known fact (3.14)...\nNew line e.g. here")
    assert split.words == ("Hello", "world", "It's", "a", "well-known", "fact", "3", "14", "New",
                           "line", "e", "g", "here")
    assert split.gaps == ("", ", ", "! ", " ", " ", " ", " (", ".", ")...\n", " ", " ", ".", ". ", "")
    assert split.sentences == (0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 3)
    assert [split.starts_sentence(i) for i in range(len(split))] == [
        True, False, True, False, False, False, False, False, True, False, False, False, True]


@pytest.mark.parametrize("text, words", [
    ("", ()),
    ("   ", ()),
    ("snake_case 1990s café don’t", ("snake", "case", "1990s", "café", "don’t")),
    ("trailing- 'quoted' rock-n-roll", ("trailing", "quoted", "rock-n-roll")),
    ("a--b x''y", ("a", "b", "x", "y")),
])
def test_what_counts_as_a_word(text: str, words: tuple[str, ...]) -> None:
    assert split_words(text).words == words


def test_sentence_ends_after_closing_quote_and_at_line_breaks() -> None:
    split = split_words('He said "stop." Then left\nagain')
    assert split.sentences == (0, 0, 0, 1, 1, 2)


@FAST
@given(st.text())
def test_split_then_join_is_the_identity(text: str) -> None:
    split = split_words(text)
    assert split.text() == text
    assert len(split.gaps) == len(split.words) + 1
    assert list(split.sentences) == sorted(split.sentences)


@FAST
@given(st.lists(st.sampled_from(["word", "Word", "don't", "x-y", "42"]), max_size=8),
       st.lists(st.sampled_from([" ", ", ", ". ", "\n", " (", ") "]), min_size=9, max_size=9))
def test_join_of_words_and_separators_splits_back(words: list[str], seps: list[str]) -> None:
    gaps = ["", *seps[:len(words) - 1], ""] if words else [""]
    text = join_words(words, gaps)
    assert split_words(text).words == tuple(words)


def test_join_words_checks_lengths() -> None:
    with pytest.raises(ValueError, match="2 words need 3 gaps"):
        join_words(["a", "b"], ["", ""])


@pytest.mark.parametrize("source, target, expected", [
    ("about", "ABOTU", "abotu"),
    ("ABOUT", "abotu", "ABOTU"),
    ("About", "abotu", "Abotu"),
    ("don't", "do not", "do not"),
    ("Don't", "do not", "Do not"),
    ("DON'T", "do not", "DO NOT"),
    ("I", "i am", "I am"),
    ("Puerto Rican", "Porto Rican", "Porto Rican"),
    ("iPhone", "thing", "thing"),
    ("42", "x", "x"),
])
def test_match_case(source: str, target: str, expected: str) -> None:
    assert match_case(source, target) == expected
