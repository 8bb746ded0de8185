"""The one spec grammar: parsing, canonical form and errors that name the option."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, check_keys, parse_spec, spec_float, spec_int

names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}", fullmatch=True)
keys = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
values = st.from_regex(r"[A-Za-z0-9.\-]{1,8}", fullmatch=True)


@given(names, st.dictionaries(keys, values, min_size=1, max_size=5))
def test_canonical_form_round_trips(name: str, params: dict[str, str]) -> None:
    text = f"{name}:" + ",".join(f"{k}={v}" for k, v in params.items())
    spec = parse_spec(text)
    assert spec.name == name and spec.params == params and spec.arg is None
    assert parse_spec(spec.canonical()) == spec


@given(names, st.dictionaries(keys, values, min_size=2, max_size=5))
def test_canonical_form_ignores_key_order(name: str, params: dict[str, str]) -> None:
    items = list(params.items())
    a = parse_spec(f"{name}:" + ",".join(f"{k}={v}" for k, v in items))
    b = parse_spec(f"{name}:" + ",".join(f"{k}={v}" for k, v in reversed(items)))
    assert a.canonical() == b.canonical()


def test_free_argument_keeps_colons_and_paths() -> None:
    spec = parse_spec("hf:/models/a=b,c", what="--model", free_arg=True)
    assert spec == Spec(name="hf", arg="/models/a=b,c")
    assert parse_spec("translate:hf:/m").arg == "hf:/m"
    assert parse_spec("lowercase") == Spec(name="lowercase")


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"),
    ("kgw:", "nothing after"),
    ("kgw:gamma=0.5,gamma=0.2", "given twice"),
    ("kgw:gamma=0.5,delta", "expected key=value"),
    ("kgw:gamma=", "expected key=value"),
    ("9kgw", "bad name"),
])
def test_malformed_specs_name_the_option(text: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(text, what="--watermark")
    assert "--watermark" in str(info.value) and fragment in str(info.value)


def test_typed_parameters_check_range_and_keys() -> None:
    spec = parse_spec("kgw:gamma=0.25,context=2")
    assert spec_float(spec, "gamma", 0.5, what="--watermark", lo=0, hi=1) == 0.25
    assert spec_int(spec, "context", 1, what="--watermark", lo=1) == 2
    assert spec_float(spec, "delta", 2.0, what="--watermark") == 2.0
    with pytest.raises(SpecError, match="gamma=0.25 out of range"):
        spec_float(spec, "gamma", 0.5, what="--watermark", lo=0.3, hi=1)
    with pytest.raises(SpecError, match="not an integer"):
        spec_int(parse_spec("kgw:context=x"), "context", 1, what="--watermark")
    with pytest.raises(SpecError, match="unknown key.*context"):
        check_keys(spec, {"gamma"}, what="--watermark")
