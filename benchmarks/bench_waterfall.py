"""Waterfall verification throughput, in tokens per CPU-second: evalrun vs the reference code.

The same token ids (Zipf-distributed, so contexts and bigrams repeat as in text) are verified
by evalrun's ``waterfall`` scheme and, when the reference package is importable, by the
reference's own verification path (``Watermarker.get_cumulative_token_count`` then
``watermarking_fn.q``: ``Watermarker.verify`` without its tokenizer call). CPU time counts
this process and its reaped children (the reference forks a ``multiprocessing.Pool`` for more
than 1,024 texts). Both sides start with no permutation cached; evalrun's process-wide cache
(``EVALRUN_SEED_TABLE_MB``) then serves repeated contexts, reported separately as "warm".

Run it where both are importable, e.g. in the throwaway reference environment with evalrun
installed there without dependencies::

    . /work/refvenv-waterfall/bin/activate && pip install --no-deps -e .
    python benchmarks/bench_waterfall.py [--texts 200] [--tokens 200] [--vocab 50257] [--owners 10]

Without the reference only evalrun's figures are printed. The warm figure needs the budget
to hold every distinct context's permutation (N x 2 bytes each below 65,536 tokens): 200 x 200
Zipf tokens at V = 50257 have ~3,400 contexts, 340 MB, so run that one with
``EVALRUN_SEED_TABLE_MB=1024`` (at the default 256 MB a sequential rescan evicts each
permutation before its reuse). Cold figures are bound by numpy's legacy shuffle (~0.7 ms per
50k-token permutation), which both sides run once per (owner, distinct context).
"""

from __future__ import annotations

import argparse
import resource
import time
from typing import Any, Callable

import numpy as np

from evalrun.watermark.engine.seed_tables import seed_tables
from evalrun.watermark.registry import parse_watermark


def cpu_seconds() -> float:
    """User + system CPU time of this process and its waited-for children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    cpu, wall = cpu_seconds(), time.perf_counter()
    out = fn()
    return out, cpu_seconds() - cpu, time.perf_counter() - wall


def corpus(texts: int, tokens: int, vocab: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shuffle = rng.permutation(vocab)
    return [shuffle[np.minimum(rng.zipf(1.3, tokens), vocab) - 1].astype(np.int64)
            for _ in range(texts)]


def reference(vocab: int, k_p: int) -> Any | None:
    try:
        from waterfall.WatermarkerBase import Watermarker
    except ImportError:
        return None

    class IdTokenizer:  # enough of a tokenizer for Watermarker(); ids are passed directly
        eos_token = "<eos>"
        deprecation_warnings: dict = {}
        vocab_size = vocab

    return Watermarker(tokenizer=IdTokenizer(), model=None, id=0, k_p=k_p, kappa=2.0)


def reference_verify(wm: Any, texts: list[np.ndarray], owners: list[int], k_p: int) -> np.ndarray:
    """``Watermarker.verify``'s body on token ids: ``[text, owner]`` q-scores."""
    from scipy.sparse import vstack

    tokens = [t.astype(np.uint32) for t in texts]
    counts = wm.get_cumulative_token_count(owners, tokens, wm.n_gram, return_dense=False)
    q, _, _ = wm.watermarking_fn.q(vstack(counts, format="csr"), k_p=[k_p])
    return q.reshape(-1, len(owners))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=200)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--owners", type=int, default=10, help="owner ids 0..K-1 for the multi-owner run")
    ap.add_argument("--k-p", type=int, default=1)
    args = ap.parse_args()

    texts = corpus(args.texts, args.tokens, args.vocab)
    n_tok = sum(len(t) for t in texts)
    contexts = len({int(c) for t in texts for c in t[:-1]})
    scheme = parse_watermark(f"waterfall:k_p={args.k_p}")
    owner = 7
    owners = list(range(args.owners))
    print(f"{args.texts} texts x {args.tokens} tokens, V={args.vocab}, k_p={args.k_p}, "
          f"{contexts} distinct contexts")

    rows: list[tuple[str, float, float]] = []

    def record(name: str, tokens: int, cpu: float, wall: float) -> float:
        rate = tokens / cpu
        rows.append((name, rate, wall))
        print(f"  {name:<48} {rate:>12,.0f} tokens/CPU-s  ({cpu:.2f} CPU-s, {wall:.2f} s wall)")
        return rate

    print("one owner:")
    seed_tables().clear()
    ours, cpu, wall = timed(lambda: np.array([scheme.detect(t, str(owner), args.vocab).score
                                              for t in texts]))
    ours_cold = record("evalrun detect per text (cold cache)", n_tok, cpu, wall)
    _, cpu, wall = timed(lambda: [scheme.detect(t, str(owner), args.vocab) for t in texts])
    record("evalrun detect per text (warm cache)", n_tok, cpu, wall)
    seed_tables().clear()
    batch, cpu, wall = timed(lambda: scheme.verify_owners(texts, [owner], args.vocab))
    ours_batch = record("evalrun verify_owners, all texts (cold cache)", n_tok, cpu, wall)

    print(f"{args.owners} owners (ids 0..{args.owners - 1}):")
    seed_tables().clear()
    multi, cpu, wall = timed(lambda: scheme.verify_owners(texts, owners, args.vocab))
    ours_multi = record("evalrun verify_owners (cold cache)", n_tok * len(owners), cpu, wall)

    wm = reference(args.vocab, args.k_p)
    if wm is None:
        print("reference package `waterfall` not importable: evalrun figures only")
        return 0
    ref, cpu, wall = timed(lambda: reference_verify(wm, texts, [owner], args.k_p))
    ref_one = n_tok / cpu
    print(f"reference, one owner: {ref_one:,.0f} tokens/CPU-s ({cpu:.2f} CPU-s, {wall:.2f} s wall)")
    ref_multi_out, cpu, wall = timed(lambda: reference_verify(wm, texts, owners, args.k_p))
    ref_multi = n_tok * len(owners) / cpu
    print(f"reference, {args.owners} owners: {ref_multi:,.0f} tokens/CPU-s ({cpu:.2f} CPU-s, "
          f"{wall:.2f} s wall)")
    print(f"max |score difference|: one owner {np.abs(ours - ref[:, 0]).max():.2e}, "
          f"batched {np.abs(batch[:, 0] - ref[:, 0]).max():.2e}, "
          f"{args.owners} owners {np.abs(multi - ref_multi_out).max():.2e}")
    print("ratio evalrun / reference (tokens per CPU-second):")
    print(f"  detect per text, cold cache      {ours_cold / ref_one:6.2f}x")
    print(f"  verify_owners, one owner          {ours_batch / ref_one:6.2f}x")
    print(f"  verify_owners, {args.owners} owners{'':<12}{ours_multi / ref_multi:6.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
