"""The weak-key rule (docs/pipeline.md, "Watermark keys and the store"): hand-picked keys on
each side of each clause, and properties of the keys users are told to make."""

from __future__ import annotations

import io
import secrets

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalrun.watermark.key_strength import MIN_LENGTH, warn_if_weak, weakness


@pytest.mark.parametrize(("key", "why"), [
    ("my-secret-key", "shorter than 16 characters"),
    ("15485863", "shorter than 16 characters"),
    ("public-example-key", "3 words of letters only"),
    ("PUBLIC-EXAMPLE-KEY", "3 words of letters only"),
    ("MySecretWatermark", "3 words of letters only"),
    ("correcthorsebatterystaple", "1 word of letters only"),
    ("correct horse battery staple", "4 words of letters only"),
    ("aaaaaaaaaaaaaaaaaaaa", "only 1 distinct character"),
    ("12121212121234561212", "only 6 distinct characters"),
])
def test_weak_keys_say_why(key: str, why: str) -> None:
    found = weakness(key)
    assert found is not None and found.startswith(why), found


@pytest.mark.parametrize("key", [
    "correct horse battery staple again",  # five words
    "0123456789abcdef0123",  # 20 characters, 16 distinct, not letters only
    "Äpfel-Birnen-Käse-Wurst-Brot",  # five words, letters beyond ASCII
    "HTTPServerKeyNumberOne",  # five words by their capitals
])
def test_strong_enough_keys_pass(key: str) -> None:
    assert weakness(key) is None


@given(st.integers(min_value=16, max_value=64))
def test_keys_from_the_os_generator_never_warn(n_bytes: int) -> None:
    assert weakness(secrets.token_hex(n_bytes)) is None


@given(st.text(max_size=MIN_LENGTH - 1))
def test_every_short_key_warns(key: str) -> None:
    assert weakness(key) == f"shorter than {MIN_LENGTH} characters"


def test_the_warning_is_one_line_naming_the_source_never_the_key() -> None:
    stream = io.StringIO()
    warn_if_weak("public-example-key", from_option=False, stream=stream)
    line = stream.getvalue()
    assert line.count("\n") == 1 and "$EVALRUN_WATERMARK_KEY" in line and "evalrun key new" in line
    assert "public-example-key" not in line and "example" not in line
    for quiet in (None, "", secrets.token_hex(32)):
        stream = io.StringIO()
        warn_if_weak(quiet, from_option=True, stream=stream)
        assert stream.getvalue() == ""
