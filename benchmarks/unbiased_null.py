"""Unbiased's p-value on the embedded model: false-positive rate and power of the paper's union
bound, of evalrun's default (the bound of the queries' mean e-value) and of the exact
permutation test, with the seconds each costs per text.

It generates the 100 book reports of ``mmw_book_reports`` without a watermark and under
``unbiased`` (``--tokens`` each), keeps the first ``--texts`` of each and detects every text
under each null: FPR is the share of unwatermarked texts at p <= 0.02, power the share of
watermarked texts at p <= 0.02 after 25, 50, 100 and all tokens (prefix p-values), each with
its Wilson interval. The permutation test runs on the first ``--permuted`` texts of each kind
only (it costs ``--permutations`` scoring passes a text). Seconds per text include the model's
forward pass, after one warm-up detection (the scoring memo is emptied before each null).

    python benchmarks/unbiased_null.py [--texts 100] [--permuted 20] [--permutations 49]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from evalrun.metrics.stats import wilson_interval
from evalrun.model.providers import parse_model
from evalrun.model.token_logits import model_logits
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes import unbiased

KEY = "unbiased-null-benchmark"
ALPHA = 0.02
LENGTHS = (25, 50, 100, None)


def generate(texts: int, tokens: int, out: Path) -> dict[str, list[list[int]]]:
    """Token ids of ``texts`` outputs per watermark (``none``, ``unbiased``), from the CLI."""
    store = out / "unbiased.sqlite"
    subprocess.run([sys.executable, "-m", "evalrun.cli", "run", "--pack", "mmw_book_reports",
                    "--watermark", "none", "--watermark", "unbiased", "--attack", "none",
                    "--max-tokens", str(tokens), "--key", KEY, "--out", str(store),
                    "--no-progress"], check=True, cwd=out, stdout=subprocess.DEVNULL)
    rows = sqlite3.connect(store).execute(
        "SELECT watermark, output_tokens_json FROM results ORDER BY case_id").fetchall()
    ids: dict[str, list[list[int]]] = {"none": [], "unbiased": []}
    for watermark, tokens_json in rows:
        ids["none" if watermark in (None, "", "none") else "unbiased"].append(json.loads(tokens_json))
    return {kind: rows[:texts] for kind, rows in ids.items()}


def rate(hits: int, n: int) -> str:
    est = wilson_interval(hits, n)
    return f"{hits}/{n} ({est.low:.2f}-{est.high:.2f})"


def measure(spec: str, texts: list[list[int]], logits: object, union: bool) -> tuple[list[np.ndarray], float]:
    """Prefix p-values of every text under ``spec`` (the union bound recomputed from the best
    prefix sums when ``union``), and the seconds per text."""
    scheme = parse_watermark(spec)
    vocab = logits.vocab_size  # type: ignore[attr-defined]
    scheme.detect(texts[0], KEY, vocab, logits=logits)  # warm-up: the model's first pass is slower
    unbiased._SCORED.clear()  # noqa: SLF001 - every null pays for its own scoring
    out, start = [], time.perf_counter()
    for ids in texts:
        p = scheme.prefix_p_values(ids, KEY, vocab, logits=logits)
        if union:
            scored = scheme._score(ids, KEY, vocab, logits)  # noqa: SLF001 - the same memo entry
            per = np.zeros((len(ids), scheme.n_grid))
            per[scored.positions] = scored.scores
            p = np.minimum(1.0, scheme.n_grid * np.exp(-np.cumsum(per, axis=0).max(axis=1)))
        out.append(p)
    return out, (time.perf_counter() - start) / max(1, len(texts))


def table(name: str, pvalues: dict[str, list[np.ndarray]], seconds: float) -> None:
    cells = []
    for length in LENGTHS:
        at = [p[min(len(p), length or len(p)) - 1] for p in pvalues["unbiased"]]
        cells.append(rate(sum(v <= ALPHA for v in at), len(at)))
    fpr = rate(sum(p[-1] <= ALPHA for p in pvalues["none"]), len(pvalues["none"]))
    print(f"| {name} | {fpr} | " + " | ".join(cells) + f" | {seconds:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=100)
    parser.add_argument("--permuted", type=int, default=20)
    parser.add_argument("--permutations", type=int, default=49)
    parser.add_argument("--tokens", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        texts = generate(args.texts, args.tokens, Path(tmp))
    logits = model_logits(parse_model("embedded"))
    print(f"{len(texts['none'])} unwatermarked and {len(texts['unbiased'])} watermarked texts, "
          f"{args.tokens} tokens, p <= {ALPHA}")
    print("| null | FPR | power at 25 | 50 | 100 | all tokens | s/text |")
    print("|---|---|---|---|---|---|---|")
    for name, spec, union, limit in (
            ("union bound n_grid·e^(-max S_k) (the paper's, MarkLLM's)", "unbiased", True, None),
            ("mean e-value n_grid/Σ e^(S_k) (default)", "unbiased", False, None),
            (f"permutation test, N = {args.permutations}", f"unbiased:permutations={args.permutations}",
             False, args.permuted)):
        pvalues, seconds = {}, 0.0
        for kind in ("none", "unbiased"):
            pvalues[kind], s = measure(spec, texts[kind][:limit], logits, union)
            seconds = max(seconds, s)
        table(name, pvalues, seconds)


if __name__ == "__main__":
    main()
