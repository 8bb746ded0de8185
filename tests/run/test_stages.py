"""The staged pipeline end to end through the CLI: generate -> transform -> judge -> grade.

Real processes, the embedded model, the real openai client against the local test server (as
the paraphrasing model and as the judge), real SQLite.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalrun.testing.chat_server import ChatServer, echo_responder

KEY = "stage-test-key-31337"
ENV = {**os.environ, "OPENAI_API_KEY": "local-test-key", "EVALRUN_WATERMARK_KEY": KEY}

# reads what the stages stored: token ids after the attack, and judge answers
EVIDENCE_GRADER = '''
from evalrun.pack.grade import Grade

def grade(case, output, context):
    ratings = [j.parsed.get("rating") for j in context.judgements if j.method == "rating"]
    return Grade(1.0, "OK", "seen", metadata={
        "tokens": None if context.token_ids is None else len(context.token_ids),
        "token_note": context.token_note, "attack": context.attack,
        "rating": ratings[0] if ratings else None, "words": output.split()[:3]})
'''


def evalrun(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=ENV, timeout=timeout)


def q(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def paraphraser(body) -> str:
    """A stand-in paraphrasing model: the text it was given, reversed word by word."""
    text = body["messages"][-1]["content"].split("\n\n", 1)[-1]
    return " ".join(reversed(text.split()))


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> tuple[Path, ChatServer, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("staged")
    db = tmp / "staged.sqlite"
    server = ChatServer(paraphraser).start()
    proc = evalrun("run", "--pack", "watermark_robustness", "--model", "embedded", "--watermark", "kgw",
                   "--attack", "none", "--attack", "swap:p=0.1", "--attack", "paraphrase:openai:para-model",
                   "--base-url", server.base_url, "--max-tokens", "24", "--temperature", "1", "--select",
                   "rewrite_001 or summarize_002", "--out", str(db), "--no-progress", cwd=tmp)
    yield db, server, proc
    server.stop()


def test_attacked_texts_and_their_token_ids_are_stored_before_grading(staged) -> None:
    db, server, proc = staged
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "4 attacked texts stored" in proc.stdout
    rows = q(db, "SELECT r.attack, r.tokenizer_hash, r.graded_at, t.text, t.token_ids_json, t.tokenizer_hash,"
                 " t.created_at, t.seed, r.raw_output, r.attacked_output FROM results r"
                 " JOIN transforms t USING (transform_key)")
    assert sorted(r[0] for r in rows) == ["paraphrase:openai:para-model"] * 2 + ["swap:p=0.1"] * 2
    for attack, gen_hash, graded_at, text, ids, t_hash, created, seed, raw, attacked in rows:
        assert t_hash == gen_hash and len(json.loads(ids)) > 0  # re-tokenized, same tokenizer
        assert created < graded_at and attacked == text
        if attack.startswith("paraphrase"):
            assert text == " ".join(reversed(raw.split())) and seed is None
        else:
            assert seed is not None and text != raw
    # unattacked rows keep the generated ids; the paraphrase model was asked once per output
    assert q(db, "SELECT COUNT(*) FROM results WHERE attack = 'none' AND transform_key IS NULL") == [(2,)]
    assert len(server.records()) == 2
    assert all(rec.body["temperature"] == 0.0 for rec in server.records())


def test_regrade_reads_the_stored_attacks_and_calls_no_model(staged, tmp_path: Path) -> None:
    db, server, _ = staged
    before = len(server.records())
    labels = q(db, "SELECT item_key, label, attacked_output FROM results ORDER BY 1")
    proc = evalrun("regrade", "--db", str(db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "regraded 6 results, 0 changed" in proc.stdout
    assert len(server.records()) == before
    assert q(db, "SELECT item_key, label, attacked_output FROM results ORDER BY 1") == labels


def test_a_rerun_reuses_every_stage(staged, tmp_path: Path) -> None:
    db, server, _ = staged
    before = len(server.records())
    proc = evalrun("run", "--pack", "watermark_robustness", "--model", "embedded", "--watermark", "kgw",
                   "--attack", "none", "--attack", "swap:p=0.1", "--attack", "paraphrase:openai:para-model",
                   "--base-url", server.base_url, "--max-tokens", "24", "--temperature", "1", "--select",
                   "rewrite_001 or summarize_002", "--out", str(db), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "attacked texts stored" not in proc.stdout and "results generated" not in proc.stdout
    assert len(server.records()) == before
    assert q(db, "SELECT COUNT(*) FROM transforms") == [(4,)]


def test_metrics_json_is_written_by_run_report_and_export(staged, tmp_path: Path) -> None:
    db, _, proc = staged
    beside = db.with_name("staged.metrics.json")
    assert f"metrics: {beside}" in proc.stdout
    records = json.loads(beside.read_text())
    fields = {"pack", "metric", "params", "value", "n", "ci_low", "ci_high", "model", "watermark", "attack"}
    assert records and all(set(r) == fields for r in records)
    means = {r["attack"]: r for r in records if r["metric"] == "mean_score"}
    assert set(means) == {"none", "swap:p=0.1", "paraphrase:openai:para-model"}
    assert all(r["n"] == 2 and r["value"] == 0.0 for r in means.values())  # the 5M model drops the WMID
    assert evalrun("report", "--db", str(db), "--out", str(tmp_path / "rep"), cwd=tmp_path).returncode == 0
    assert json.loads((tmp_path / "rep" / "metrics.json").read_text()) == records
    assert evalrun("export", "--db", str(db), "--format", "csv", "--out", str(tmp_path / "x.csv"),
                   cwd=tmp_path).returncode == 0
    assert json.loads((tmp_path / "x.csv.metrics.json").read_text()) == records


@pytest.mark.slow
def test_a_run_killed_in_the_transform_stage_resumes_there(tmp_path: Path, make_pack) -> None:
    pack = make_pack(cases=[{"id": f"c{i:02d}", "word": f"word{i:02d}", "kind": "a"} for i in range(12)])
    db = tmp_path / "kill.sqlite"
    with ChatServer(paraphraser, latency_s=0.4) as server:
        cmd = [sys.executable, "-m", "evalrun.cli", "run", "--pack", str(pack), "--model", "reference",
               "--attack", "paraphrase:openai:slow-model", "--base-url", server.base_url, "--concurrency", "1",
               "--out", str(db), "--no-progress"]
        proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if q(db, "SELECT COUNT(*) FROM transforms")[0][0] >= 3:
                    break
            except sqlite3.OperationalError:
                pass
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kept = dict(q(db, "SELECT transform_key, text FROM transforms WHERE error IS NULL"))
        assert 3 <= len(kept) < 12, f"kill did not land in the transform stage ({len(kept)} stored)"
        assert q(db, "SELECT COUNT(*) FROM results WHERE raw_output IS NOT NULL") == [(12,)]
        while server.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)
        server.reset_counters()
        done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        asked = [rec.prompt for rec in server.records()]
    assert len(asked) == 12 - len(kept) and len(set(asked)) == len(asked)
    after = dict(q(db, "SELECT transform_key, text FROM transforms"))
    assert len(after) == 12 and all(after[k] == v for k, v in kept.items())
    assert q(db, "SELECT COUNT(*) FROM results WHERE label = 'OK'") == [(12,)]  # one word reversed is itself
    assert q(db, "SELECT COUNT(*), COUNT(graded_at) FROM results") == [(12, 12)]


@pytest.mark.slow
def test_grades_carry_evidence_from_every_stage(tmp_path: Path, make_pack) -> None:
    pack = make_pack(grader=EVIDENCE_GRADER, reference=None, cases=[
        {"id": "c1", "word": "alpha", "kind": "a"}, {"id": "c2", "word": "beta", "kind": "b"}])
    db = tmp_path / "ev.sqlite"

    def judge(body) -> str:
        return "Grade: 73" if "Response:" in body["messages"][-1]["content"] else echo_responder(body)

    with ChatServer(judge) as server:
        run = evalrun("run", "--pack", str(pack), "--model", "embedded", "--attack", "none", "--attack",
                      "lowercase", "--max-tokens", "8", "--out", str(db), "--no-progress", cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-2000:]
        metadata = [json.loads(m) for (m,) in q(db, "SELECT metadata_json FROM results ORDER BY attack")]
        assert [m["attack"] for m in metadata] == ["lowercase", "lowercase", "none", "none"]
        assert all(m["tokens"] > 0 and m["token_note"] is None and m["rating"] is None for m in metadata)
        proc = evalrun("judge", "--db", str(db), "--judge", "openai:judge-model", "--method", "rating",
                       "--base-url", server.base_url, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "judged 4 results with rating by openai:judge-model: 4 asked" in proc.stdout
        raw = q(db, "SELECT raw_answer, method, judge FROM judgements")
        assert raw == [("Grade: 73", "rating", "openai:judge-model")] * 4
        prompt = server.records()[0].body["messages"]
        assert prompt[0]["content"].startswith("You are given a prompt and a response, and you provide a grade")
        assert prompt[1]["content"].startswith("Prompt: Say ")
        again = evalrun("judge", "--db", str(db), "--judge", "openai:judge-model", "--method", "rating",
                        "--base-url", server.base_url, cwd=tmp_path)
        assert "0 asked, 4 already answered" in again.stdout and len(server.records()) == 4
    # the grader sees the parsed answers when regrading; nothing is asked again
    proc = evalrun("regrade", "--db", str(db), "--packs-dir", str(pack.parent), cwd=tmp_path)
    assert proc.returncode == 0 and "regraded 4 results" in proc.stdout, proc.stdout + proc.stderr
    assert {json.loads(m)["rating"] for (m,) in q(db, "SELECT metadata_json FROM results")} == {0.73}
    # evidence travels into exports and the per-case appendix
    assert evalrun("export", "--db", str(db), "--format", "jsonl", "--out", str(tmp_path / "x.jsonl"),
                   cwd=tmp_path).returncode == 0
    exported = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert all(e["metadata"]["rating"] == 0.73 and "metadata_json" not in e for e in exported)
    assert evalrun("export", "--db", str(db), "--format", "csv", "--out", str(tmp_path / "x.csv"),
                   cwd=tmp_path).returncode == 0
    with (tmp_path / "x.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["metadata.rating"] for r in rows} == {"0.73"} and rows[0]["metadata.words"].startswith("[")
    assert evalrun("report", "--db", str(db), "--out", str(tmp_path / "rep"), cwd=tmp_path).returncode == 0
    # the evidence is in report.html (report.md keeps one short row per result and points there)
    assert "rating=0.73" in (tmp_path / "rep" / "report.html").read_text()


@pytest.mark.slow
def test_api_outputs_without_a_tokenizer_say_why_there_are_no_ids(tmp_path: Path, make_pack) -> None:
    pack = make_pack(grader=EVIDENCE_GRADER, reference=None, cases=[{"id": "c1", "word": "alpha", "kind": "a"}])
    db = tmp_path / "api.sqlite"
    from evalrun.model.embedded import embedded_model_path

    with ChatServer() as server:
        base = ["run", "--pack", str(pack), "--model", "openai:m", "--base-url", server.base_url, "--attack",
                "lowercase", "--no-progress"]
        assert evalrun(*base, "--out", str(db), cwd=tmp_path).returncode == 0
        assert evalrun(*base, "--out", str(tmp_path / "tok.sqlite"), "--tokenizer", str(embedded_model_path()),
                       cwd=tmp_path).returncode == 0
    [note] = [json.loads(m)["token_note"] for (m,) in q(db, "SELECT metadata_json FROM results")]
    assert note.startswith("no tokenizer for openai:m: pass --tokenizer PATH")
    [(tokens, note)] = [(json.loads(m)["tokens"], json.loads(m)["token_note"])
                        for (m,) in q(tmp_path / "tok.sqlite", "SELECT metadata_json FROM results")]
    assert tokens > 0 and note is None
