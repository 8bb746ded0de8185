"""Spec parsing of the native schemes: canonical forms round-trip, bad values are rejected."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun._util.errors import SpecError
from evalrun.watermark.registry import parse_watermark

SCHEMES = ["kgw", "exp", "binary", "its"]


@st.composite
def valid_specs(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(SCHEMES))
    params: dict[str, str] = {}
    randomness = draw(st.sampled_from(["window", "minhash", "fixed", None]))
    if randomness:
        params["randomness"] = randomness
    if randomness == "fixed":
        if draw(st.booleans()):
            params["key_len"] = str(draw(st.integers(1, 4096)))
        score = draw(st.sampled_from(["align", "edit", None]))
        if score:
            params["score"] = score
        if score == "edit" and draw(st.booleans()):
            params["psi"] = str(draw(st.floats(0, 5, allow_nan=False)))
        if draw(st.booleans()):
            params["permutations"] = str(draw(st.integers(1, 5000)))
    else:
        if draw(st.booleans()):
            params["context"] = str(draw(st.integers(1, 8)))
        if draw(st.booleans()):
            params["repeats"] = draw(st.sampled_from(["ignore", "count"]))
        if scheme == "its" and draw(st.booleans()):
            params["permutations"] = str(draw(st.integers(1, 5000)))
    if draw(st.booleans()):
        params["skip"] = str(draw(st.floats(0, 0.99, allow_nan=False)))
    if scheme == "kgw":
        if draw(st.booleans()):
            params["gamma"] = str(draw(st.floats(0.01, 0.99, allow_nan=False)))
        if draw(st.booleans()):
            params["delta"] = str(draw(st.floats(0, 20, allow_nan=False)))
    body = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{scheme}:{body}" if body else scheme


@settings(max_examples=150, deadline=None)
@given(valid_specs())
def test_canonical_spec_round_trips(text: str) -> None:
    scheme = parse_watermark(text)
    canonical = scheme.spec.canonical()
    again = parse_watermark(canonical)
    assert again.spec.canonical() == canonical
    given_params = parse_watermark(text).spec.params
    for key in ("randomness", "score", "skip"):
        assert key in given_params
    assert scheme.spec.name == text.split(":")[0]


def test_defaults_are_filled_in() -> None:
    assert str(parse_watermark("kgw").spec) == (
        "kgw:context=1,delta=2.0,gamma=0.25,randomness=window,repeats=ignore,score=sum,skip=0.0")
    assert str(parse_watermark("its:randomness=fixed").spec) == (
        "its:key_len=256,permutations=200,randomness=fixed,score=align,skip=0.0")
    assert str(parse_watermark("exp:randomness=minhash").spec) == (
        "exp:context=3,randomness=minhash,repeats=ignore,score=sum,skip=0.0")


@pytest.mark.parametrize("text,key", [
    ("kgw:gamma=0", "gamma"), ("kgw:gamma=1.5", "gamma"), ("kgw:delta=-1", "delta"),
    ("kgw:delta=abc", "delta"), ("exp:colour=red", "colour"), ("binary:context=0", "context"),
    ("exp:skip=1", "skip"), ("its:randomness=fixed,key_len=0", "key_len"),
    ("exp:randomness=sliding", "randomness"), ("exp:score=median", "score"),
    ("exp:score=align", "score=align"), ("kgw:randomness=minhash,score=edit", "score=edit"),
    ("exp:randomness=fixed,score=sum", "score=sum"), ("exp:psi=0.3", "psi"),
    ("exp:randomness=fixed,context=2", "context"), ("exp:key_len=8", "key_len"),
    ("kgw:permutations=10", "permutations"), ("its:permutations=0", "permutations"),
    ("exp:repeats=sometimes", "repeats"), ("its:randomness=fixed,repeats=count", "repeats"),
    ("its:randomness=fixed,score=edit,psi=-1", "psi"), ("kgw:context=1.5", "context"),
])
def test_bad_values_are_rejected_naming_the_key(text: str, key: str) -> None:
    with pytest.raises(SpecError, match=key):
        parse_watermark(text)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SCHEMES), st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1,
                                          max_size=12))
def test_unknown_keys_are_rejected(scheme: str, key: str) -> None:
    known = {"randomness", "context", "key_len", "skip", "score", "psi", "permutations",
             "repeats", "gamma", "delta"}
    if key in known:
        return
    with pytest.raises(SpecError, match=key):
        parse_watermark(f"{scheme}:{key}=1")
