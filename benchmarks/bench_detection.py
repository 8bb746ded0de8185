"""Detection throughput of the native schemes, in tokens per CPU-second.

Each scheme is compared with the practical limit measured in the same run: one numpy pass
that hashes every token once with the key (``mix64(key ^ token * GOLDEN)``). Ratios below 1
are the cost of context seeds, statistics, repeat masks, offsets and null tests. Permutation
tests (its, align, edit) rescore the text ``permutations`` times, so their throughput is
reported per scored token of the observed text.

    python benchmarks/bench_detection.py [--tokens 200] [--texts 50] [--vocab 32000]
"""

from __future__ import annotations

import argparse
import importlib
import time

import numpy as np

from evalrun.kernels.backend import NUMPY
from evalrun.kernels.keyed_hash import code, mix64
from evalrun.watermark.registry import parse_watermark

#: an integer-looking key, which kgw_compat (reference hash keys) also accepts
KEY = "15485863"

SPECS = [
    ("kgw (window, sum)", "kgw:gamma=0.25,delta=2"),
    ("exp (window, sum)", "exp:context=1"),
    ("binary (window, sum)", "binary:context=1"),
    ("its (window, sum, 200 perms)", "its:context=1"),
    ("kgw (fixed L=256, align, 200 perms)", "kgw:randomness=fixed,key_len=256"),
    ("exp (fixed L=256, align, 200 perms)", "exp:randomness=fixed,key_len=256"),
    ("its (fixed L=256, align, 200 perms)", "its:randomness=fixed,key_len=256"),
    ("its (fixed L=64, edit, 50 perms)", "its:randomness=fixed,key_len=64,score=edit,permutations=50"),
]


def baseline(texts: np.ndarray, repeat: int) -> float:
    """Tokens per CPU-second of hashing every token once (numpy)."""
    key = NUMPY.u64([0x1234_5678_9ABC_DEF0])
    start = time.process_time()
    for _ in range(repeat):
        for row in texts:
            mix64(NUMPY, key ^ code(NUMPY, row))
    return texts.size * repeat / (time.process_time() - start)


def throughput(spec: str, texts: np.ndarray, vocab: int, min_seconds: float = 0.5) -> float:
    scheme = parse_watermark(spec)
    scheme.detect(texts[0].tolist(), KEY, vocab)  # warm caches (Huffman tree)
    done, start = 0, time.process_time()
    while True:
        for row in texts:
            scheme.detect(row, KEY, vocab)
            done += row.size
            if time.process_time() - start >= min_seconds and done >= texts.shape[1]:
                return done / (time.process_time() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--texts", type=int, default=50)
    ap.add_argument("--vocab", type=int, default=32_000)
    args = ap.parse_args()
    texts = np.random.default_rng(0).integers(0, args.vocab, size=(args.texts, args.tokens))
    limit = baseline(texts, repeat=20)
    specs = list(SPECS)
    try:
        importlib.import_module("evalrun.watermark.schemes.kgw_compat")
        specs.append(("kgw_compat (selfhash)", "kgw:gamma=0.25,seeding=selfhash"))
        specs.append(("kgw_compat (lefthash)", "kgw:gamma=0.25,seeding=lefthash"))
    except ImportError:
        pass
    print(f"texts: {args.texts} x {args.tokens} tokens, vocab {args.vocab}")
    print(f"{'scheme':40s} {'tokens/CPU-s':>14s} {'ratio':>8s}")
    print(f"{'hash every token once (numpy limit)':40s} {limit:14.0f} {1.0:8.3f}")
    for label, spec in specs:
        try:
            rate = throughput(spec, texts, args.vocab)
        except Exception as exc:  # a scheme that cannot run here is reported, not fatal
            print(f"{label:40s} {'error':>14s}  {type(exc).__name__}: {exc}")
            continue
        print(f"{label:40s} {rate:14.0f} {rate / limit:8.3f}")


if __name__ == "__main__":
    main()
