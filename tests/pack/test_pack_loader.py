"""Pack loading: drop-in cases, errors that name file/line/JSON path, the search path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalrun._util.errors import PackError
from evalrun.pack.loading import discover_packs, load_pack, resolve_pack, shipped_packs_dir


def test_dropping_in_a_case_file_adds_a_case(make_pack) -> None:
    path = make_pack()
    assert [c.id for c in load_pack(path).cases] == ["c1", "c2", "c3", "c4"]
    (path / "cases" / "extra.jsonl").write_text(
        '{"id": "x1", "word": "hello", "kind": "a"}\n\n{"id": "x2", "word": "bye", "kind": "b"}\n')
    pack = load_pack(path)
    assert [c.id for c in pack.cases][-2:] == ["x1", "x2"]
    assert pack.case_errors == []
    assert pack.render_prompt(pack.cases[-1].data).user == "Say bye"
    assert pack.render_prompt(pack.cases[-1].data).system == "Repeat the word."


def test_bad_cases_are_reported_with_file_line_and_path_and_others_still_load(make_pack) -> None:
    path = make_pack()
    (path / "cases" / "broken.json").write_text('{\n  "id": "b1",\n  "word": \n}')
    (path / "cases" / "wrong.json").write_text(json.dumps(
        {"id": "b2", "word": "x", "kind": "zzz"}, indent=2))
    (path / "cases" / "lines.jsonl").write_text(
        '{"id": "l1", "word": "ok", "kind": "a"}\n{"id": "l2", "word": 5, "kind": "a"}\n{"id": "c1", "word": "d", "kind": "a"}\n')
    pack = load_pack(path)
    assert sorted(c.id for c in pack.cases) == ["c1", "c2", "c3", "c4", "l1"]
    messages = sorted(str(e) for e in pack.case_errors)
    assert len(messages) == 4
    broken = next(e for e in pack.case_errors if e.path.endswith("broken.json"))
    assert broken.line == 4 and broken.json_path == "$" and "invalid JSON" in broken.message
    wrong = next(e for e in pack.case_errors if e.path.endswith("wrong.json"))
    assert wrong.json_path == "$.kind" and wrong.line == 4 and "zzz" in wrong.message
    l2 = next(e for e in pack.case_errors if e.line == 2)
    assert l2.path.endswith("lines.jsonl") and l2.json_path == "$.word"
    dup = next(e for e in pack.case_errors if "duplicate" in e.message)
    assert dup.line == 3 and "c1" in dup.message and "c1.json" in dup.message


def test_case_missing_a_template_field_is_an_error_not_a_crash(make_pack) -> None:
    path = make_pack(schema=None, cases=[{"id": "ok", "word": "w", "kind": "a"}, {"id": "nofield", "kind": "a"}])
    pack = load_pack(path)
    assert [c.id for c in pack.cases] == ["ok"]
    assert pack.case_errors[0].json_path == "$.word"


@pytest.mark.parametrize("mutation, fragment", [
    (lambda p: (p / "grader.py").unlink(), "no grader.py"),
    (lambda p: (p / "grader.py").write_text("import nonexistent_module_xyz\n"), "import failed"),
    (lambda p: (p / "pack.toml").write_text("name = 'x'\n"), "missing key"),
    (lambda p: (p / "pack.toml").write_text("name = [\n"), "invalid TOML"),
    (lambda p: (p / "case.schema.json").write_text('{"type": 5}'), "invalid schema"),
    (lambda p: (p / "reference.py").write_text("x = 1\n"), "no function solve"),
])
def test_unusable_packs_raise_pack_error_naming_the_file(make_pack, mutation, fragment) -> None:
    path = make_pack()
    mutation(path)
    with pytest.raises(PackError, match=fragment):
        load_pack(path)


def test_grader_label_must_be_declared(make_pack) -> None:
    path = make_pack(grader="from evalrun.pack.grade import Grade\ndef grade(c, o):\n    return Grade(1.0, 'WHAT')\n")
    pack = load_pack(path)
    with pytest.raises(PackError, match="label 'WHAT' is not declared"):
        pack.grade(pack.cases[0].data, "w1")


def test_golden_and_reference_checks(make_pack) -> None:
    golden = [{"case_id": "c1", "output": "w1", "label": "OK", "score": 1.0},
              {"case_id": "c1", "output": "nope", "label": "OK", "score": 1.0, "note": "deliberately wrong"},
              {"case_id": "zz", "output": "", "label": "BAD", "score": 0.0}]
    pack = load_pack(make_pack(golden=golden, reference="def solve(case):\n    return case['word'] if case['id'] != 'c2' else 'x'\n"))
    problems = pack.check_golden()
    assert len(problems) == 2
    assert "golden.jsonl:2" in problems[0] and "deliberately wrong" in problems[0]
    assert "unknown case_id 'zz'" in problems[1]
    ref = pack.check_reference()
    assert len(ref) == 1 and "c2.json" in ref[0]


def test_search_path_order_and_resolution(make_pack, tmp_path: Path, monkeypatch) -> None:
    path = make_pack("mine")
    other = tmp_path / "elsewhere"
    make_pack("theirs", root=other)
    monkeypatch.setenv("EVALRUN_PACKS", str(other))
    found = discover_packs([path.parent])
    assert found["mine"] == path and found["theirs"] == other / "theirs"
    assert "watermark_robustness" in found and found["watermark_robustness"].parent == shipped_packs_dir()
    assert resolve_pack("mine", [path.parent]) == path
    assert resolve_pack(str(path)) == path.resolve()
    with pytest.raises(PackError, match="unknown pack.*known: .*mine"):
        resolve_pack("absent", [path.parent])
