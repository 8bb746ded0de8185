"""Short watermark names: defaults dropped, the rest kept exactly, collisions told apart."""

from __future__ import annotations

import pytest

from evalrun.watermark.naming import short_name, short_names
from evalrun.watermark.registry import SCHEMES, parse_watermark

KGW_FULL = "kgw:context=1,delta=2.0,gamma=0.5,randomness=window,repeats=ignore,score=sum,skip=0.0"


def test_defaults_go_and_the_rest_stays_with_the_papers_symbols() -> None:
    assert short_name(KGW_FULL) == "kgw γ=0.5"
    assert short_name("kgw:context=1,delta=3.5,gamma=0.25,randomness=window,repeats=ignore,score=sum,skip=0.0") \
        == "kgw δ=3.5"
    assert short_name("exp:context=3,randomness=window,repeats=ignore,score=sum,skip=0.05") == "exp context=3 skip=0.05"
    # a small value is kept as written, not rounded away
    assert short_name(str(parse_watermark("exp_gumbel:threshold=0.00011").spec)) == "exp_gumbel threshold=0.00011"


def test_a_required_parameter_is_never_dropped() -> None:
    full = str(parse_watermark("kgw_compat:seeding=selfhash").spec)
    assert full.startswith("kgw:") and short_name(full) == "kgw seeding=selfhash"  # its canonical name


@pytest.mark.parametrize("text", ["none", "", "foo:a=1", "swap:p=0.1", "openai:gpt-4o", "kgw:gamma=2"])
def test_what_is_not_a_valid_scheme_spec_comes_back_unchanged(text: str) -> None:
    assert short_name(text) == text


def test_every_registered_scheme_shortens_to_a_spec_that_builds_the_same_scheme() -> None:
    for name in SCHEMES.names():
        try:
            scheme = parse_watermark(name)
        except Exception:  # a scheme with a required parameter (kgw_compat)
            continue
        full = str(scheme.spec)
        short = short_name(full)
        assert short.split(" ")[0] == name
        rebuilt = f"{name}:" + ",".join(p.replace("γ", "gamma").replace("δ", "delta").replace("α", "alpha")
                                        for p in short.split(" ")[1:]) if " " in short else name
        assert str(parse_watermark(rebuilt).spec) == full


def test_specs_that_shorten_alike_keep_their_full_text() -> None:
    a, b = "kgw:gamma=0.5", "kgw:gamma=0.50"
    names = short_names([a, b, KGW_FULL, "none"])
    assert names["none"] == "none" and len(set(names.values())) == 4
    assert names[KGW_FULL] == "kgw γ=0.5" or names[KGW_FULL] == KGW_FULL
    # two distinct specs that do not parse the same but read alike are told apart
    clash = short_names(["kgw:delta=2,gamma=0.5", KGW_FULL])
    assert len(set(clash.values())) == 2
