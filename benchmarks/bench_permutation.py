"""Permutation-test detectors (fixed key, align and edit scores): the compiled kernel against
the numpy reference path, in texts per CPU-second, measured in the same run.

The reference is today's numpy path of ``NativeDetection._analyse_fixed`` (``_offset_matrix``
and ``kernels/align.py``), which detection takes where ``evalrun.kernels._offset_scores`` was
not built; it is timed here with the kernel switched off. Both paths detect the same texts
with ``parse_watermark(spec).detect(ids, key, vocab)``, and every prefix's score and p-value,
the offset, green count and z-score of each text must be bit-identical between them: the
script exits 1 otherwise.

    python benchmarks/bench_permutation.py [--texts 20] [--tokens 200] [--vocab 32000]
        [--min-seconds 2] [--variant all|portable|avx2|avx512]

``--variant`` also times builds of the kernel's loops that a plainer CPU would run (``all``:
every build this CPU runs); by default the one detection picks here.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable

import numpy as np

from evalrun.kernels import offset_scores as osk
from evalrun.watermark.registry import parse_watermark

KEY = "bench-permutation-key"

SPECS = [
    ("kgw:randomness=fixed,key_len=256", "align, 200 perms"),
    ("exp:randomness=fixed,key_len=256", "align, 200 perms"),
    ("its:randomness=fixed,key_len=64,score=edit,permutations=50", "edit, 50 perms"),
]


def timed(run: Callable[[], list[Any]], min_seconds: float) -> tuple[float, float, list[Any]]:
    """Rounds of ``run`` (one pass over the texts each) until ``min_seconds`` of CPU time:
    (CPU seconds per round, wall seconds per round, the first round's results)."""
    rounds, first = 0, None
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while True:
        out = run()
        first = out if first is None else first
        rounds += 1
        if time.process_time() - cpu0 >= min_seconds:
            break
    return (time.process_time() - cpu0) / rounds, (time.perf_counter() - wall0) / rounds, first


def detections(scheme: Any, texts: np.ndarray, vocab: int) -> Callable[[], list[Any]]:
    """One pass of ``detect`` over the texts, keeping each text's per-prefix arrays (the
    ``analyse`` result detect is built from) beside its Detection."""
    def run() -> list[Any]:
        out = []
        for row in texts:
            seen: list[dict[str, Any]] = []
            analyse = type(scheme).analyse
            scheme.analyse = lambda *a, **k: seen.append(analyse(scheme, *a, **k)) or seen[-1]
            try:
                det = scheme.detect(row, KEY, vocab)
            finally:
                del scheme.analyse
            out.append((det, seen[0]))
        return out
    return run


def bits(value: Any) -> Any:
    """A comparable form of a result in which floats compare by their bits."""
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        return (a.dtype.str, a.shape, a.view(np.uint8).tobytes())
    if isinstance(value, float):
        return ("f", value.hex())
    if isinstance(value, (tuple, list)):
        return tuple(bits(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, bits(v)) for k, v in value.items()))
    if hasattr(value, "__dataclass_fields__"):
        return tuple((f, bits(getattr(value, f))) for f in value.__dataclass_fields__)
    return value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--vocab", type=int, default=32_000)
    ap.add_argument("--min-seconds", type=float, default=2.0,
                    help="CPU seconds each fast-path figure is measured over (the reference "
                         "runs one pass)")
    ap.add_argument("--variant", default="",
                    help="kernel build(s) to time: all, portable, avx2 or avx512 (default: the "
                         "one detection picks on this CPU)")
    args = ap.parse_args()
    if not osk.compiled_available():
        print("bench_permutation: the compiled kernel (evalrun.kernels._offset_scores) is not "
              "built with this install; nothing to compare")
        return 1
    builds = osk.variants()
    wanted = builds if args.variant == "all" else [args.variant] if args.variant else [""]
    for v in wanted:
        if v and v not in builds:
            print(f"bench_permutation: build {v!r} is not run by this CPU (it runs {builds})")
            return 1
    texts = np.random.default_rng(0).integers(0, args.vocab, size=(args.texts, args.tokens))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"bench_permutation: {args.texts} texts x {args.tokens} tokens, V = {args.vocab}; "
          f"kernel builds this CPU runs: {', '.join(builds)} (detection picks {builds[-1]}); "
          f"{os.cpu_count()} CPUs, load average {load:.2f} at the start")
    print(f"{'spec':75s} {'build':>8s} {'reference':>12s} {'fast':>12s} {'ratio':>8s} "
          f"{'wall ratio':>10s}  identical")
    print(f"{'':75s} {'':>8s} {'texts/CPU-s':>12s} {'texts/CPU-s':>12s}")
    failed = 0
    for spec, what in SPECS:
        scheme = parse_watermark(spec)
        scheme.detect(texts[0], KEY, args.vocab)  # warm caches (Huffman tree, imports)
        compiled = osk._compiled
        osk._compiled = None  # the reference path: as on an install without the kernel
        try:
            ref_cpu, ref_wall, ref = timed(detections(scheme, texts, args.vocab), 0.0)
        finally:
            osk._compiled = compiled
        for v in wanted:
            osk.DEFAULT_VARIANT = v
            try:
                cpu, wall, got = timed(detections(scheme, texts, args.vocab), args.min_seconds)
            finally:
                osk.DEFAULT_VARIANT = ""
            same = [bits(a) == bits(b) for a, b in zip(got, ref)]
            ok = all(same)
            failed += not ok
            verdict = (f"yes ({len(same)} texts: detections and every prefix's score and "
                       "p-value)" if ok else f"NO: {same.count(False)} of {len(same)} texts differ")
            print(f"{spec + ' (' + what + ')':75s} {v or builds[-1]:>8s} "
                  f"{args.texts / ref_cpu:12.2f} {args.texts / cpu:12.1f} {ref_cpu / cpu:7.1f}x "
                  f"{ref_wall / wall:9.1f}x  {verdict}")
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
