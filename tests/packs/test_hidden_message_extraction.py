"""Tests for the hidden_message_extraction pack (the WMID report): cases, generator, reference, grader.

The pack's files are loaded straight from disk by path, so these tests do not depend on the
pack loader, and they pin the pack contract the loader relies on.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import tomllib
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun.pack.loading import load_pack_module

REPO = Path(__file__).resolve().parents[2]
PACK = REPO / "packs" / "hidden_message_extraction"
CASES_DIR = PACK / "cases"
SEED_FILE = REPO.parent / "shared" / "seeds" / "003_683b0400722320dc.txt"

SPLIT = {
    "acrostic": 11,
    "index_of_word": 11,
    "punctuation_mapping": 10,
    "no_message_control": 10,
    "noise_variant": 10,
}
LABELS = ["CORRECT", "PARTIAL", "INCORRECT", "FALSE_POSITIVE"]
# the WMID report, section 2.2, "Hidden-Message Extraction", verbatim.
SYSTEM_PROMPT = (
    "You are a precise text analysis assistant. Follow the extraction rules exactly as provided. "
    "Output ONLY the extracted message, nothing else. No explanations, no formatting, no quotes. "
    "If the rules indicate there is no hidden message, output exactly: NONE"
)


def _load(name: str) -> ModuleType:
    return load_pack_module(PACK / f"{name}.py", "_hme_test", name)


grader = _load("grader")
reference = _load("reference")
generator = _load("generate_cases")

CASE_FILES = sorted(CASES_DIR.glob("*.json"))
CASES: list[dict[str, Any]] = [json.loads(p.read_text(encoding="utf-8")) for p in CASE_FILES]
CASES_BY_ID = {case["id"]: case for case in CASES}
MESSAGE_CASES = [c for c in CASES if c["expected"] != "NONE"]
CONTROL_CASES = [c for c in CASES if c["expected"] == "NONE"]
GOLDEN = [
    json.loads(line)
    for line in (PACK / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]


def _pack_toml() -> dict[str, Any]:
    with open(PACK / "pack.toml", "rb") as handle:
        return tomllib.load(handle)


# ---------------------------------------------------------------------------------------------
# Cases and schema


def test_case_count_and_split() -> None:
    assert len(CASES) == 52
    assert Counter(case["scheme"] for case in CASES) == SPLIT


def test_ids_unique_match_file_names_and_schemes() -> None:
    ids = [case["id"] for case in CASES]
    assert len(set(ids)) == len(ids)
    for path, case in zip(CASE_FILES, CASES):
        assert path.name == f"{case['id']}.json"
        assert case["id"].rsplit("_", 1)[0] == case["scheme"]


def test_every_case_satisfies_the_schema() -> None:
    schema = json.loads((PACK / "case.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = {
        case["id"]: [error.message for error in validator.iter_errors(case)] for case in CASES
    }
    assert {k: v for k, v in errors.items() if v} == {}


@pytest.mark.parametrize(
    ("case_id", "mutate"),
    [
        ("acrostic_001", lambda c: c.update(expected="NONE")),
        ("acrostic_001", lambda c: c.update(expected="hello")),
        ("acrostic_001", lambda c: c.update(extra=1)),
        ("acrostic_001", lambda c: c.update(id="index_of_word_001")),
        ("acrostic_001", lambda c: c.pop("rule")),
        ("no_message_control_001", lambda c: c.update(expected="FOREST")),
        ("noise_variant_001", lambda c: c["params"].pop("skip")),
        ("index_of_word_001", lambda c: c["params"].update(unit="line")),
        ("punctuation_mapping_001", lambda c: c["params"]["mapping"].update({".": "A"})),
    ],
)
def test_schema_rejects_broken_cases(case_id: str, mutate: Any) -> None:
    schema = json.loads((PACK / "case.schema.json").read_text(encoding="utf-8"))
    case = copy.deepcopy(CASES_BY_ID[case_id])
    mutate(case)
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(case))


def test_messages_are_words_of_three_to_eight_letters() -> None:
    for case in MESSAGE_CASES:
        assert 3 <= len(case["expected"]) <= 8 and case["expected"] in generator.MESSAGES
    assert len({c["expected"] for c in MESSAGE_CASES}) == len(MESSAGE_CASES)


def test_messages_do_not_appear_verbatim_in_their_texts() -> None:
    for case in MESSAGE_CASES:
        assert case["expected"].lower() not in case["text"].lower(), case["id"]


def test_case_files_use_the_canonical_rendering() -> None:
    for path, case in zip(CASE_FILES, CASES):
        raw = path.read_bytes().decode("utf-8")
        assert raw == json.dumps(case, indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------
# Generator


def test_generator_check_passes_on_committed_cases() -> None:
    result = subprocess.run(
        [sys.executable, str(PACK / "generate_cases.py"), "--check"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert generator.check(CASES_DIR) == []


def test_generator_check_fails_on_drift(tmp_path: Path) -> None:
    out = tmp_path / "cases"
    assert generator.main(["--out", str(out)]) == 0
    assert generator.main(["--check", "--out", str(out)]) == 0
    victim = out / "acrostic_001.json"
    victim.write_text(victim.read_text(encoding="utf-8").replace("ISLAND", "ISLET"), "utf-8")
    (out / "acrostic_099.json").write_text("{}\n", encoding="utf-8")
    (out / "noise_variant_010.json").unlink()
    assert generator.check(out) == [
        "missing noise_variant_010.json", "unexpected acrostic_099.json",
        "differs acrostic_001.json",
    ]
    assert generator.main(["--check", "--out", str(out)]) == 1


def test_generator_is_deterministic_across_processes(tmp_path: Path) -> None:
    """Two runs with different hash seeds write byte-identical files, equal to the committed."""
    outputs = []
    for hash_seed in ("0", "4242"):
        out = tmp_path / f"run_{hash_seed}"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run(
            [sys.executable, str(PACK / "generate_cases.py"), "--out", str(out)],
            check=True, capture_output=True, env=env, timeout=60,
        )
        outputs.append({p.name: p.read_bytes() for p in sorted(out.glob("*.json"))})
    committed = {p.name: p.read_bytes() for p in CASE_FILES}
    assert outputs[0] == outputs[1] == committed


def test_generator_seed_matters() -> None:
    assert generator.expected_files(generator.SEED + 1) != generator.expected_files()


# ---------------------------------------------------------------------------------------------
# Reference solver


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reference_scores_one_on_every_case(case: dict[str, Any]) -> None:
    blind = {k: v for k, v in case.items() if k != "expected"}
    answer = reference.solve(blind)
    result = grader.grade(case, answer)
    assert (result.label, result.score) == ("CORRECT", 1.0), result.reason


def test_reference_never_reads_expected() -> None:
    class NoExpected(dict):
        def __getitem__(self, key: str) -> Any:
            assert key != "expected", "reference read the expected answer"
            return super().__getitem__(key)

        def get(self, key: str, default: Any = None) -> Any:
            assert key != "expected", "reference read the expected answer"
            return super().get(key, default)

    for case in CASES:
        poisoned = NoExpected({**case, "expected": "WRONG"})
        assert reference.solve(poisoned) == case["expected"]


def test_noise_changes_the_careless_answer() -> None:
    """A noise case is only a test if ignoring the skip rule gives a different answer."""
    for case in CASES:
        if case["scheme"] != "noise_variant":
            continue
        careless = {k: v for k, v in case["params"].items() if k != "skip"}
        assert reference.solve({"text": case["text"], "params": careless}) != case["expected"]


def test_gated_controls_tempt_with_letters() -> None:
    """Word-list controls yield letters that are not on the list: the answer is NONE by rule."""
    gated = [c for c in CONTROL_CASES if "allowed" in c["params"]]
    assert len(gated) == 6
    for case in gated:
        ungated = {k: v for k, v in case["params"].items() if k != "allowed"}
        letters = reference.solve({"text": case["text"], "params": ungated})
        assert letters != "NONE" and letters not in case["params"]["allowed"]
        assert all(word in case["rule"] for word in case["params"]["allowed"])


def test_reference_on_hand_written_texts() -> None:
    def solve(text: str, **params: Any) -> str:
        return reference.solve({"text": text, "params": params})

    assert solve("Hi there. Oh no! Wait? yes...", method="acrostic", unit="sentence") == "HOWY"
    assert solve("Go. (Aside here.) Old.", method="acrostic", unit="sentence",
                 skip="parentheses") == "GO"
    assert solve("Go. (Aside here.) Old.", method="acrostic", unit="sentence") == "GAO"
    assert solve("  -Ant. Bee.\n\nCat\n[Dog]\n", method="acrostic", unit="line",
                 skip="bracketed_lines") == "AC"
    assert solve("a b c d e f g", method="index_of_word", n=3) == "CF"
    assert solve("a , b c — d", method="index_of_word", n=2) == "BD"
    assert solve("x STOP y z w", method="index_of_word", n=2, skip="all_caps_words") == "YW"
    assert solve("one (two three) four", method="index_of_word", indices=[2],
                 skip="parentheses") == "F"
    with pytest.raises(ValueError):
        solve("a b", method="index_of_word", indices=[3])
    assert solve("a! b, c? d.", method="punctuation_mapping",
                 mapping={"!": "H", ",": "I", "?": "S"}) == "HIS"
    assert solve("no marks here.", method="punctuation_mapping", mapping={"!": "A"}) == "NONE"
    assert solve("Send HELP, NOW. I am A ok.", method="capitals") == "HELPNOW"
    assert solve("Cat. Ant. Tap.", method="acrostic", unit="sentence",
                 allowed=["CAT", "DOG"]) == "CAT"
    assert solve("Cat. Ant. Top.", method="acrostic", unit="sentence",
                 allowed=["CAT", "DOG"]) == "CAT"
    assert solve("Cat. Ant. Rug.", method="acrostic", unit="sentence",
                 allowed=["CAT", "DOG"]) == "NONE"


# ---------------------------------------------------------------------------------------------
# pack.toml


def _seed_system_prompt() -> str:
    text = SEED_FILE.read_text(encoding="utf-8")
    section = text.split("#### Hidden-Message Extraction", 1)[1]
    after = section.split("The system prompt reads:", 1)[1]
    quoted = next(line for line in after.splitlines() if line.startswith("> "))
    return quoted[2:].replace("\\<", "<").replace("\\>", ">").strip()


def test_pack_toml_contract() -> None:
    pack = _pack_toml()
    assert pack["name"] == "hidden_message_extraction"
    assert pack["version"] == "1.0.0"
    assert pack["description"].strip()
    assert pack["pass_score"] == 1.0
    assert pack["labels"] == LABELS == list(grader.LABELS)
    assert pack["group_field"] == "scheme"
    assert pack["defaults"] == {"temperature": 0.0, "max_tokens": 64}


def test_system_prompt_is_the_seed_text() -> None:
    pack = _pack_toml()
    assert pack["system_prompt"] == SYSTEM_PROMPT
    if SEED_FILE.exists():  # the seeds live beside the checkout in this project's layout
        assert _seed_system_prompt() == SYSTEM_PROMPT


def test_prompt_template_renders_every_case() -> None:
    template = _pack_toml()["prompt_template"]
    for case in CASES:
        prompt = template.format(**case)
        assert case["rule"] in prompt and case["text"] in prompt
        assert case["expected"] not in prompt.replace(case["text"], "").replace(case["rule"], "")


# ---------------------------------------------------------------------------------------------
# Grader: golden outputs


def test_golden_file_is_large_and_covers_every_label() -> None:
    assert len(GOLDEN) >= 20
    assert {row["label"] for row in GOLDEN} == set(LABELS)
    assert all(row["case_id"] in CASES_BY_ID and row["note"] for row in GOLDEN)


@pytest.mark.parametrize("row", GOLDEN, ids=[f"{r['case_id']}:{r['output']!r}" for r in GOLDEN])
def test_golden_output(row: dict[str, Any]) -> None:
    result = grader.grade(CASES_BY_ID[row["case_id"]], row["output"])
    assert (result.label, result.score) == (row["label"], row["score"]), result.reason


def test_reason_names_expected_and_got() -> None:
    result = grader.grade(CASES_BY_ID["acrostic_005"], "toma")
    assert "'TOMATO'" in result.reason and "'TOMA'" in result.reason
    long = grader.grade(CASES_BY_ID["acrostic_005"], "X" * 500)
    assert len(long.reason) < 120
    assert "<empty>" in grader.grade(CASES_BY_ID["acrostic_005"], " ").reason


def test_grader_rejects_an_empty_expected_answer() -> None:
    with pytest.raises(ValueError):
        grader.grade({"id": "bad", "expected": "  "}, "X")


# ---------------------------------------------------------------------------------------------
# Grader: properties

any_case = st.sampled_from(CASES)
message_case = st.sampled_from(MESSAGE_CASES)
control_case = st.sampled_from(CONTROL_CASES)
ascii_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=20)
upper_word = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=10)
whitespace = st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2003\u3000", max_size=6)
FAST = settings(max_examples=80, deadline=None)


@FAST
@given(any_case, st.text(max_size=30))
def test_score_and_label_agree(case: dict[str, Any], output: str) -> None:
    result = grader.grade(case, output)
    assert result.label in grader.LABELS
    assert result.score == grader.SCORES[result.label]
    assert grader.grade(case, output) == result  # pure: same input, same grade


@FAST
@given(any_case, ascii_text)
def test_grading_is_case_insensitive(case: dict[str, Any], output: str) -> None:
    assert grader.grade(case, output) == grader.grade(case, output.swapcase())


@FAST
@given(any_case, ascii_text, st.lists(st.tuples(st.integers(0, 40), whitespace), max_size=4))
def test_grading_ignores_whitespace_anywhere(
    case: dict[str, Any], output: str, inserts: list[tuple[int, str]]
) -> None:
    spaced = output
    for position, blank in inserts:
        position = min(position, len(spaced))
        spaced = spaced[:position] + blank + spaced[position:]
    assert grader.grade(case, spaced).label == grader.grade(case, output).label


@FAST
@given(any_case, whitespace)
def test_empty_answer_is_never_partial(case: dict[str, Any], output: str) -> None:
    result = grader.grade(case, output)
    assert (result.label, result.score) == ("INCORRECT", 0.0)


@FAST
@given(upper_word, upper_word, upper_word)
def test_substring_either_way_is_partial(core: str, before: str, after: str) -> None:
    longer = before + core + after
    if "NONE" in (core, longer):
        return
    assert grader.grade({"expected": longer}, core).label == "PARTIAL"
    assert grader.grade({"expected": core}, longer).label == "PARTIAL"
    assert grader.grade({"expected": core}, longer.lower()).score == 0.5


@FAST
@given(control_case, st.text(max_size=20))
def test_control_with_a_reported_message_is_false_positive(
    case: dict[str, Any], output: str
) -> None:
    normalized = "".join(output.split()).upper()
    result = grader.grade(case, output)
    if normalized == "NONE":
        assert result.label == "CORRECT"
    elif normalized == "":
        assert result.label == "INCORRECT"
    else:
        assert (result.label, result.score) == ("FALSE_POSITIVE", 0.0)


@FAST
@given(message_case, whitespace, whitespace)
def test_exact_message_with_layout_is_correct(
    case: dict[str, Any], left: str, right: str
) -> None:
    output = left + " ".join(case["expected"].lower()) + right
    assert grader.grade(case, output) == grader.Grade(
        1.0, "CORRECT", grader.grade(case, case["expected"]).reason
    )


@FAST
@given(message_case, whitespace)
def test_none_on_a_message_case_is_incorrect(case: dict[str, Any], pad: str) -> None:
    assert grader.grade(case, pad + "none" + pad).label == "INCORRECT"
