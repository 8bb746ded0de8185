"""The pytest plugin end to end, through real pytest runs (pytester)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest


def _db_rows(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


@pytest.fixture
def project(pytester: pytest.Pytester, make_pack) -> pytest.Pytester:
    make_pack(root=pytester.path / "packs")
    return pytester


def test_items_have_readable_ids_and_pass_with_the_reference_solver(project: pytest.Pytester) -> None:
    result = project.runpytest("packs", "--collect-only", "-q", "--evalrun-n", "2")
    ids = [line for line in result.outlines if "::" in line]
    assert "packs/echo/pack.toml::c1[reference-none-none-r0]" in ids
    assert "packs/echo/pack.toml::c4[reference-none-none-r1]" in ids
    assert len(ids) == 8
    assert not (project.path / "results.sqlite").exists(), "--collect-only must not call any model"
    result = project.runpytest("packs", "--evalrun-n", "2")
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["*evalrun summary*", "*echo*reference*8*OK=8*"])
    db = project.path / "results.sqlite"
    assert _db_rows(db, "SELECT COUNT(*), SUM(score), COUNT(DISTINCT item_key) FROM results") == [(8, 8.0, 8)]


def test_k_selects_by_pack_case_group_and_model(project: pytest.Pytester) -> None:
    project.runpytest("packs", "-k", "echo").assert_outcomes(passed=4)
    project.runpytest("packs", "-k", "c3").assert_outcomes(passed=1, deselected=3)
    project.runpytest("packs", "-k", "b and not c2").assert_outcomes(passed=1, deselected=3)  # group 'b': c2, c4
    project.runpytest("packs", "-k", "reference").assert_outcomes(passed=4)


def test_failures_show_label_reason_and_output_and_case_errors_name_the_file(project: pytest.Pytester) -> None:
    (project.path / "packs" / "echo" / "reference.py").write_text(
        "def solve(case):\n    return case['word'] if case['id'] != 'c2' else 'wrong answer'\n")
    (project.path / "packs" / "echo" / "cases" / "bad.json").write_text('{"id": "c9", "word": 3, "kind": "a"}')
    result = project.runpytest("packs")
    result.assert_outcomes(passed=3, failed=2)
    # two independent reports: items may run in any order (pytest-randomly), so may they
    result.stdout.fnmatch_lines(["*invalid case: *bad.json:1: $.word: 3 is not of type 'string'*"])
    result.stdout.fnmatch_lines([
        "*BAD (score 0 < pass score 1): expected 'w2', got 'wrong answer'*",
        "*--- output ---*", "wrong answer",
    ])


def test_second_run_reuses_stored_outputs_and_an_edited_solver_invalidates_them(project: pytest.Pytester) -> None:
    db = project.path / "r.sqlite"
    first = project.runpytest("packs", "--evalrun-db", str(db))
    first.stdout.fnmatch_lines(["*4 results generated, 0 cached*"])
    second = project.runpytest("packs", "--evalrun-db", str(db))
    second.assert_outcomes(passed=4)
    assert "results generated" not in second.stdout.str()
    runs = _db_rows(db, "SELECT run_id FROM runs")
    assert len(runs) == 2
    assert _db_rows(db, "SELECT COUNT(*) FROM run_items GROUP BY run_id") == [(4,), (4,)]
    (project.path / "packs" / "echo" / "reference.py").write_text("def solve(case):\n    return case['word']  # edited\n")
    third = project.runpytest("packs", "--evalrun-db", str(db))
    third.stdout.fnmatch_lines(["*4 results generated*"])
    assert _db_rows(db, "SELECT COUNT(*) FROM results") == [(8,)]


def test_repetitions_attacks_and_models_are_axes(project: pytest.Pytester, tmp_path: Path) -> None:
    replay = tmp_path / "outs.jsonl"
    replay.write_text("".join(json.dumps({"case_id": f"c{i}", "output": f"w{i}" if i != 3 else "W3"}) + "\n"
                              for i in range(1, 5)))
    db = project.path / "r.sqlite"
    result = project.runpytest("packs", "--evalrun-db", str(db), "--evalrun-model", "reference",
                               "--evalrun-model", f"replay:{replay}", "--evalrun-attack", "none",
                               "--evalrun-attack", "lowercase", "--evalrun-n", "2")
    # replay c3 'W3' fails unattacked but passes lower-cased; 4 cases x 2 models x 2 attacks x 2 reps
    result.assert_outcomes(passed=30, failed=2)
    assert _db_rows(db, "SELECT COUNT(DISTINCT gen_key), COUNT(*) FROM results") == [(16, 32)]
    attacked = _db_rows(db, "SELECT raw_output, attacked_output FROM results WHERE case_id='c3' AND attack='lowercase'"
                            " AND model LIKE 'replay:%'")
    assert attacked == [("W3", "w3"), ("W3", "w3")]


def test_pack_without_reference_says_so(pytester: pytest.Pytester, make_pack) -> None:
    make_pack(root=pytester.path / "packs", reference=None)
    result = pytester.runpytest("packs")
    result.assert_outcomes(skipped=1)
    # said without -rs, in evalrun's own summary line
    result.stdout.fnmatch_lines(["evalrun: pack echo skipped: no reference solver (a reference.py, or a built-in "
                                 "grader that implies one: contains, exact, number); run it with a model: "
                                 "--evalrun-model SPEC"])


def test_bad_options_are_usage_errors(project: pytest.Pytester) -> None:
    result = project.runpytest("packs", "--evalrun-model", "nosuch:thing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--model nosuch:thing: unknown provider 'nosuch'*"])
    result = project.runpytest("packs", "--evalrun-attack", "swap:p=7")
    result.stderr.fnmatch_lines(["*swap:p=7*out of range*"])
    result = project.runpytest("packs", "--evalrun-n", "0")
    result.stderr.fnmatch_lines(["*--evalrun-n 0: must be in [[]1, 10,000]*"])


def test_tool_evalrun_section_sets_defaults(project: pytest.Pytester) -> None:
    project.makepyprojecttoml('[tool.evalrun]\nn = 3\ndb = "custom.sqlite"\n')
    project.runpytest("packs").assert_outcomes(passed=12)
    assert (project.path / "custom.sqlite").exists()


def test_xdist_workers_share_one_generation_pass(project: pytest.Pytester) -> None:
    db = project.path / "x.sqlite"
    result = project.runpytest("packs", "-n", "2", "--evalrun-db", str(db), "--evalrun-n", "5")
    result.assert_outcomes(passed=20)
    assert _db_rows(db, "SELECT COUNT(*), COUNT(DISTINCT item_key), COUNT(score) FROM results") == [(20, 20, 20)]
    assert _db_rows(db, "SELECT COUNT(*), COUNT(finished_at) FROM runs") == [(1, 1)]
    assert _db_rows(db, "SELECT COUNT(*) FROM run_items") == [(20,)]


def test_bad_tool_evalrun_values_name_the_file_and_field(project: pytest.Pytester) -> None:
    project.makepyprojecttoml('[tool.evalrun]\nn = "three"\n')
    result = project.runpytest("packs")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pyproject.toml [[]tool.evalrun[]]: n = 'three' has the wrong type*"])


def test_watermark_with_a_provider_without_logits_is_refused_before_any_call(project: pytest.Pytester) -> None:
    result = project.runpytest("packs", "--evalrun-watermark", "kgw:gamma=0.5", "--evalrun-key", "7")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--model reference cannot apply --watermark kgw:*needs a provider with logits*"])
    assert not (project.path / "results.sqlite").exists()


def test_grader_crash_traceback_never_shows_the_watermark_key(pytester: pytest.Pytester, make_pack) -> None:
    crashing = ("from evalrun.pack.grade import Grade\n\ndef grade(case, output, context):\n"
                "    raise RuntimeError('cannot use key ' + str(context.key))\n")
    make_pack(root=pytester.path / "packs", grader=crashing)
    result = pytester.runpytest("packs", "--evalrun-key", "topsecret-key-99", "-k", "c1")
    result.assert_outcomes(failed=1, deselected=3)
    assert "topsecret-key-99" not in result.stdout.str() + result.stderr.str()


def test_packs_dir_option_adds_packs_to_collection(pytester: pytest.Pytester, make_pack) -> None:
    make_pack(root=pytester.path / "elsewhere")
    pytester.makepyfile(test_plain="def test_ok():\n    pass\n")
    result = pytester.runpytest("test_plain.py", "--evalrun-packs-dir", "elsewhere")
    result.assert_outcomes(passed=5)  # the plain test plus the pack's 4 cases
    result = pytester.runpytest("test_plain.py", "--evalrun-packs-dir", "missing")
    result.stderr.fnmatch_lines(["*--evalrun-packs-dir missing: no such directory*"])
