"""lowercase, and the attacks formerly named swap/typo, kept bit for bit under new names."""

from __future__ import annotations

import pytest

from evalrun.attacks import ATTACKS, parse_attack

OLD_TEXT = "The quick brown fox jumps over the lazy dog. It was not amused, and neither were they!"

# Outputs of the former `swap:p=0.3` and `typo:p=0.1` at main 0245877 (before the rename),
# for seeds 0, 1, 2: the renamed attacks must keep giving exactly these.
OLD_OUTPUTS = {
    "neighbour_swap:p=0.3": [
        "The quick brown jumps fox over the lazy dog. It was not amused, neither and were they!",
        "quick The brown fox over jumps the lazy dog. It not was and amused, neither were they!",
        "The quick fox brown over jumps the lazy dog. It was not amused, neither and were they!",
    ],
    "random_letters:p=0.1": [
        "The quick brown fox jumps over the lazy dog. xt was not amssed, akd neither were zhey!",
        "The quick arown fox jumus over hhe lazy dog. It was not amused, and neither were vhey!",
        "Thc quick bvown fox jumas over the lazy dog. It was not amused, and neither were they!",
    ],
}


@pytest.mark.parametrize("spec", sorted(OLD_OUTPUTS))
def test_renamed_attacks_keep_their_old_outputs(spec: str) -> None:
    attack = parse_attack(spec)
    assert [attack.apply(OLD_TEXT, seed) for seed in (0, 1, 2)] == OLD_OUTPUTS[spec]


def test_lowercase() -> None:
    attack = parse_attack("lowercase")
    assert attack.apply("Hello WORLD, Ünïcode İs Fine", 0) == "hello world, ünïcode i̇s fine"
    assert ATTACKS.get("lowercase").random is False


@pytest.mark.parametrize("spec, message", [
    ("neighbour_swap:p=2", "out of range"),
    ("random_letters:p=-0.1", "out of range"),
    ("lowercase:p=0.1", "unknown key(s) p"),
])
def test_bad_values_name_the_option(spec: str, message: str) -> None:
    from evalrun._util.errors import SpecError

    with pytest.raises(SpecError, match="--attack") as info:
        parse_attack(spec)
    assert message in str(info.value)


def test_attacks_that_edit_characters_say_so() -> None:
    """What a report's surface caveat rests on: which registered attacks edit characters."""
    from evalrun.attacks.base import edits_characters

    assert {a for a in ("lowercase", "typo:p=0.05", "misspelling:p=0.25", "random_letters:p=0.1")
            if edits_characters(a)} == {"lowercase", "typo:p=0.05", "misspelling:p=0.25", "random_letters:p=0.1"}
    for word_level in ("swap:p=0.1", "synonym:p=0.5", "contraction", "expansion", "neighbour_swap:p=0.1",
                       "paraphrase:openai:gpt", "none", "no_such_attack"):
        assert not edits_characters(word_level), word_level
