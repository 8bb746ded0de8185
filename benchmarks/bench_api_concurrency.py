"""How much the ``openai:`` provider's concurrency buys over sequential calls.

Sends ``--requests`` (default 1,000) chat completions through :class:`OpenAIProvider` to the
local evalrun test server, which answers each after ``--latency-ms`` (default 100 ms), and
compares the wall time with the sequential time. The sequential time is *extrapolated*: a
sample of ``--sequential-sample`` requests (default 20) is timed at concurrency 1 and scaled
to the full count, since timing 1,000 sequential calls would take minutes.

The server runs in a separate process by default (as a real one would, so client and server
do not share one interpreter lock); ``--in-process`` runs it in a thread instead.

    python benchmarks/bench_api_concurrency.py [--concurrency 32] [--repeat 3] [--requests 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from typing import Iterator

from evalrun.model.generation import Generation, GenerationRequest, GenParams, Prompt
from evalrun.plugins.providers.openai_chat import OpenAIProvider
from evalrun.testing import ChatServer


@contextlib.contextmanager
def serve(latency_ms: float, in_process: bool) -> Iterator[str]:
    """Yield the base URL of a test server with the given latency."""
    if in_process:
        with ChatServer(latency_s=latency_ms / 1000.0) as server:
            yield server.base_url
        return
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "evalrun.testing.chat_server", "--port", "0",
         "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = next((w for w in line.split() if w.startswith("http://")), None)
        if url is None:
            raise RuntimeError(f"test server did not start: {line!r}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def make_requests(n: int, offset: int = 0) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            gen_key=f"bench-{offset + i}", pack="bench", case={"id": f"c{offset + i}"},
            prompt=Prompt("You are terse.", f"Request number {offset + i}: say something."),
            params=GenParams(temperature=0.0, max_tokens=32, seed=0), repetition=0)
        for i in range(n)
    ]


def timed_run(base_url: str, requests: list[GenerationRequest], concurrency: int
              ) -> tuple[float, list[Generation], dict[str, int]]:
    provider = OpenAIProvider("bench-model", spec="openai:bench-model", base_url=base_url,
                              concurrency=concurrency)
    results: list[Generation] = []
    t0 = time.perf_counter()
    provider.generate(requests, lambda _request, generation: results.append(generation))
    return time.perf_counter() - t0, results, provider.last_stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32,
                        help="provider concurrency (the provider's own default is 16)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="concurrent runs; the median wall time is reported")
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--sequential-sample", type=int, default=20)
    parser.add_argument("--in-process", action="store_true",
                        help="run the test server in a thread of this process")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    args = parser.parse_args(argv)

    with serve(args.latency_ms, args.in_process) as base_url:
        timed_run(base_url, make_requests(8, offset=10**6), 8)  # warm-up: imports, sockets
        seq_wall, seq_results, _ = timed_run(
            base_url, make_requests(args.sequential_sample, offset=10**7), 1)
        walls: list[float] = []
        cpus: list[float] = []
        for _ in range(max(1, args.repeat)):
            cpu0 = time.process_time()
            wall, results, stats = timed_run(base_url, make_requests(args.requests),
                                             args.concurrency)
            walls.append(wall)
            cpus.append(time.process_time() - cpu0)
        wall = sorted(walls)[len(walls) // 2]
        client_cpu = sorted(cpus)[len(cpus) // 2]
    server_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu_s = server_cpu.ru_utime + server_cpu.ru_stime  # whole server life (subprocess)

    errors = sum(1 for g in results + seq_results if g.error is not None)
    per_call = seq_wall / args.sequential_sample
    sequential = per_call * args.requests
    latencies = sorted(g.latency_ms or 0.0 for g in results)
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    speedup = sequential / wall
    best = sequential / min(walls)
    print(f"server latency          {args.latency_ms:.0f} ms "
          f"({'in-process thread' if args.in_process else 'separate process'})")
    print(f"sequential (measured)   {args.sequential_sample} requests at concurrency 1: "
          f"{seq_wall:.2f} s = {per_call * 1000:.1f} ms/request")
    print(f"sequential (estimated)  {args.requests} x {per_call * 1000:.1f} ms = "
          f"{sequential:.1f} s  [extrapolated from the sample, not run]")
    print(f"concurrent (measured)   {args.requests} requests at concurrency "
          f"{args.concurrency}: {wall:.2f} s = {args.requests / wall:.0f} requests/s "
          f"(median of {len(walls)}: {', '.join(f'{w:.2f}' for w in walls)} s)")
    print(f"per-request latency     p50 {p50:.0f} ms, p99 {p99:.0f} ms; "
          f"max in flight {stats.get('max_in_flight')}")
    print(f"CPU time                client {client_cpu:.2f} s per concurrent run (median)"
          + ("" if args.in_process else f", server process {server_cpu_s:.2f} s in all")
          + f"; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"ideal speed-up          {min(args.concurrency, args.requests)}x "
          f"(concurrency bound)")
    print(f"speed-up                {speedup:.1f}x median, {best:.1f}x best  (target >= 20x: "
          f"{'met' if speedup >= 20 else 'NOT met'})")
    print(f"errors                  {errors}")
    if args.json:
        print(json.dumps({
            "requests": args.requests, "concurrency": args.concurrency,
            "latency_ms": args.latency_ms, "sequential_sample": args.sequential_sample,
            "sequential_s_estimated": sequential, "concurrent_s": wall, "speedup": speedup,
            "concurrent_s_runs": walls, "speedup_best": best,
            "p50_ms": p50, "p99_ms": p99, "errors": errors, "client_cpu_s": client_cpu,
        }))
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
