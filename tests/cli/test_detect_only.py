"""Outputs watermarked outside evalrun, graded here: a replay file of case ids and texts, the
run's --tokenizer for their ids, the detector named by --watermark (or by the file's lines).

The outputs are real: the embedded model generates them once, under kgw with one key, and
only their text goes into the replay files, as a user's outputs from elsewhere would."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalrun.model.providers import parse_model, provider_kind
from evalrun.testing import ChatServer

KEY = "detect-only-key"
KGW = "kgw:gamma=0.25,delta=2"
PACK = "mmw_book_reports"
#: the embedded model's own tokenizer directory: what a user passes as --tokenizer
TOKENIZER = provider_kind("embedded").tokenizer_dir(parse_model("embedded"))

pytestmark = pytest.mark.slow


def evalrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args, "--no-progress"], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ}, timeout=600)


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """19 book reports of the embedded model, unwatermarked and under kgw (key KEY), with
    their token ids: {"none": [...], "kgw": [...]} of {case_id, output, output_tokens}."""
    where = tmp_path_factory.mktemp("generated")
    proc = evalrun("run", "--pack", PACK, "--watermark", "none", "--watermark", KGW, "--select", "book-00 or book-01",
                   "--max-tokens", "80", "--key", KEY, "--out", str(where / "gen.sqlite"), cwd=where)
    assert proc.returncode == 0, proc.stderr
    found: dict[str, list[dict]] = {"none": [], "kgw": []}
    for case_id, output, tokens, watermark, prompt in rows(
            where / "gen.sqlite", "SELECT case_id, raw_output, output_tokens_json, watermark, prompt_json FROM results"
                                  " ORDER BY case_id"):
        found["none" if watermark == "none" else "kgw"].append(
            {"case_id": case_id, "output": output, "output_tokens": json.loads(tokens)})
        found.setdefault("prompts", []).append({"case_id": case_id, "user": json.loads(prompt)["user"]})
    assert len(found["kgw"]) == len(found["none"]) == 19
    return found


def write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def labels(db: Path) -> dict[tuple[str, str], int]:
    return {(wm.split(":")[0], label): n for wm, label, n in
            rows(db, "SELECT watermark, label, COUNT(*) FROM results GROUP BY watermark, label")}


def test_plain_replay_file_is_detected_under_the_right_key_only(tmp_path: Path, outputs: dict) -> None:
    plain = write(tmp_path / "plain.jsonl", [{"case_id": o["case_id"], "output": o["output"]} for o in outputs["kgw"]])
    db = tmp_path / "right.sqlite"
    proc = evalrun("grade", "--pack", PACK, "--outputs", str(plain), "--tokenizer", TOKENIZER, "--watermark", KGW,
                   "--key", KEY, "--out", str(db), "--select", "book-00 or book-01", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "detected in them as produced elsewhere (detect-only)" in proc.stderr
    assert labels(db) == {("kgw", "DETECTED"): 19}
    # the store says where the watermark came from, and the ids' vocabulary is the tokenizer's
    extras = {json.loads(e)["watermark_origin"] for (e,) in rows(db, "SELECT extra_json FROM results")}
    assert extras == {"outside evalrun"}
    assert {json.loads(e)["vocab_size"] for (e,) in rows(db, "SELECT extra_json FROM transforms")} == {8192}
    wrong = tmp_path / "wrong.sqlite"
    proc = evalrun("grade", "--pack", PACK, "--outputs", str(plain), "--tokenizer", TOKENIZER, "--watermark", KGW,
                   "--key", "not-the-key", "--out", str(wrong), "--select", "book-00 or book-01", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = labels(wrong)
    assert found.get(("kgw", "DETECTED"), 0) <= 2 and sum(found.values()) == 19  # p <= 0.02: ~0.4 expected
    assert ("kgw", "GRADER_ERROR") not in found


def test_lines_name_their_watermark_and_unwatermarked_ones_are_the_false_positive_side(
        tmp_path: Path, outputs: dict) -> None:
    mixed = write(tmp_path / "mixed.jsonl",
                  [{"case_id": o["case_id"], "output": o["output"], "watermark": KGW} for o in outputs["kgw"]]
                  + [{"case_id": o["case_id"], "output": o["output"]} for o in outputs["none"]])
    db = tmp_path / "mixed.sqlite"
    # no --watermark: the run's watermarks are the ones the file names, and none
    proc = evalrun("run", "--model", f"replay:{mixed}", "--pack", PACK, "--tokenizer", TOKENIZER, "--key", KEY,
                   "--out", str(db), "--select", "book-00 or book-01", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = labels(db)
    assert found[("kgw", "DETECTED")] == 19
    assert found.get(("none", "NOT_DETECTED"), 0) >= 17 and sum(found.values()) == 38
    # the summary counts false positives per detector, not only the union of the labels
    fired = found.get(("none", "DETECTED"), 0)
    assert "unwatermarked outputs detected under kgw: " in proc.stdout  # its short name: every parameter a default
    assert f": {fired} of 19 (false positives)" in proc.stdout


def test_ids_given_with_their_vocabulary_need_no_tokenizer(tmp_path: Path, outputs: dict) -> None:
    with_ids = write(tmp_path / "ids.jsonl", [dict(o, watermark=KGW) for o in outputs["kgw"]])
    db = tmp_path / "ids.sqlite"
    proc = evalrun("grade", "--pack", PACK, "--outputs", str(with_ids), "--vocab-size", "8192", "--key", KEY,
                   "--out", str(db), "--select", "book-00 or book-01", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert labels(db) == {("kgw", "DETECTED"): 19}
    # without a vocabulary the grade fails with the fix, once on stderr for every result
    db2 = tmp_path / "novocab.sqlite"
    proc = evalrun("grade", "--pack", PACK, "--outputs", str(with_ids), "--key", KEY, "--out", str(db2),
                   "--select", "book-00 or book-01", cwd=tmp_path)
    assert labels(db2) == {("kgw", "GRADER_ERROR"): 19}
    line = [x for x in proc.stderr.splitlines() if "grader error" in x]
    assert len(line) == 1 and line[0].startswith("evalrun: 19 result(s): grader error:") and "--vocab-size" in line[0]


def test_a_server_that_watermarks_on_its_side_in_completions_mode(tmp_path: Path, outputs: dict) -> None:
    """A base-model server (no chat template, as vLLM serves the embedded model) whose
    answers carry kgw: ``openai:<name>?api=completions`` stores them, and they are detected."""
    by_case = {o["case_id"]: o["output"] for o in outputs["kgw"]}
    prompts = {p["user"]: p["case_id"] for p in outputs["prompts"]}

    def watermarking_server(body: dict) -> str:
        (case_id,) = {cid for user, cid in prompts.items() if user in body["prompt"]}
        return by_case[case_id]

    db = tmp_path / "served.sqlite"
    with ChatServer(watermarking_server, chat_template=False) as server:
        proc = evalrun("run", "--pack", PACK, "--model", "openai:austen-5m?api=completions", "--base-url",
                       server.base_url, "--watermark", KGW, "--tokenizer", TOKENIZER, "--key", KEY,
                       "--max-tokens", "200", "--out", str(db), "--select", "book-00 or book-01", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert labels(db) == {("kgw", "DETECTED"): 19}
        assert rows(db, "SELECT DISTINCT model FROM results") == [("openai:austen-5m?api=completions",)]
        # the chat endpoint of the same server: one line with the fix, not 19 silent errors
        proc = evalrun("run", "--pack", PACK, "--model", "openai:austen-5m", "--base-url", server.base_url,
                       "--out", str(tmp_path / "chat.sqlite"), "--select", "book-00 or book-01", cwd=tmp_path)
    line = [x for x in proc.stderr.splitlines() if "chat template" in x]
    assert len(line) == 1 and line[0].startswith("evalrun: 19 result(s): generation error:")
    assert "?api=completions" in line[0]


def test_unwatermarked_api_style_outputs_are_not_grader_errors(tmp_path: Path, outputs: dict) -> None:
    """No watermark to detect: no token ids, tokenizer or key needed."""
    plain = write(tmp_path / "plain.jsonl", [{"case_id": o["case_id"], "output": o["output"]} for o in outputs["none"]])
    db = tmp_path / "none.sqlite"
    proc = evalrun("grade", "--pack", PACK, "--outputs", str(plain), "--out", str(db),
                   "--select", "book-00 or book-01", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert labels(db) == {("none", "NOT_DETECTED"): 19}
    assert "grader error" not in proc.stderr


@pytest.mark.parametrize("line, message", [
    ({"case_id": "book-001", "output": "x", "watermark": "zzz"}, "ids.jsonl:1: field 'watermark'"),
    ({"case_id": "book-001", "output": "x", "watermark": 3}, "ids.jsonl:1: field 'watermark' must be a spec"),
    ({"case_id": "book-001", "output": "x", "output_tokens": [1, -2]}, "ids.jsonl:1: field 'output_tokens'"),
    ({"case_id": "book-001", "output": "x", "output_tokens": [9], "vocab_size": 5}, "outside vocab_size 5"),
])
def test_bad_replay_lines_are_one_line_naming_file_and_line(tmp_path: Path, line: dict, message: str) -> None:
    bad = write(tmp_path / "ids.jsonl", [line])
    proc = evalrun("grade", "--pack", PACK, "--outputs", str(bad), "--key", KEY, "--out", str(tmp_path / "x.sqlite"),
                   cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "x.sqlite").exists()


def test_a_provider_without_logits_or_outside_outputs_cannot_take_a_watermark(tmp_path: Path) -> None:
    proc = evalrun("run", "--pack", PACK, "--model", "reference", "--watermark", KGW, "--key", KEY,
                   "--out", str(tmp_path / "x.sqlite"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "watermarking needs a provider with logits" in proc.stderr and "openai, replay" in proc.stderr
