"""--attack-suite: suites are data files (shipped by name, or a user's file by path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalrun._util.errors import SpecError
from evalrun.attacks import ATTACKS, load_suite, parse_attack
from evalrun.attacks.suites import read_suite, shipped_suites

MMW = [
    "misspelling:p=0.25", "misspelling:p=0.5", "typo:p=0.05", "typo:p=0.1", "contraction",
    "lowercase", "swap:duplicate=0.05,remove=0.05", "swap:swap=0.05", "swap:swap=0.1",
    "translate:fr:{translator}", "translate:ru:{translator}",
    "synonym:p=0.25", "synonym:p=0.5", "synonym:p=0.75", "synonym:p=1",
]


def test_shipped_suites() -> None:
    assert shipped_suites() == ["mmw", "quick"]


def test_mmw_is_markmywords_grid() -> None:
    assert load_suite("mmw") == MMW
    suite = read_suite("mmw")
    assert "translator" in suite.placeholders and suite.description


def test_mmw_text_attacks_are_registered_and_model_attacks_are_left_to_others() -> None:
    for spec in load_suite("mmw"):
        if spec.startswith("translate:"):
            continue  # implemented elsewhere; the loader does not look names up
        assert parse_attack(spec) is not None


def test_fill_replaces_placeholders() -> None:
    filled = load_suite("mmw", fill={"translator": "openai:gpt-4o-mini"})
    assert "translate:fr:openai:gpt-4o-mini" in filled and "translate:ru:openai:gpt-4o-mini" in filled
    assert len(filled) == len(MMW)


def test_fill_without_a_value_names_the_option_and_placeholder() -> None:
    with pytest.raises(SpecError, match=r"--attack-suite mmw: attack 'translate:fr:\{translator\}' "
                                        r"needs a value for \{translator\} \(\{translator\}: model spec"):
        load_suite("mmw", fill={})


def test_quick_suite_is_offline_text_attacks() -> None:
    specs = load_suite("quick")
    assert 3 <= len(specs) <= 8
    for spec in specs:
        attack = parse_attack(spec)
        assert attack is not None and attack.definition.name in ATTACKS.names()
        attack.apply("A short demo text. It is not long, and they are fine.", 0)


def test_user_suite_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('attacks = ["swap:p=0.2", " lowercase ", "paraphrase:{model}", "someone_elses_attack"]\n')
    assert load_suite(str(path)) == ["swap:p=0.2", "lowercase", "paraphrase:{model}", "someone_elses_attack"]
    assert load_suite(path, fill={"model": "hf:/m"})[2] == "paraphrase:hf:/m"


@pytest.mark.parametrize("content, message", [
    ("attacks = [", "not valid TOML"),
    ("description = 'x'", "attacks must be a non-empty list"),
    ("attacks = []", "attacks must be a non-empty list"),
    ("attacks = 'swap'", "attacks must be a non-empty list"),
    ("attacks = ['swap', 3]", "attacks[1] must be a non-empty string"),
    ("attacks = ['swap', '  ']", "attacks[1] must be a non-empty string"),
    ("attacks = ['swap', 'swap']", "attacks[1] 'swap' repeats attacks[0]"),
    ("attacks = ['swap:p=']", "attacks[0]"),
    ("attacks = ['9lives']", "attacks[0]"),
    ("attack = ['swap']", "unknown key(s) attack"),
    ("attacks = ['swap']\ndescription = 3", "description must be a string"),
    ("attacks = ['swap']\n[placeholders]\nx = 1", "[placeholders] must map"),
])
def test_bad_files_name_option_and_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(SpecError) as info:
        load_suite(str(path))
    text = str(info.value)
    assert text.startswith(f"--attack-suite {path}: {path}") and message in text


def test_missing_file_and_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"--attack-suite .*nope\.toml: cannot read"):
        load_suite(str(tmp_path / "nope.toml"))
    with pytest.raises(SpecError, match=r"--attack-suite nope: no shipped suite 'nope'; shipped: mmw, quick"):
        load_suite("nope")
    with pytest.raises(SpecError, match="no shipped suite"):
        load_suite("..")
