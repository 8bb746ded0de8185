"""False-positive rate of a store's unwatermarked outputs under many keys: how much of one
run's FPR belongs to its key.

A scheme's p-value is exact over keys: for a text fixed independently of the key, a random
key flags it with probability at most alpha. Over the outputs of one model under one key the
flags are not independent: the texts share contexts and tokens ("of the"), and one key makes
the same pairs green (or scores them alike) in every text, so the share of texts one key
flags scatters around alpha more than a binomial would. This script detects the store's
unwatermarked outputs (attack ``none``) under ``--keys`` other keys and prints, per scheme of
the store, the FPR under ``--key`` beside the mean and spread over the other keys.

    python benchmarks/fpr_over_keys.py --db results.sqlite --key public-example-key [--keys 60]
"""

from __future__ import annotations

import argparse
import json
import sqlite3

import numpy as np

from evalrun.watermark.registry import parse_watermark

ALPHA = 0.02


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--key", required=True, help="the run's key (its FPR is shown beside the others)")
    parser.add_argument("--keys", type=int, default=60, help="other keys (fixed names: fpr-key-0, ...)")
    parser.add_argument("--vocab-size", type=int, default=8192, help="the model's vocabulary (embedded: 8192)")
    args = parser.parse_args()
    rows = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True).execute(
        "SELECT watermark, attack, output_tokens_json FROM results WHERE output_tokens_json IS NOT NULL").fetchall()
    plain = [json.loads(t) for w, a, t in rows if w in (None, "", "none") and a in (None, "", "none")]
    schemes = sorted({w for w, _, _ in rows if w not in (None, "", "none")})
    print(f"{len(plain)} unwatermarked outputs; share detected at p <= {ALPHA}")
    print("| scheme | this key | mean over other keys | 10th-90th percentile | max |")
    print("|---|--:|--:|--:|--:|")
    for spec in schemes:
        scheme = parse_watermark(spec)
        assert scheme is not None

        def fpr(key: str) -> float:
            return float(np.mean([scheme.detect(ids, key, args.vocab_size).p_value <= ALPHA  # noqa: B023
                                  for ids in plain]))

        others = np.array([fpr(f"fpr-key-{i}") for i in range(args.keys)])
        lo, hi = np.quantile(others, [0.1, 0.9])
        print(f"| {spec} | {fpr(args.key):.1%} | {others.mean():.1%} ({args.keys} keys) | {lo:.1%}–{hi:.1%} | "
              f"{others.max():.1%} |")


if __name__ == "__main__":
    main()
