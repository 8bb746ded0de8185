"""The built-in graders (``grader = "..."`` in pack.toml): golden examples of each, properties
that hold for every input, and what a pack made of pack.toml and case files gets from them."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalrun._util.errors import PackError
from evalrun._util.hashing import sha256_hex
from evalrun.pack.builtin_graders import GRADERS, first_number, grader_settings
from evalrun.pack.loading import NO_SOLVER, load_pack, shipped_packs_dir

#: (grader, case, output, pack.toml settings, label, reason starts with)
GOLDEN = [
    ("exact", {"target": "Paris"}, "  Paris\n", {}, "PASS", "output equals the target"),
    ("exact", {"target": "Paris"}, "paris", {}, "FAIL", "output differs from the target"),
    ("exact", {"target": "Paris"}, "paris", {"case_sensitive": False}, "PASS", "output equals"),
    ("exact", {"target": "Paris"}, "Paris, France", {}, "FAIL", "output differs"),
    ("contains", {"target": "harbour"}, "The HARBOUR was calm.", {}, "PASS", "contains all 1 target(s)"),
    ("contains", {"target": ["sea", "ship"]}, "The sea was calm.", {}, "FAIL", 'missing 1 of 2: "ship"'),
    ("contains", {"target": ["sea", "ship"]}, "Sea and ship.", {"case_sensitive": True}, "FAIL", 'missing 1 of 2: "sea"'),
    ("contains", {"target": ["sea", "ship"]}, "A ship at sea.", {}, "PASS", "contains all 2"),
    ("regex", {"pattern": r"\d{4}-\d{2}-\d{2}"}, "It is 2026-11-28 today.", {}, "PASS",
     'pattern matches "2026-11-28" at 6'),
    ("regex", {"pattern": r"^yes\b"}, "Yes, indeed", {}, "FAIL", "pattern"),
    ("regex", {"pattern": r"^yes\b"}, "Yes, indeed", {"case_sensitive": False}, "PASS", "pattern matches"),
    ("number", {"target": 42}, "The answer is 42.", {}, "PASS", "first number 42 is within 0 of 42"),
    ("number", {"target": 1234.5}, "about 1,234.5 units", {}, "PASS", "first number 1234.5"),
    ("number", {"target": 3.14}, "pi is 3.1416", {"tolerance": 0.01}, "PASS", "first number 3.1416 is within 0.01"),
    ("number", {"target": 3.14, "tolerance": 0.0001}, "pi is 3.1416", {"tolerance": 0.01}, "FAIL", "first number"),
    ("number", {"target": -2}, "It fell by −2 degrees", {}, "PASS", "first number -2"),
    ("number", {"target": 7}, "seven", {}, "FAIL", "no number in the output"),
    ("json", {}, '{"name": "spider", "legs": 8}', {}, "PASS", "parses as JSON"),
    ("json", {}, "```json\n[1, 2]\n```", {}, "PASS", "parses as JSON"),
    ("json", {}, "{name: spider}", {}, "FAIL", "not JSON: Expecting property name"),
    ("json", {"schema": {"type": "object", "required": ["legs"], "properties": {"legs": {"type": "integer"}}}},
     '{"legs": "eight"}', {}, "FAIL", "JSON does not match the schema at $.legs: 'eight' is not of type 'integer'"),
    ("json", {"schema": {"type": "object", "required": ["legs"]}}, '{"legs": 8}', {}, "PASS", "JSON matches"),
]


@pytest.mark.parametrize(("name", "case", "output", "settings", "label", "reason"), GOLDEN)
def test_golden_examples(name: str, case: dict, output: str, settings: dict, label: str, reason: str) -> None:
    grader = GRADERS.get(name)
    grade = grader.grade({"id": "x", **case}, output, grader_settings(grader, settings))
    assert grade.label == label and grade.score == (1.0 if label == "PASS" else 0.0)
    assert grade.reason.startswith(reason) and "\n" not in grade.reason, grade.reason
    json.dumps(dict(grade.metadata))  # evidence is JSON


words = st.text(alphabet=string.ascii_letters + string.digits + " .,'-", min_size=1, max_size=30).filter(str.strip)


@given(targets=st.lists(words, min_size=1, max_size=4), noise=st.text(max_size=40))
def test_contains_passes_whatever_surrounds_the_targets(targets: list[str], noise: str) -> None:
    grader = GRADERS.get("contains")
    settings = grader_settings(grader, {})
    output = noise + " ".join(targets) + noise
    assert grader.grade({"target": targets}, output, settings).label == "PASS"
    assert grader.grade({"target": targets}, grader.solve({"target": targets}, settings), settings).label == "PASS"


@given(target=words, pad=st.text(alphabet=" \t\n", max_size=5))
def test_exact_ignores_surrounding_whitespace_only(target: str, pad: str) -> None:
    grader = GRADERS.get("exact")
    settings = grader_settings(grader, {})
    assert grader.grade({"target": target}, pad + target + pad, settings).label == "PASS"
    assert grader.grade({"target": target}, target + "!", settings).label == "FAIL"


@given(value=st.floats(allow_nan=False, allow_infinity=False, width=64), words_before=st.sampled_from(["", "It is ", "x = "]))
def test_number_reads_back_what_python_writes(value: float, words_before: str) -> None:
    assert first_number(f"{words_before}{value!r} and 17 more") == value
    grader = GRADERS.get("number")
    settings = grader_settings(grader, {})
    assert grader.grade({"target": value}, grader.solve({"target": value}, settings), settings).label == "PASS"


@given(value=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=8))
def test_json_accepts_every_json_value(value: object) -> None:
    grader = GRADERS.get("json")
    assert grader.grade({}, json.dumps(value), grader_settings(grader, {})).label == "PASS"


@given(text=st.text(min_size=1, max_size=30))
def test_regex_finds_its_own_escaped_text(text: str) -> None:
    grader = GRADERS.get("regex")
    assert grader.grade({"pattern": re.escape(text)}, "«" + text + "»", grader_settings(grader, {})).label == "PASS"


def _drop_in(root: Path, toml: str, cases: list[dict], name: str = "drop") -> Path:
    pack = root / name
    (pack / "cases").mkdir(parents=True)
    (pack / "pack.toml").write_text(f'name = "{name}"\ndescription = "d"\n' + toml)
    for case in cases:
        (pack / "cases" / f"{case['id']}.json").write_text(json.dumps(case))
    return pack


def test_a_drop_in_pack_needs_only_pack_toml_and_cases(tmp_path: Path) -> None:
    pack = load_pack(_drop_in(tmp_path, 'prompt_template = "Use {target}"\ngrader = "contains"\n',
                              [{"id": "c1", "target": "sea"}, {"id": "c2", "target": ["a", "b"]}]))
    assert pack.labels == ["PASS", "FAIL"] and pack.version == "0" and pack.pass_score == 1.0
    assert pack.has_reference and [pack.solve(c.data) for c in pack.cases] == ["sea", "a b"]
    assert pack.check_reference() == [] and pack.grade(pack.cases[0].data, "no").label == "FAIL"
    assert pack.grader_hash == sha256_hex(b"contains@1", (pack.path / "pack.toml").read_bytes())[:16]
    assert pack.reference_revision == "builtin:contains@1"


def test_bad_choices_are_one_line_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(PackError, match=r"pack.toml: grader = 'contain' is not a built-in grader; expected one of "):
        load_pack(_drop_in(tmp_path, 'prompt_template = "x"\ngrader = "contain"\n', [], "a"))
    both = _drop_in(tmp_path, 'prompt_template = "x"\ngrader = "exact"\n', [], "b")
    (both / "grader.py").write_text("def grade(case, output): ...\n")
    with pytest.raises(PackError, match=r"grader = 'exact' and .*grader.py both grade this pack: delete one"):
        load_pack(both)
    with pytest.raises(PackError, match=r"case_sensitive = 'no': must be true or false"):
        load_pack(_drop_in(tmp_path, 'prompt_template = "x"\ngrader = "exact"\ncase_sensitive = "no"\n', [], "c"))
    with pytest.raises(PackError, match=r"labels \['OK'\] lack the labels of grader 'exact': PASS, FAIL"):
        load_pack(_drop_in(tmp_path, 'prompt_template = "x"\ngrader = "exact"\nlabels = ["OK"]\n', [], "d"))
    with pytest.raises(PackError, match=r"no grader.py and no grader in pack.toml \(grader = one of "):
        load_pack(_drop_in(tmp_path, 'prompt_template = "x"\n', [], "e"))
    with pytest.raises(PackError, match=r"pack.toml: version must be text \(a quoted TOML string\), got 1.0"):
        load_pack(_drop_in(tmp_path, 'prompt_template = "x"\ngrader = "json"\nversion = 1.0\n', [], "f"))


def test_cases_the_grader_cannot_read_are_case_errors(tmp_path: Path) -> None:
    pack = load_pack(_drop_in(tmp_path, 'prompt_template = "Say {word}"\ngrader = "regex"\n', [
        {"id": "ok", "word": "a", "pattern": "a+"}, {"id": "none", "word": "a"},
        {"id": "bad", "word": "a", "pattern": "(unclosed"}]))
    assert [c.id for c in pack.cases] == ["ok"] and not pack.has_reference
    problems = sorted(f"{Path(e.path).name} {e.json_path}: {e.message}" for e in pack.case_errors)
    assert problems[0] == "bad.json $.pattern: not a regular expression: missing ), unterminated subpattern at position 0"
    assert problems[1] == "none.json $.pattern: field required by grader 'regex' is missing"


def test_the_no_solver_message_names_the_graders_with_a_solver() -> None:
    with_solver = [name for name in GRADERS.names() if GRADERS.get(name).solve is not None]
    assert NO_SOLVER.endswith(f"implies one: {', '.join(with_solver)})")


def test_shipped_packs_keep_their_grader_fingerprints() -> None:
    """Packs with a grader.py fingerprint it as before (grader.py and pack.toml bytes), so their
    stored grades stay current."""
    for folder in sorted(p.parent for p in shipped_packs_dir().glob("*/grader.py")):
        pack = load_pack(folder)
        assert pack.builtin_grader is None
        assert pack.grader_hash == sha256_hex((folder / "grader.py").read_bytes(),
                                              (folder / "pack.toml").read_bytes())[:16]
