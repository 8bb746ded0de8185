"""``evalrun.cli.detect.detect_main`` on token files and on text with a local tokenizer."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from evalrun.cli.detect import detect_main
from evalrun.watermark.registry import parse_watermark

VOCAB = 500
KEY = "cli-secret-0123456789"
SPEC = "kgw:gamma=0.25,delta=4"


def _run(argv: list[str]) -> tuple[int, list[dict], str]:
    out, err = io.StringIO(), io.StringIO()
    rc = detect_main(argv, stdout=out, stderr=err)
    return rc, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def _watermarked(length: int = 120) -> list[int]:
    scheme = parse_watermark(SPEC)
    proc = scheme.logits_processor(KEY, VOCAB, temperature=1.0, seed=0)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (1, 4), generator=g)
    for _ in range(length):
        scores = proc(ids, torch.randn(1, VOCAB, generator=g))
        ids = torch.cat([ids, torch.multinomial(torch.softmax(scores, -1), 1, generator=g)], 1)
    return ids[0, 4:].tolist()


def test_tokens_file(tmp_path: Path) -> None:
    plain = np.random.default_rng(0).integers(0, VOCAB, 120).tolist()
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "wm", "token_ids": _watermarked()}) + "\n"
                    + json.dumps({"token_ids": plain}) + "\n")
    rc, rows, err = _run(["--watermark", SPEC, "--key", KEY, "--tokens", str(path),
                          "--vocab-size", str(VOCAB)])
    assert rc == 0 and err == ""
    assert rows[0]["id"] == "wm" and rows[0]["p_value"] < 1e-6
    assert rows[1]["p_value"] > 1e-3 and "id" not in rows[1]
    for row in rows:
        assert {"num_tokens_scored", "score", "p_value", "num_green_tokens", "z_score"} <= set(row)
    assert KEY not in json.dumps(rows)


def test_tokens_file_with_bad_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"token_ids": [1, 2, 3]}\n{oops\n{"token_ids": [1, 999]}\n'
                    '{"token_ids": "x"}\n{"id": 7, "token_ids": [4, 5, 6]}\n')
    monkeypatch.setenv("EVALRUN_WATERMARK_KEY", KEY)
    rc, rows, err = _run(["--watermark", "exp", "--tokens", str(path), "--vocab-size", str(VOCAB)])
    assert rc == 2
    assert len(rows) == 2 and rows[1]["id"] == 7
    lines = err.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"{path}:2:")
    assert lines[1].startswith(f"{path}:3:") and "999" in lines[1]
    assert lines[2].startswith(f"{path}:4:")
    assert "num_green_tokens" not in rows[0]


def test_tokens_file_read_fast_or_by_json_gives_the_same_results(tmp_path: Path) -> None:
    """Lines the fast reader takes and lines it leaves to json (escapes, odd spacing, ids
    beyond int64, leading zeros, floats) are detected alike and reported by line."""
    rng = np.random.default_rng(1)
    rows = [rng.integers(0, VOCAB, n).tolist() for n in (30, 0, 50, 7)]
    plain = [json.dumps({"id": i, "token_ids": r}) for i, r in enumerate(rows)]
    odd = ['{"id": "a\\"b", "token_ids": %s}' % json.dumps(rows[0]),
           '{"token_ids" :[ %s ]  , "id":1}' % " ,\t".join(map(str, rows[2])),
           '{"token_ids": [1, 99999999999999999999]}', '{"token_ids": [1, 007]}',
           '{"token_ids": [1, 2.0]}', '{"id": 3, "token_ids": %s}' % json.dumps(rows[3])]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(plain + odd) + "\n")
    rc, got, err = _run(["--watermark", SPEC, "--key", KEY, "--tokens", str(path),
                         "--vocab-size", str(VOCAB)])
    scheme = parse_watermark(SPEC)
    want = [scheme.detect(r, KEY, VOCAB).as_json() for r in rows + [rows[0], rows[2], rows[3]]]
    assert [{k: v for k, v in row.items() if k != "id"} for row in got] == want
    assert [row.get("id") for row in got] == [0, 1, 2, 3, 'a"b', 1, 3]
    errors = err.strip().splitlines()
    assert rc == 2 and [line.split(":")[1] for line in errors] == ["7", "8", "9"]
    assert "outside the vocabulary" in errors[0] and "bad JSON" in errors[1]
    assert "expected a list of integers" in errors[2]


def test_missing_key_and_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALRUN_WATERMARK_KEY", raising=False)
    rc, rows, err = _run(["--watermark", "kgw", "--tokens", str(tmp_path / "x.jsonl"),
                          "--vocab-size", "10"])
    assert rc == 2 and rows == [] and "EVALRUN_WATERMARK_KEY" in err
    rc, rows, err = _run(["--watermark", "kgw", "--key", "k", "--tokens",
                          str(tmp_path / "x.jsonl"), "--vocab-size", "10"])
    assert rc == 2 and "x.jsonl" in err and len(err.strip().splitlines()) == 1
    rc, _, err = _run(["--watermark", "kgw:gamma=2", "--key", "k", "--tokens", "f",
                       "--vocab-size", "10"])
    assert rc == 2 and "gamma" in err


def test_text_with_tokenizer(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = [f"w{i}" for i in range(VOCAB - 1)]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok_path = tmp_path / "tokenizer.json"
    tok.save(str(tok_path))
    ids = [t if t > 0 else 1 for t in _watermarked()]
    text_path = tmp_path / "text.txt"
    text_path.write_text(" ".join(words[i - 1] for i in ids))
    rc, rows, err = _run(["--watermark", SPEC, "--key", KEY, "--text", str(text_path),
                          "--tokenizer", str(tok_path)])
    assert rc == 0, err
    assert len(rows) == 1 and rows[0]["num_tokens_scored"] > 100
    assert rows[0]["p_value"] < 1e-4
    rc, rows, err = _run(["--watermark", SPEC, "--key", KEY, "--text", str(text_path)])
    assert rc == 2 and "--tokenizer" in err


def test_detect_reports_bad_ids_backend_and_tokenizer_as_one_line_errors(tmp_path) -> None:
    from evalrun.cli.main import main

    tokens = tmp_path / "ids.jsonl"
    tokens.write_text('{"token_ids": [1, 2, 3, 4, 5, 6]}\n{"token_ids": [1, 99999]}\n')
    import contextlib
    import io

    err = io.StringIO()
    out = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(["detect", "--watermark", "unigram", "--key", "7", "--tokens", str(tokens), "--vocab-size", "100"])
    assert code == 2 and len(out.getvalue().splitlines()) == 1
    assert f"{tokens}:2:" in err.getvalue() and "Traceback" not in err.getvalue()
    with contextlib.redirect_stderr(err):
        assert main(["detect", "--watermark", "unigram", "--key", "7", "--tokens", str(tokens),
                     "--vocab-size", "100000", "--backend", "numpy"]) == 2
    assert "--backend applies to the native schemes" in err.getvalue()
    bad = tmp_path / "tok.json"
    bad.write_text("{not a tokenizer")
    (tmp_path / "t.txt").write_text("hello")
    with contextlib.redirect_stderr(err):
        assert main(["detect", "--watermark", "kgw", "--key", "7", "--text", str(tmp_path / "t.txt"),
                     "--tokenizer", str(bad)]) == 2
    assert f"--tokenizer {bad}: cannot load" in err.getvalue()
    with contextlib.redirect_stderr(err):
        assert main(["detect", "--watermark", "kgw:seeding=lefthash", "--key", "not-a-number",
                     "--tokens", str(tokens), "--vocab-size", "100"]) == 2
    assert "not-a-number" not in err.getvalue()


def test_a_weak_key_is_warned_about_once_without_blocking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"token_ids": _watermarked(40)}) + "\n")
    args = ["--watermark", SPEC, "--tokens", str(path), "--vocab-size", str(VOCAB)]
    rc, rows, err = _run([*args, "--key", "my-secret-key"])
    assert rc == 0 and len(rows) == 1
    (line,) = err.splitlines()
    assert line.startswith("evalrun: warning: the watermark key (--key) is easy to guess: shorter than 16")
    assert "evalrun key new" in line and "my-secret-key" not in line
    monkeypatch.setenv("EVALRUN_WATERMARK_KEY", "public-example-key")
    rc, rows, err = _run(args)
    assert rc == 0 and len(rows) == 1 and "($EVALRUN_WATERMARK_KEY)" in err and "public-example-key" not in err
    # a refused command stays one line: no warning before its error
    rc, rows, err = _run(["--watermark", SPEC, "--key", "k", "--tokens", str(tmp_path / "absent.jsonl"),
                          "--vocab-size", str(VOCAB)])
    assert rc == 2 and len(err.splitlines()) == 1 and "warning" not in err


def test_the_embedded_tokenizer_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--tokenizer embedded`` and ``--model embedded`` find the embedded model's tokenizer
    wherever the command runs, and give the ids (and p-value) of the same text alike."""
    from evalrun.model.embedded import embedded_model_path
    from evalrun.model.tokenization import load_tokenizer

    monkeypatch.chdir(tmp_path)
    text = "It is a truth universally acknowledged, that a single man in possession of a good fortune."
    (tmp_path / "t.txt").write_text(text)
    base = ["--watermark", "kgw", "--key", KEY, "--text", "t.txt"]
    rc, by_name, err = _run([*base, "--tokenizer", "embedded"])
    assert rc == 0 and err == "", err
    rc, by_model, err = _run([*base, "--model", "embedded"])
    assert rc == 0 and by_model == by_name
    ids = load_tokenizer(str(embedded_model_path())).encode(text)
    assert by_name[0]["num_tokens_scored"] == len(ids) - 1  # kgw's first token has no context
    (tmp_path / "ids.jsonl").write_text(json.dumps({"token_ids": ids}) + "\n")
    rc, by_ids, err = _run(["--watermark", "kgw", "--key", KEY, "--tokens", "ids.jsonl", "--model", "embedded"])
    assert rc == 0 and by_ids == by_name  # the model's logit width (8192) without --vocab-size
    rc, _, err = _run(base)
    assert rc == 2 and "--text needs --tokenizer PATH (or embedded), or --model SPEC" in err
