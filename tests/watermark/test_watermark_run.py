"""Watermarks end to end: the embedded model generates through `evalrun run` with every scheme,
the store keeps token ids and the tokenizer hash, and detection finds each watermark -- from a
pack grader (the grading context) and from `evalrun detect` on the stored ids and text."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalrun.model.embedded import embedded_model_path

SCHEMES = [
    "kgw:gamma=0.25,delta=4",
    "kgw:randomness=minhash,context=3,delta=4",
    "kgw:seeding=lefthash,delta=4",
    "kgw:seeding=selfhash,delta=4",
    "unigram:delta=4",
    "exp",
    "binary",
    "its:permutations=200",
]
KEY = "424242"  # compat kgw takes the reference's integer hash key
THRESHOLD = 0.02  # MarkMyWords measures watermark size at p = 0.02

DETECTING_GRADER = '''
from evalrun.pack.grade import Grade
from evalrun.watermark import parse_watermark

def grade(case, output, context):
    if context.watermark == "none":
        return Grade(1.0, "UNMARKED", "no watermark requested")
    scheme = parse_watermark(context.watermark)
    found = scheme.detect(list(context.token_ids), context.key, context.extra["vocab_size"])
    label = "DETECTED" if found.p_value <= 0.02 else "MISSED"
    return Grade(1.0 if label == "DETECTED" else 0.0, label,
                 f"p={found.p_value:.3g} over {found.num_tokens_scored} tokens")
'''

OPENINGS = [
    "It was a fine morning at Longbourn, and Elizabeth",
    "Mrs. Jennings had no sooner entered the drawing-room than",
    "Emma could not but feel that her friend",
    "The letter which Anne received that evening",
]


def _pack(root: Path) -> Path:
    pack = root / "wm_detect"
    (pack / "cases").mkdir(parents=True)
    (pack / "pack.toml").write_text(
        'name = "wm_detect"\nversion = "1"\ndescription = "detect the run\'s watermark"\n'
        'labels = ["DETECTED", "MISSED", "UNMARKED"]\npass_score = 1.0\nprompt_template = "{opening}"\n'
        "[defaults]\ntemperature = 1.0\nmax_tokens = 96\n")
    (pack / "grader.py").write_text(DETECTING_GRADER)
    for i, opening in enumerate(OPENINGS):
        (pack / "cases" / f"c{i}.json").write_text(json.dumps({"id": f"c{i}", "opening": opening}))
    return pack


@pytest.mark.slow
def test_every_scheme_is_detected_from_the_store_and_by_evalrun_detect(tmp_path: Path) -> None:
    pack = _pack(tmp_path)
    db = tmp_path / "wm.sqlite"
    args = [sys.executable, "-m", "evalrun.cli", "run", "--pack", str(pack), "--model", "embedded",
            "--watermark", "none", "--out", str(db), "--no-progress"]
    for spec in SCHEMES:
        args += ["--watermark", spec]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "EVALRUN_WATERMARK_KEY": KEY})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT watermark, label, reason, output_tokens_json, tokenizer_hash, raw_output"
                        " FROM results").fetchall()
    conn.close()
    assert len(rows) == len(OPENINGS) * (len(SCHEMES) + 1)
    assert all(r[3] and r[4] for r in rows), "token ids and tokenizer hash are stored for every output"
    by_scheme: dict[str, list[str]] = {}
    for watermark, label, reason, *_ in rows:
        by_scheme.setdefault(watermark, []).append(f"{label} ({reason})")
    for watermark, labels in by_scheme.items():
        expected = "UNMARKED" if watermark == "none" else "DETECTED"
        assert all(lbl.startswith(expected) for lbl in labels), (watermark, labels)
    conn = sqlite3.connect(db)
    [(argv, config)] = conn.execute("SELECT argv, config_json FROM runs").fetchall()
    conn.close()
    assert KEY not in argv + config

    # evalrun detect on the stored token ids, and on the text through the model's tokenizer
    model_dir = embedded_model_path()
    unmarked = [json.loads(r[3]) for r in rows if r[0] == "none"]
    for spec in SCHEMES:
        canon = canonical_of(by_scheme, spec)
        ids = [json.loads(r[3]) for r in rows if r[0] == canon]
        tokens_file = tmp_path / "ids.jsonl"
        tokens_file.write_text("".join(json.dumps({"id": i, "token_ids": t}) + "\n"
                                       for i, t in enumerate(ids + unmarked)))
        out = subprocess.run([sys.executable, "-m", "evalrun.cli", "detect", "--watermark", canon, "--key", KEY,
                              "--tokens", str(tokens_file), "--vocab-size", "8192"],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        results = [json.loads(line) for line in out.stdout.splitlines()]
        assert all(r["p_value"] <= THRESHOLD for r in results[:len(ids)]), (canon, results)
        assert all(r["p_value"] > 1e-4 for r in results[len(ids):]), (canon, results)
        assert KEY not in out.stdout + out.stderr
    text = next(r[5] for r in rows if r[0] == canonical_of(by_scheme, SCHEMES[0]))
    text_file = tmp_path / "suspect.txt"
    text_file.write_text(text)
    out = subprocess.run([sys.executable, "-m", "evalrun.cli", "detect", "--watermark", SCHEMES[0], "--key", KEY,
                          "--text", str(text_file), "--tokenizer", str(model_dir)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    verdict = json.loads(out.stdout)
    assert verdict["p_value"] <= THRESHOLD and verdict["z_score"] > 2 and verdict["num_green_tokens"] > 0


def canonical_of(by_scheme: dict[str, list[str]], spec: str) -> str:
    """The stored (canonical) form of a watermark spec as given on the command line."""
    from evalrun.watermark import parse_watermark

    return next(w for w in by_scheme if w == parse_watermark(spec).spec.canonical())
