"""Watermarking overhead in generation: the embedded model through the hf provider.

For batch sizes 1 and 16, measures generated tokens per second without a watermark and with
each watermark scheme that imports (default parameters), all in one process, and prints each
scheme's throughput as a ratio of the unwatermarked throughput measured in the same run.
Each figure is the median of ``--repeats`` timed runs after one warm-up round; rounds
interleave the watermarks so drifting machine load affects them alike.

Usage: python benchmarks/bench_generation_overhead.py [--max-tokens 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from evalrun.embedded import embedded_model_path
from evalrun.generation import GenerationRequest, GenParams, Prompt
from evalrun.plugins.providers.hf import HFProvider
from evalrun.watermark.registry import SCHEME_MODULES, parse_watermark

KEY = "benchmark-key"


def requests(n: int, watermark: str, max_tokens: int, round_: int) -> list[GenerationRequest]:
    return [GenerationRequest(
        gen_key=f"{watermark}-{round_}-{i}", pack="bench", case={"id": f"c{i}"},
        prompt=Prompt(None, f"Chapter {i + 1}. It was a fine morning, and"),
        params=GenParams(temperature=1.0, max_tokens=max_tokens, seed=round_),
        repetition=i, watermark=watermark, key=None if watermark == "none" else KEY)
        for i in range(n)]


def timed_rate(provider: HFProvider, batch: int, watermark: str, max_tokens: int,
               round_: int) -> float:
    """Generated tokens per second for one full batch."""
    got = []
    reqs = requests(batch, watermark, max_tokens, round_)
    start = time.perf_counter()
    provider.generate(reqs, lambda req, gen: got.append(gen))
    elapsed = time.perf_counter() - start
    errors = [g.error for g in got if g.error]
    if errors:
        raise RuntimeError(f"{watermark}: {errors[0]}")
    return sum(g.tokens_out for g in got) / elapsed


def throughputs(provider: HFProvider, batch: int, watermarks: list[str], max_tokens: int,
                repeats: int) -> dict[str, float]:
    """Median tokens/s per watermark; rounds interleave all watermarks (round 0 warms up) so
    that drifting machine load affects each of them alike."""
    rates: dict[str, list[float]] = {w: [] for w in watermarks}
    for round_ in range(repeats + 1):
        for w in watermarks:
            rate = timed_rate(provider, batch, w, max_tokens, round_)
            if round_:
                rates[w].append(rate)
    return {w: statistics.median(r) for w, r in rates.items()}


def available_schemes() -> list[str]:
    names = []
    for name in SCHEME_MODULES:
        try:
            names.append(parse_watermark(name).spec.canonical())
        except Exception as exc:  # a scheme module that does not import or build
            print(f"skipping {name}: {type(exc).__name__}: {exc}")
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-sizes", default="1,16")
    args = ap.parse_args()
    import torch

    schemes = available_schemes()
    print(f"model {embedded_model_path()}  torch threads {torch.get_num_threads()}  "
          f"max_tokens {args.max_tokens}  repeats {args.repeats}")
    print(f"{'watermark':<72} {'batch':>5} {'tok/s':>8} {'ratio':>6}")
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        provider = HFProvider(str(embedded_model_path()), spec="embedded", batch_size=batch)
        rates = throughputs(provider, batch, ["none", *schemes], args.max_tokens, args.repeats)
        for spec, rate in rates.items():
            print(f"{spec:<72} {batch:>5} {rate:>8.0f} {rate / rates['none']:>6.2f}", flush=True)

if __name__ == "__main__":
    main()
