"""The shared pieces of the green-list detectors: key checks, repeat counting, normal p-value."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evalrun._util.errors import SpecError
from evalrun.watermark.engine import nulls
from evalrun.watermark.engine.counting import cumulative_counts, first_occurrences
from evalrun.watermark.registry import parse_watermark

SECRET = "not-an-integer-secret"


@pytest.mark.parametrize("spec", ["kgw:gamma=0.25", "exp", "unigram", "kgw:seeding=lefthash"])
def test_check_key_rejects_empty_key_naming_the_option(spec: str) -> None:
    scheme = parse_watermark(spec)
    with pytest.raises(SpecError, match="--key"):
        scheme.check_key("")


@pytest.mark.parametrize("spec", ["kgw:gamma=0.25", "exp", "unigram"])
def test_check_key_accepts_any_nonblank_key(spec: str) -> None:
    parse_watermark(spec).check_key(SECRET)


def test_unigram_rejects_blank_key() -> None:
    with pytest.raises(SpecError, match="--key"):
        parse_watermark("unigram").check_key("   ")


@pytest.mark.parametrize("key", [SECRET, "1.5", "0x10", str(2**63), "  "])
def test_kgw_compat_key_must_be_an_integer_and_is_not_echoed(key: str) -> None:
    scheme = parse_watermark("kgw:seeding=selfhash")
    with pytest.raises(SpecError, match="--key") as err:
        scheme.check_key(key)
    if key.strip():
        assert key.strip() not in str(err.value)


def test_kgw_compat_accepts_integer_keys() -> None:
    scheme = parse_watermark("kgw:seeding=lefthash")
    for key in ("15485863", " -7 ", str(2**63 - 1)):
        scheme.check_key(key)


def test_cumulative_counts() -> None:
    ids = np.array([3, 1, 3, 2, 1, 3, 4])
    green = np.array([1, 0, 1, 1, 0, 1, 0], dtype=bool)
    first = first_occurrences(ids)
    assert first.tolist() == [True, True, False, True, False, False, True]
    totals, counts = cumulative_counts(green, first, count_repeats=False)
    assert totals.tolist() == [1, 2, 2, 3, 3, 3, 4] and counts.tolist() == [1, 1, 1, 2, 2, 2, 2]
    totals, counts = cumulative_counts(green, None, count_repeats=True)
    assert totals.tolist() == list(range(1, 8)) and counts.tolist() == [1, 1, 2, 3, 3, 4, 4]
    assert first_occurrences(np.zeros(0, np.int64)).shape == (0,)
    with pytest.raises(ValueError):
        cumulative_counts(green, None, count_repeats=False)


def test_first_occurrences_match_numpy_unique() -> None:
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 50, 400)
    want = np.zeros(len(ids), dtype=bool)
    want[np.unique(ids, return_index=True)[1]] = True
    assert np.array_equal(first_occurrences(ids), want)


def test_normal_p_is_scipy_norm_sf_bit_for_bit() -> None:
    z = np.concatenate([np.random.default_rng(0).standard_normal(10_000) * 12,
                        [0.0, -0.0, 40.0, -40.0, np.inf, -np.inf]])
    assert np.array_equal(nulls.normal_p(z), stats.norm.sf(z))
    assert np.isnan(nulls.normal_p(np.nan))
