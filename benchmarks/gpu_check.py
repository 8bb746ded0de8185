"""The GPU check: everything evalrun does on a GPU, in one command, with its figures.

    python benchmarks/gpu_check.py                 # on a GPU machine (device cuda)
    python benchmarks/gpu_check.py --device cpu    # the smoke run CI makes (torch on the CPU)

1. Kernel parity: for every scheme with torch kernels (kgw, exp, binary, its; each randomness
   and score), detection on the device -- p-value, score, tokens scored and every prefix's
   p-value -- has the bits of numpy's, over seeded texts and vocabularies from 2 to 50k; the
   logits processors give equal logits. Schemes without torch kernels (unigram, synthid,
   waterfall, kgw_compat: numpy only) are listed as such.
2. Speed of the permutation-test detectors (align and edit scores over a fixed key): texts per
   second on the device against numpy on the CPU, measured in the same run (the ratio is the
   figure; absolute rates depend on the machine).
3. A `vllm:embedded` run of nine book reports under kgw, graded in the run: at least eight
   DETECTED with the key, at most one with a wrong one (skipped, and said, where vLLM is not
   installed).
4. The same run with vLLM engines in Ray actors, one per GPU (`--executor ray --workers N`;
   skipped where Ray, vLLM or a GPU is missing).
Prints one line per check and a summary; exits 1 when any check fails (a skip is no failure).
``--json PATH`` also writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Callable

import numpy as np

from evalrun.watermark.registry import SCHEMES, parse_watermark

#: every scheme with torch kernels, in each randomness and score it has
PARITY_SPECS = [
    "kgw:gamma=0.25,delta=2", "kgw:gamma=0.25,context=2,skip=0.2", "kgw:randomness=minhash,repeats=count",
    "kgw:randomness=fixed,key_len=8,permutations=30",
    "exp", "exp:randomness=minhash,context=3", "exp:skip=0.2,repeats=count",
    "exp:randomness=fixed,key_len=8,score=edit,permutations=20",
    "binary", "binary:context=2,skip=0.1,repeats=count", "binary:randomness=minhash",
    "binary:randomness=fixed,key_len=8,permutations=20", "binary:randomness=fixed,key_len=6,score=edit,permutations=10",
    "its:permutations=40", "its:randomness=fixed,key_len=8,permutations=20",
]
#: the permutation-test detectors whose speed on the device is measured
SPEED_SPECS = [
    ("align, kgw fixed L=256, 200 perms", "kgw:randomness=fixed,key_len=256"),
    ("align, exp fixed L=256, 200 perms", "exp:randomness=fixed,key_len=256"),
    ("edit, its fixed L=64, 50 perms", "its:randomness=fixed,key_len=64,score=edit,permutations=50"),
]
KEY = "gpu-check-key"
WM = "kgw:gamma=0.25,delta=2"


@dataclass
class Check:
    name: str
    status: str  # passed, failed, skipped
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)


def torch_schemes() -> list[str]:
    """Registered schemes whose detectors take a torch backend."""
    names = {spec.split(":")[0] for spec in PARITY_SPECS}
    return [n for n in SCHEMES.names() if n in names]


def kernel_parity(device: str, texts: int) -> Check:
    import torch

    mismatches: list[str] = []
    compared = 0
    for index, spec in enumerate(PARITY_SPECS):
        scheme = parse_watermark(spec)
        assert scheme is not None
        rng = np.random.default_rng(index)
        for i in range(texts):
            vocab = int(rng.choice([2, 3, 500, 5000, 50_000]))
            tokens = rng.integers(0, vocab, int(rng.integers(0, 80)))
            on_device = torch.as_tensor(tokens, device=device)
            key = f"k{i}"
            cpu = scheme.detect(tokens.tolist(), key, vocab, backend="numpy")
            dev = scheme.detect(on_device, key, vocab, backend="torch")
            same = cpu == dev and np.array_equal(scheme.prefix_p_values(tokens.tolist(), key, vocab, backend="numpy"),
                                                  scheme.prefix_p_values(on_device, key, vocab, backend="torch"))
            compared += 1
            if not same:
                mismatches.append(f"{spec} (vocab {vocab}, {len(tokens)} tokens, key {key})")
        ids = torch.randint(0, 300, (4, 7), generator=torch.Generator().manual_seed(index))
        scores = torch.randn(4, 300, generator=torch.Generator().manual_seed(index + 1), dtype=torch.float64)
        ref = scheme.logits_processor("k", 300, temperature=0.8, seed=5, backend="numpy")(ids, scores)
        got = scheme.logits_processor("k", 300, temperature=0.8, seed=5, backend="torch")(
            ids.to(device), scores.to(device))
        compared += 1
        if not torch.equal(ref, got.cpu()):
            mismatches.append(f"{spec}: logits processor")
    numpy_only = [n for n in SCHEMES.names() if n not in torch_schemes()]
    detail = (f"{compared} comparisons over {len(PARITY_SPECS)} specs of {', '.join(torch_schemes())}: "
              + ("bit-identical to numpy" if not mismatches else f"{len(mismatches)} differ: {mismatches[:3]}")
              + f"; numpy only (no torch kernel): {', '.join(numpy_only)}")
    return Check("kernel parity", "failed" if mismatches else "passed", detail,
                 {"comparisons": compared, "mismatches": mismatches, "numpy_only": numpy_only})


def _rate(detect: Callable[[], Any], n_texts: int, min_seconds: float) -> float:
    """Texts per second of ``detect`` (one call detects ``n_texts``), after one warm-up call."""
    detect()
    calls, start = 0, time.perf_counter()
    while True:
        detect()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return calls * n_texts / elapsed


def detector_speed(device: str, n_texts: int, tokens: int, min_seconds: float) -> Check:
    import torch

    rng = np.random.default_rng(0)
    vocab = 32_000
    texts = rng.integers(0, vocab, (n_texts, tokens))
    rows: dict[str, dict[str, float]] = {}
    for label, spec in SPEED_SPECS:
        scheme = parse_watermark(spec)
        assert scheme is not None
        lists = [t.tolist() for t in texts]
        on_device = [torch.as_tensor(t, device=device) for t in texts]

        def cpu(scheme: Any = scheme, lists: list = lists) -> Any:
            return [scheme.detect(t, KEY, vocab, backend="numpy") for t in lists]

        def dev(scheme: Any = scheme, on_device: list = on_device) -> Any:
            out = [scheme.detect(t, KEY, vocab, backend="torch") for t in on_device]
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            return out

        cpu_rate, dev_rate = _rate(cpu, n_texts, min_seconds), _rate(dev, n_texts, min_seconds)
        rows[label] = {"numpy_texts_per_s": cpu_rate, "device_texts_per_s": dev_rate, "ratio": dev_rate / cpu_rate}
    detail = "; ".join(f"{label}: {r['device_texts_per_s']:.1f} texts/s on {device} vs {r['numpy_texts_per_s']:.1f}"
                       f" on numpy ({r['ratio']:.2f}x)" for label, r in rows.items())
    return Check("align/edit detector speed", "passed", f"{n_texts} texts of {tokens} tokens: {detail}", rows)


def _evalrun(args: list[str], cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args, "--no-progress"], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def _labels(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT label FROM results WHERE watermark != 'none'")]


def vllm_run(device: str, work: Path, extra: list[str], name: str, timeout: int) -> Check:
    """Nine watermarked book reports from vllm:embedded, graded with the key and a wrong one."""
    if find_spec("vllm") is None:
        return Check(name, "skipped", "vLLM is not installed here (GPU: pip install -e \".[vllm]\"; CPU: "
                     "docs/providers.md, vLLM on a CPU-only machine)")
    model = f"vllm:embedded?device={'cuda' if device.startswith('cuda') else 'cpu'}"
    db = work / f"{name.replace(' ', '_')}.sqlite"
    start = time.perf_counter()
    proc = _evalrun(["run", "--pack", "mmw_book_reports", "-k", "book-00", "--model", model, "--watermark", WM,
                     "--max-tokens", "200", "--temperature", "1.0", "--key", KEY, "--out", str(db), *extra],
                    work, timeout)
    figures: dict[str, Any] = {"seconds": round(time.perf_counter() - start, 1)}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return Check(name, "failed", f"evalrun run exited {proc.returncode}: {tail}", figures)
    figures["results"] = len(_labels(db))
    figures["detected_key"] = _labels(db).count("DETECTED")
    # the same outputs graded again with a wrong key (a run with it would generate new ones)
    proc = subprocess.run([sys.executable, "-m", "evalrun.cli", "regrade", "--db", str(db), "--key", "wrong-key"],
                          cwd=work, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return Check(name, "failed", f"evalrun regrade exited {proc.returncode}: {proc.stderr.strip()[-300:]}", figures)
    figures["detected_wrong_key"] = _labels(db).count("DETECTED")
    ok = figures["results"] == 9 and figures["detected_key"] >= 8 and figures["detected_wrong_key"] <= 1
    return Check(name, "passed" if ok else "failed",
                 f"{figures['detected_key']}/9 DETECTED with the key, {figures['detected_wrong_key']}/9 with a wrong"
                 f" key (regraded); {figures['seconds']} s for the run (engine start included)", figures)


def vllm_in_ray(device: str, work: Path, timeout: int) -> Check:
    name = "vLLM in Ray actors"
    import torch

    gpus = torch.cuda.device_count() if device.startswith("cuda") else 0
    if find_spec("ray") is None or gpus == 0:
        why = "Ray is not installed" if find_spec("ray") is None else "no GPU (tests/run/test_ray_executor.py " \
              "covers vLLM in Ray actors on the CPU)"
        return Check(name, "skipped", why)
    check = vllm_run(device, work, ["--executor", "ray", "--workers", str(gpus)], name, timeout)
    check.detail += f"; one actor per GPU ({gpus})"
    check.figures["actors"] = gpus
    return check


def machine(device: str) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"device": device, "python": platform.python_version(), "torch": torch.__version__,
                            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
        info["gpus"] = torch.cuda.device_count()
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="torch device of the checks (default cuda; cpu: the smoke run)")
    parser.add_argument("--texts", type=int, default=12, help="seeded texts per spec in the parity check")
    parser.add_argument("--speed-texts", type=int, default=20, help="texts per call in the speed check")
    parser.add_argument("--speed-tokens", type=int, default=200, help="tokens per text in the speed check")
    parser.add_argument("--min-seconds", type=float, default=1.0, help="time per speed measurement")
    parser.add_argument("--skip-vllm", action="store_true", help="leave out the vLLM runs")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per vLLM run")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"gpu_check: --device {args.device}, but torch {torch.__version__} sees no CUDA device; "
              "run with --device cpu for the smoke run", file=sys.stderr)
        return 2
    info = machine(args.device)
    print("gpu_check: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    checks = [kernel_parity(args.device, args.texts),
              detector_speed(args.device, args.speed_texts, args.speed_tokens, args.min_seconds)]
    if not args.skip_vllm:
        with tempfile.TemporaryDirectory(prefix="evalrun-gpu-check-") as tmp:
            checks.append(vllm_run(args.device, Path(tmp), [], "vllm: run", args.timeout))
            checks.append(vllm_in_ray(args.device, Path(tmp), args.timeout))
    for check in checks:
        print(f"gpu_check: {check.name}: {check.status.upper()}: {check.detail}")
    failed = [c.name for c in checks if c.status == "failed"]
    print(f"gpu_check: {len(checks) - len(failed)} of {len(checks)} checks passed or skipped"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "checks": [asdict(c) for c in checks]}, indent=2) + "\n",
                             encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
