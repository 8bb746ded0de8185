"""A pack made of pack.toml and case files, as a contributor drops it in: validated, run with a
replay file and with the reference solver, selected by case id, run under plain pytest; and
the pack `evalrun new pack` writes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ENV = {k: v for k, v in os.environ.items() if k != "EVALRUN_WATERMARK_KEY"}


def evalrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=ENV)


def labels(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT case_id, label FROM results"))


@pytest.fixture
def dropped(tmp_path: Path) -> Path:
    """packs/required_word: pack.toml (grader = "contains") and three case files, nothing else."""
    pack = tmp_path / "packs" / "required_word"
    (pack / "cases").mkdir(parents=True)
    (pack / "pack.toml").write_text('name = "required_word"\n'
                                    'description = "The answer uses the word asked for."\n'
                                    'prompt_template = "Write one sentence that uses the word \'{target}\'."\n'
                                    'grader = "contains"\n')
    for i, word in enumerate(["harbour", "lantern", "meadow"], 1):
        (pack / "cases" / f"c{i}.json").write_text(json.dumps({"id": f"c{i}", "target": word}))
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps({"pack": "required_word", "case_id": c, "output": o}) + "\n"
                                                    for c, o in [("c1", "Boats rest in the Harbour."),
                                                                 ("c2", "A lamp glowed."),
                                                                 ("c3", "Cows graze in the meadow.")]))
    return tmp_path


def test_a_dropped_in_pack_validates_runs_and_selects_cases(dropped: Path) -> None:
    assert sorted(p.name for p in (dropped / "packs" / "required_word").rglob("*") if p.is_file()) == [
        "c1.json", "c2.json", "c3.json", "pack.toml"]
    valid = evalrun("validate", "--packs-dir", "packs", "--pack", "required_word", cwd=dropped)
    assert valid.returncode == 0 and valid.stdout.startswith("required_word: ok -- 3 cases"), valid.stdout
    run = evalrun("run", "--packs-dir", "packs", "--pack", "required_word", "--model", "replay:outputs.jsonl",
                  "--out", "replay.sqlite", "--no-progress", cwd=dropped)
    assert run.returncode == 0, run.stderr
    assert labels(dropped / "replay.sqlite") == {"c1": "PASS", "c2": "FAIL", "c3": "PASS"}
    picked = evalrun("run", "--packs-dir", "packs", "--pack", "required_word", "--model", "reference",
                     "--cases", "c1*", "--out", "picked.sqlite", "--no-progress", cwd=dropped)
    assert picked.returncode == 0 and labels(dropped / "picked.sqlite") == {"c1": "PASS"}, picked.stderr
    plain = subprocess.run([sys.executable, "-m", "pytest", "-k", "required_word", "-p", "no:randomly",
                            "-p", "no:cacheprovider", "--evalrun-db", "pytest.sqlite"],
                           cwd=dropped, capture_output=True, text=True, timeout=600, env=ENV)
    assert plain.returncode == 0 and "3 passed" in plain.stdout, plain.stdout[-2000:]
    assert labels(dropped / "pytest.sqlite") == {"c1": "PASS", "c2": "PASS", "c3": "PASS"}  # the solver: the target


def test_reference_on_a_pack_without_a_solver_is_one_line(dropped: Path) -> None:
    pack = dropped / "packs" / "required_word"
    (pack / "pack.toml").write_text((pack / "pack.toml").read_text().replace('"contains"', '"regex"'))
    for case in (pack / "cases").glob("*.json"):
        data = json.loads(case.read_text())
        case.write_text(json.dumps({**data, "pattern": data["target"]}))
    proc = evalrun("run", "--packs-dir", "packs", "--pack", "required_word", "--model", "reference",
                   "--out", "none.sqlite", "--no-progress", cwd=dropped)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    (line,) = proc.stderr.splitlines()
    assert line.startswith("evalrun: error: --model reference: pack required_word has no reference solver")
    assert not (dropped / "none.sqlite").exists()
    plain = subprocess.run([sys.executable, "-m", "pytest", "-k", "required_word", "-p", "no:randomly",
                            "-p", "no:cacheprovider", "--evalrun-db", "s.sqlite"],
                           cwd=dropped, capture_output=True, text=True, timeout=600, env=ENV)
    assert "evalrun: pack required_word skipped: no reference solver" in plain.stdout, plain.stdout[-2000:]


@pytest.mark.parametrize("grader", ["contains", "exact", "number", "regex", "json"])
def test_evalrun_new_pack_writes_a_pack_that_validates_and_runs(tmp_path: Path, grader: str) -> None:
    made = evalrun("new", "pack", "fresh", "--grader", grader, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    commands = [line.strip() for line in made.stdout.splitlines() if line.startswith("  ")]
    assert commands[0] == "evalrun validate --packs-dir packs --pack fresh" and commands[2] == "pytest packs/fresh -k fresh"
    assert evalrun("validate", "--packs-dir", "packs", "--pack", "fresh", cwd=tmp_path).returncode == 0
    if "--model reference" in commands[1]:
        run = evalrun("run", "--packs-dir", "packs", "--pack", "fresh", "--model", "reference", "--out", "n.sqlite",
                      "--no-progress", cwd=tmp_path)
        assert run.returncode == 0 and labels(tmp_path / "n.sqlite") == {"example-1": "PASS"}, run.stderr
    else:  # no obvious solver: the printed command runs a replay file
        (tmp_path / "outputs.jsonl").write_text(json.dumps({"pack": "fresh", "case_id": "example-1",
                                                            "output": '{"name": "spider", "legs": 8}'}) + "\n")
        run = evalrun("run", "--packs-dir", "packs", "--pack", "fresh", "--model", "replay:outputs.jsonl",
                      "--out", "n.sqlite", "--no-progress", cwd=tmp_path)
        assert run.returncode == 0 and set(labels(tmp_path / "n.sqlite")) == {"example-1"}, run.stderr
    again = evalrun("new", "pack", "fresh", cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr
