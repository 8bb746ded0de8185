"""The Python API (docs/python-api.md): runs in a fresh interpreter, as a notebook would make
them, and detection and watermarking in-process."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import evalrun
from evalrun.model.embedded import embedded_model_path

KEY = "5b0e7c1a9f3d4e6b8a2c0d1e3f5a7b9c"
SPEC = "kgw:gamma=0.5,delta=2"

#: the public names: removing one breaks users, so it must fail here first
PUBLIC = {"AGGREGATES", "ATTACKS", "JUDGES", "PROVIDERS", "SCHEMES", "Detection", "EvalrunError", "Grade",
          "GradeContext", "Judgement", "Registry", "Run", "Store", "Table", "Watermark", "__version__", "detect",
          "detect_many", "open", "run", "text_attack", "watermark"}


def session(code: str, cwd: Path) -> dict:
    """Run ``code`` in a fresh Python (no key in the environment); it prints one JSON object last."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={k: v for k, v in os.environ.items() if k != "EVALRUN_WATERMARK_KEY"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "stdout": proc.stdout, "stderr": proc.stderr}


def test_public_names_stay_and_resolve() -> None:
    assert set(evalrun.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(evalrun, name) is not None, name
    assert (Path(evalrun.__file__).parent / "py.typed").is_file()


def test_run_reads_back_and_resumes_like_the_command_line(tmp_path: Path) -> None:
    out = session("""
        import json, os, evalrun
        r = evalrun.run(pack="watermark_robustness", model="reference", out="x.sqlite")
        store = evalrun.open("x.sqlite")
        rows = store.results()
        df = rows.to_pandas()
        again = evalrun.run(pack="watermark_robustness", model="reference", out="x.sqlite", no_progress=True)
        print(json.dumps({"status": r.status, "code": r.exit_code, "n": len(rows), "shape": list(df.shape),
                          "run_rows": len(r.results()), "passed": len(store.results(label="PASS")),
                          "runs": [x["run_id"] for x in store.runs()], "ids": [r.run_id, again.run_id],
                          "same": sorted(x["result_id"] for x in again.results())
                                  == sorted(x["result_id"] for x in rows),
                          "metrics": sorted({m["metric"] for m in r.metrics()}),
                          "cwd_db": str(r.db), "report": str(r.report("rep"))}))
        """, tmp_path)
    assert out["status"] == "finished" and out["code"] == 0
    assert out["n"] == 50 and out["shape"][0] == 50 and out["run_rows"] == 50 and out["passed"] == 50
    assert sorted(out["runs"]) == sorted(out["ids"]) and out["same"]  # the second run reused every result
    assert out["stdout"].count("results generated") == 1  # the second run generated nothing
    assert {"mean_score", "rate", "error_rate"} <= set(out["metrics"]) and out["cwd_db"] == "x.sqlite"
    assert out["report"] == "rep/report.md" and "watermark_robustness" in (tmp_path / out["report"]).read_text()
    assert (tmp_path / "rep" / "report.html").is_file() and (tmp_path / "rep" / "metrics.json").is_file()
    # the command line resumes what Python ran: nothing generated again
    cli = subprocess.run([sys.executable, "-m", "evalrun.cli", "run", "--pack", "watermark_robustness", "--model",
                          "reference", "--out", "x.sqlite", "--no-progress"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert cli.returncode == 0 and "results generated" not in cli.stdout, cli.stdout + cli.stderr
    with sqlite3.connect(tmp_path / "x.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 50
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3


def test_run_keeps_the_key_out_of_the_store_and_the_environment(tmp_path: Path) -> None:
    out = session(f"""
        import json, os, evalrun
        r = evalrun.run(pack="mmw_book_reports", model="embedded", watermark=["{SPEC}"], max_tokens=20,
                        select="book-001", key="{KEY}", out="k.sqlite", no_progress=True)
        print(json.dumps({{"status": r.status, "env": os.environ.get("EVALRUN_WATERMARK_KEY"),
                          "labels": [x["label"] for x in r.results(watermark="{SPEC}")]}}))
        """, tmp_path)
    assert out["status"] == "finished" and out["env"] is None and out["labels"] == ["DETECTED"]
    assert KEY.encode() not in (tmp_path / "k.sqlite").read_bytes() and KEY not in out["stdout"] + out["stderr"]
    with sqlite3.connect(tmp_path / "k.sqlite") as conn:
        argv = conn.execute("SELECT argv FROM runs").fetchone()[0]
    assert argv.startswith('["evalrun.run", "--pack", "mmw_book_reports"') and KEY not in argv


def test_bad_options_are_the_command_lines_one_line_errors(tmp_path: Path) -> None:
    out = session("""
        import json, evalrun
        said = []
        for kwargs in ({"modle": "reference"}, {"model": "reference", "max_tokens": -3},
                       {"model": "reference", "max_tokens": [1, 2]}, {"model": "nosuch:x"}):
            try:
                evalrun.run(pack="watermark_robustness", out="e.sqlite", **kwargs)
            except evalrun.EvalrunError as exc:
                said.append(str(exc))
        for pack in ("no_such_pack",):
            try:
                evalrun.run(pack=pack, model="reference", out="e.sqlite")
            except evalrun.EvalrunError as exc:
                said.append(str(exc))
        for db in ("missing.sqlite",):
            try:
                evalrun.open(db)
            except evalrun.EvalrunError as exc:
                said.append(str(exc))
        print(json.dumps({"said": said}))
        """, tmp_path)
    said = out["said"]
    assert len(said) == 6 and all("\n" not in s for s in said)
    assert said[0].startswith("evalrun.run: unknown option 'modle'; expected one of ") and "max_tokens" in said[0]
    assert said[1] == "--max-tokens -3: must be in [1, 1,000,000]"
    assert "max_tokens=[1, 2]: expected one value" in said[2]
    assert "nosuch" in said[3] and said[4].startswith("--pack no_such_pack: unknown pack")
    assert "missing.sqlite" in said[5]
    assert not (tmp_path / "e.sqlite").exists()


@pytest.fixture(scope="module")
def embedded() -> tuple[object, object]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = embedded_model_path()
    return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)


def _generate(embedded: tuple, wm: evalrun.Watermark, key: str, seed: int, tokens: int = 60) -> list[int]:
    tokenizer, model = embedded
    torch.manual_seed(seed)
    prompt = tokenizer("Write a book report about Emma.", return_tensors="pt")
    out = model.generate(**prompt, do_sample=True, top_k=0, max_new_tokens=tokens, pad_token_id=0,
                         logits_processor=[wm.logits_processor(key, model.config.vocab_size)])
    return out[0, prompt["input_ids"].shape[1]:].tolist()


def test_watermark_a_generate_call_and_detect_it(embedded: tuple) -> None:
    tokenizer, model = embedded
    wm = evalrun.watermark(SPEC)
    assert wm.spec.startswith("kgw:context=1,delta=2.0,gamma=0.5") and repr(wm) == f"evalrun.watermark({wm.spec!r})"
    ids = _generate(embedded, wm, KEY, seed=0)
    width = model.config.vocab_size
    found = wm.detect(ids, KEY, vocab_size=width, prefixes=True)
    assert found.p_value <= 0.02 and found.num_tokens_scored > 40
    assert len(found.extra["prefix_p_values"]) == len(ids) and found.extra["prefix_p_values"][-1] == found.p_value
    assert wm.detect(ids, "another-key-" + "0" * 20, vocab_size=width).p_value > 0.02
    # the text detects as its ids do, through the embedded tokenizer or the model's
    text = tokenizer.decode(ids)
    by_text = evalrun.detect(text, watermark=SPEC, key=KEY, tokenizer="embedded")
    assert by_text.p_value <= 0.02 and evalrun.detect(text, watermark=SPEC, key=KEY, model="embedded") == by_text
    # under other keys the text is an ordinary one: p-values spread over (0, 1]
    p = np.array([wm.detect(ids, f"other-key-{i:02d}-0123456789", vocab_size=width).p_value for i in range(8)])
    assert (p > 0.02).sum() >= 7 and p.max() > 0.3


def test_detect_many_is_detect_text_by_text_and_reads_the_model_when_needed(embedded: tuple) -> None:
    ids = _generate(embedded, evalrun.watermark("unbiased"), KEY, seed=1, tokens=40)
    rng = np.random.default_rng(0)
    texts = [ids, rng.integers(0, 8192, 40).tolist()]
    many = evalrun.detect_many(texts, watermark="unbiased", key=KEY, model="embedded")
    assert [evalrun.detect(t, watermark="unbiased", key=KEY, model="embedded") for t in texts] == many
    assert many[0].p_value <= 0.02 < many[1].p_value
    with pytest.raises(evalrun.EvalrunError, match="reads the generating model's logits.*model=SPEC"):
        evalrun.detect(ids, watermark="unbiased", key=KEY, vocab_size=8192)


def test_detect_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALRUN_WATERMARK_KEY", raising=False)
    with pytest.raises(evalrun.EvalrunError, match="no watermark key: pass key=... or set EVALRUN_WATERMARK_KEY"):
        evalrun.detect([1, 2, 3], watermark=SPEC, vocab_size=100)
    with pytest.raises(evalrun.EvalrunError, match="a text needs tokenizer=PATH"):
        evalrun.detect("some text", watermark=SPEC, key=KEY)
    with pytest.raises(evalrun.EvalrunError, match="token ids need vocab_size=N"):
        evalrun.detect([1, 2, 3], watermark=SPEC, key=KEY)
    with pytest.raises(evalrun.EvalrunError, match="'none' has no processor"):
        evalrun.watermark("none")
    with pytest.raises(evalrun.EvalrunError, match="gamma"):
        evalrun.watermark("kgw:gamma=2")
    monkeypatch.setenv("EVALRUN_WATERMARK_KEY", KEY)
    assert evalrun.detect([1, 2, 3, 4], watermark=SPEC, vocab_size=100).num_tokens_scored == 3


def test_to_pandas_without_pandas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(evalrun.EvalrunError, match=r'pip install "evalrun\[notebook\]"'):
        evalrun.Table([{"a": 1}]).to_pandas()


def test_run_and_watermark_are_also_their_sub_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    import evalrun.run.options
    import evalrun.watermark.registry

    assert callable(evalrun.run) and callable(evalrun.watermark)
    assert evalrun.run.options.BY_NAME["db"].cli_flag == "--out"
    assert evalrun.watermark.registry.KEY_ENV == "EVALRUN_WATERMARK_KEY"
    monkeypatch.setattr("evalrun.run.options.MAX_WORKERS", 3)
    assert sys.modules["evalrun.run.options"].MAX_WORKERS == 3
    from evalrun import run, watermark

    assert run is evalrun.run and isinstance(watermark(SPEC), evalrun.Watermark)
    assert "run" in (evalrun.run.__doc__ or "") and "options" in dir(evalrun.run)
