"""Watermarking overhead in generation: the embedded model through the hf provider.

For batch sizes 1 and 16, compares decoding throughput (rows x steps per second, see
:func:`timed_rate`) with each watermark scheme that imports (default parameters, plus
reference-compatible kgw) against unwatermarked generation with the same model and batch,
in one process.

The comparison is paired, because wall-clock throughput on a small shared machine drifts by
10% and more between runs: each pair runs one batch unwatermarked and one watermarked
(same prompts and sampling seeds, order drawn at random), and a scheme's figure is the median
over ``--pairs`` pairs of watermarked / unwatermarked throughput, with the interquartile
range. An A/A arm (unwatermarked against itself) shows the noise floor the ratios should be
read against. Each watermark first generates ``--warmup`` untimed tokens (default 4,096), so
the figures describe a run past its first few generations: the per-seed table cache
(:mod:`evalrun.watermark.seed_tables`) starts empty for each batch size and fills as a real
run's would; its hit rate over the timed pairs is printed.

Usage: python benchmarks/bench_generation_overhead.py [--max-tokens 64] [--pairs 10]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time

from evalrun.embedded import embedded_model_path
from evalrun.generation import GenerationRequest, GenParams, Prompt
from evalrun.plugins.providers.hf import HFProvider
from evalrun.watermark.registry import SCHEME_MODULES, parse_watermark
from evalrun.watermark.seed_tables import seed_tables

KEY = "benchmark-key"
#: reference-compatible kgw takes the reference's integer hash key
COMPAT = "kgw:seeding=lefthash"
COMPAT_KEY = "15485863"


def requests(n: int, watermark: str, max_tokens: int, round_: int) -> list[GenerationRequest]:
    return [GenerationRequest(
        gen_key=f"{watermark}-{round_}-{i}", pack="bench", case={"id": f"c{i}"},
        prompt=Prompt(None, f"Chapter {i + 1}. It was a fine morning, and"),
        params=GenParams(temperature=1.0, max_tokens=max_tokens, seed=round_),
        repetition=i, watermark=watermark,
        key=None if watermark == "none" else COMPAT_KEY if "seeding=" in watermark else KEY)
        for i in range(n)]


def timed_rate(provider: HFProvider, batch: int, watermark: str, max_tokens: int,
               round_: int) -> float:
    """Decoding work per second for one full batch: rows x model steps / seconds.

    Tokens per second would punish whichever arm happens to emit an end-of-sequence token
    early (a finished row still rides along in the batch, and a batch of one pays its prompt
    for fewer tokens), so the work is counted in steps: the batch runs until its longest
    row stops, one forward per token plus one for a row's end-of-sequence token."""
    got = []
    reqs = requests(batch, watermark, max_tokens, round_)
    gc.collect()
    gc.disable()  # as timeit does: a collection landing in one arm is not its cost
    try:
        start = time.perf_counter()
        provider.generate(reqs, lambda req, gen: got.append(gen))
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    errors = [g.error for g in got if g.error]
    if errors:
        raise RuntimeError(f"{watermark}: {errors[0]}")
    steps = max(g.tokens_out + (g.extra.get("finish_reason") == "stop") for g in got)
    return batch * steps / elapsed


AA = "none (A/A)"


def paired_ratios(provider: HFProvider, batch: int, watermarks: list[str], max_tokens: int,
                  pairs: int, warmup: int) -> dict[str, list[float]]:
    """Per watermark, the watermarked / unwatermarked throughput of every timed pair."""
    ratios: dict[str, list[float]] = {w: [] for w in [AA, *watermarks]}
    rng = random.Random(batch)
    for w in watermarks:
        for round_ in range(-(-warmup // (batch * max_tokens))):
            timed_rate(provider, batch, w, max_tokens, 10_000 + round_)
    seed_tables().stats.hits = seed_tables().stats.misses = 0
    for pair in range(pairs):
        arms = list(ratios)
        rng.shuffle(arms)
        for arm in arms:
            runs = ["none", "none" if arm == AA else arm]
            rng.shuffle(runs)
            rates = {}
            for i, w in enumerate(runs):
                rates[i if arm == AA else w] = timed_rate(provider, batch, w, max_tokens, pair)
            if arm == AA:
                ratios[arm].append(rates[1] / rates[0])
            else:
                ratios[arm].append(rates[arm] / rates["none"])
    return ratios


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], statistics.median(values), q[2]


def available_schemes() -> list[str]:
    names = []
    for name in [*SCHEME_MODULES, COMPAT]:
        try:
            names.append(parse_watermark(name).spec.canonical())
        except Exception as exc:  # a scheme module that does not import or build
            print(f"skipping {name}: {type(exc).__name__}: {exc}")
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=4096, help="untimed tokens per watermark")
    ap.add_argument("--batch-sizes", default="1,16")
    args = ap.parse_args()
    import torch

    schemes = available_schemes()
    print(f"model {embedded_model_path()}  torch threads {torch.get_num_threads()}  "
          f"max_tokens {args.max_tokens}  warmup {args.warmup} tokens  pairs {args.pairs}")
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        provider = HFProvider(str(embedded_model_path()), spec="embedded", batch_size=batch)
        seed_tables().clear()
        base = statistics.median(timed_rate(provider, batch, "none", args.max_tokens, 20_000)
                                 for _ in range(3))
        ratios = paired_ratios(provider, batch, schemes, args.max_tokens, args.pairs,
                               args.warmup)
        stats = seed_tables().stats
        print(f"\nbatch {batch}: unwatermarked about {base:.0f} row-steps/s; seed-table hit rate "
              f"{stats.hit_rate:.3f} over the timed pairs")
        print(f"{'watermark':<64} {'ratio':>6}  {'IQR':>11}")
        for spec, r in ratios.items():
            lo, med, hi = quartiles(r)
            print(f"{spec:<64} {med:>6.3f}  {lo:.3f}-{hi:.3f}", flush=True)


if __name__ == "__main__":
    main()
