"""How intervals are printed: brackets, a comma, a true minus sign (issue: "-15.9–18.1%")."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from evalrun._util.display import interval_text


def test_hand_examples() -> None:
    assert interval_text(-0.159, 0.181, percent=True) == "[\u221215.9%, 18.1%]"
    assert interval_text(0.0, 0.037, percent=True) == "[0.0%, 3.7%]"
    assert interval_text(-0.00001, 0.5, percent=True) == "[0.0%, 50.0%]"  # rounds to zero: no sign
    assert interval_text(0.813, 1.0, digits=3) == "[0.813, 1.000]"


@given(low=st.floats(-10, 10, allow_nan=False), high=st.floats(-10, 10, allow_nan=False),
       percent=st.booleans(), digits=st.integers(0, 4))
def test_every_interval_reads_one_way(low: float, high: float, percent: bool, digits: int) -> None:
    text = interval_text(low, high, digits=digits, percent=percent)
    assert text.startswith("[") and text.endswith("]") and text.count(", ") == 1 and "-" not in text
    left, right = text[1:-1].split(", ")
    for shown, value in ((left, low), (right, high)):
        number = float(shown.rstrip("%").replace("\u2212", "-")) / (100 if percent else 1)
        assert math.isclose(number, value, abs_tol=0.51 * 10 ** -digits / (1 if not percent else 100) + 1e-12)
