"""Coverage of MAUVE's 95% interval (:func:`evalrun.judges.mauve_score.mauve_with_interval`),
checked by simulation.

MAUVE at n texts is biased (it grows with n), so its interval is about the score a sample of
this size gives: the target is the mean of MAUVE over independent samples of n prompts (and
k-means seeds), estimated here from ``--truth`` samples. Each trial draws n prompts, a
watermarked and an unwatermarked "text" per prompt (embeddings: a prompt effect shared by the
pair plus text noise, the watermark shifting the mean by ``--shift``), computes the score and
its interval, and counts how often the interval covers the target. The same trials give the
percentile interval of the replicates, for comparison.

    python benchmarks/mauve_interval_coverage.py --trials 200 --n 100

prints per shift: the target, the mean score, coverage of the interval used (normal, centred on
the score) and of the percentile interval, and the mean widths.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from evalrun.judges.mauve_score import mauve, mauve_with_interval

DIM = 32


def draw(rng: np.random.Generator, n: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """(P, Q): unwatermarked and watermarked embeddings of n prompts, paired."""
    prompts = rng.normal(size=(n, DIM)) * 1.5
    p = prompts + rng.normal(size=(n, DIM))
    q = prompts + rng.normal(size=(n, DIM))
    q[:, :4] += shift
    return p, q


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--truth", type=int, default=400, help="samples that estimate the target")
    parser.add_argument("--n", type=int, default=100, help="prompts per sample (the main job has 100)")
    parser.add_argument("--shift", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    args = parser.parse_args()
    start = time.perf_counter()
    for shift in args.shift:
        rng = np.random.default_rng(20261128)
        target = float(np.mean([mauve(*draw(rng, args.n, shift), seed=int(rng.integers(2**31)))
                                for _ in range(args.truth)]))
        covered = covered_pct = 0
        scores, widths, widths_pct = [], [], []
        for t in range(args.trials):
            p, q = draw(rng, args.n, shift)
            est = mauve_with_interval(p, q, seed=int(rng.integers(2**31)), bootstrap_seed=t)
            lo, hi = np.percentile(est.replicates, [2.5, 97.5])
            scores.append(est.score)
            covered += est.low <= target <= est.high
            covered_pct += lo <= target <= hi
            widths.append(est.high - est.low)
            widths_pct.append(hi - lo)
        print(f"shift {shift:g}: target (mean MAUVE at n={args.n}) {target:.3f}, mean score {np.mean(scores):.3f}; "
              f"coverage: normal {covered / args.trials:.1%} (mean width {np.mean(widths):.3f}), "
              f"percentile {covered_pct / args.trials:.1%} (mean width {np.mean(widths_pct):.3f}); "
              f"{args.trials} trials", flush=True)
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
