"""evalrun._util.scrub: the key and its encodings never leave in a message."""

from __future__ import annotations

import base64

from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun._util.scrub import scrub


def test_the_key_and_its_encodings_are_blanked() -> None:
    key = "the-real-key"
    raw = key.encode()
    for form in (key, raw.hex(), raw.hex().upper(), base64.b64encode(raw).decode(),
                 base64.urlsafe_b64encode(raw).decode().rstrip("=")):
        assert scrub(f"grader said {form}!", key) == "grader said ***!", form
    assert scrub("nothing secret", key) == "nothing secret" and scrub("x", None) == "x"


def test_a_short_keys_encodings_are_left_alone() -> None:
    # "k" is "6b" in hex and "aw" in base64: blanking those would eat ordinary words
    assert scrub("raw 6b k", "k") == "raw 6b ***"


@given(st.text(min_size=6, max_size=40), st.text(max_size=40), st.text(max_size=40))
@settings(max_examples=200, deadline=None)
def test_no_form_of_the_key_survives(key: str, before: str, after: str) -> None:
    raw = key.encode("utf-8", "surrogateescape")
    for form in (key, raw.hex(), base64.b64encode(raw).decode()):
        if form == key or len(form) >= 12:   # shorter encodings occur by chance and are left
            assert form not in scrub(before + form + after, key)
