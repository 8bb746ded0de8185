"""The GPU check: everything evalrun does on a GPU, in one command, with its figures.

    python benchmarks/gpu_check.py                 # on a GPU machine (device cuda)
    python benchmarks/gpu_check.py --device cpu    # the smoke run CI makes (torch on the CPU)

1. Kernel parity: for every scheme with torch kernels (kgw, exp, binary, its; each randomness
   and score), detection on the device against numpy over seeded texts and vocabularies from 2
   to 50k, and the logits processors on seeded scores. What is compared, and how exactly
   (``CLAIMS``, ``BOUNDS``):
   * bit for bit, every kernel: tokens scored, green counts, z-scores, the best offset, every
     prefix's p-value (binomial and Erlang p-values, and permutation p-values, which are counts
     of null scores at least the observed one), the DETECTED decision at p <= 0.02 and the
     watermark size (first prefix under the alpha-spending thresholds);
   * bit for bit, the scores of kgw, exp and binary (every prefix's): their float evidence
     comes from +, -, *, frexp and tensor-by-tensor division, which CUDA rounds as numpy does,
     and floats are summed on the host in numpy's order;
   * within ``BOUNDS.score_rel`` of max(|score|, tokens scored), the scores of its: its rank
     ``rank / (V - 1)`` divides by a Python float, which torch on CUDA computes as a multiply
     by the reciprocal (one rounding more);
   * logits processors: the same -inf entries, every finite logit within ``BOUNDS.logit_ulps``
     ulps of numpy's (kgw's ``/ temperature`` and the unwatermarked rows of skipped positions
     are such divisions), the same argmax and top-k of every row (ties within the bound
     aside), hence the same tokens where a scheme picks them (exp, binary, its).
   Schemes without torch kernels (unigram, synthid, waterfall, kgw_compat, ...: numpy only) are
   listed as such.
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
from evalrun.watermark.verdict import DEFAULT_THRESHOLD, alpha_spending

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


@dataclass(frozen=True)
class Bounds:
    """How far a float the device computes may lie from numpy's (everything else is compared
    bit for bit). Each is several times the difference its cause can make: a division by a
    Python float that torch on CUDA computes as ``x * (1 / d)`` lands within 2 ulps of the
    correctly rounded quotient (observed on an H200: 1 ulp)."""

    #: finite logits of a processor: ulps of numpy's value (``numpy.spacing``)
    logit_ulps: float = 4.0
    #: float scores that are not bit-identical (its): |device - numpy| <= score_rel * scale,
    #: scale = max(|numpy score|, tokens scored, 1) (each token adds at most 1 in magnitude)
    score_rel: float = 1e-12
    #: a processor row's top-k tokens must agree (k, or the row's finite entries if fewer)
    top_k: int = 10


BOUNDS = Bounds()
#: schemes whose detection scores are held to ``BOUNDS.score_rel`` instead of bit for bit, and why
FLOAT_SCORES = {
    "its": "its's rank / (V - 1) divides by a Python float, which torch on CUDA computes as a "
           "multiply by the reciprocal",
}
#: what the parity check holds the device to, per kernel (written to the JSON with the figures)
CLAIMS = {
    "every kernel": "bit for bit: tokens scored, green counts, z-scores, best offset, every prefix's "
                    "p-value (binomial, Erlang, permutation counts), DETECTED at p <= "
                    f"{DEFAULT_THRESHOLD}, watermark size (alpha spending)",
    "kgw, exp, binary": "every prefix's score bit for bit (+, -, *, frexp and tensor-by-tensor "
                        "division only; sums on the host in numpy's order)",
    "its": f"every prefix's score within {BOUNDS.score_rel:g} of max(|score|, tokens scored) "
           f"({FLOAT_SCORES['its']})",
    "logits processors": f"same -inf entries, finite logits within {BOUNDS.logit_ulps:g} ulps, same "
                         f"argmax and top-{BOUNDS.top_k} per row (ties within the bound aside), so "
                         "the same tokens where the scheme picks them",
}


@dataclass
class Outcome:
    """One comparison: ``problems`` (empty: within the claims), whether the two were
    bit-identical, and the largest float difference (ulps for logits, relative for scores)."""

    problems: list[str]
    identical: bool
    worst: float = 0.0
    differing: int = 0  # floats that are not bit-identical


def _same_bits(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _same_value(a: Any, b: Any) -> bool:
    """Equal, floats bit for bit (in dicts too), None only to None."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and _same_bits(np.float64(a), np.float64(b))
    return type(a) is type(b) and a == b


def watermark_size(prefix_p: np.ndarray, alpha: float = DEFAULT_THRESHOLD) -> int | None:
    """Length of the shortest prefix under the alpha-spending thresholds (None: none is)."""
    p = np.asarray(prefix_p, dtype=np.float64)
    below = np.flatnonzero(p <= alpha_spending(len(p), alpha)) if len(p) else np.zeros(0, dtype=np.int64)
    return int(below[0]) + 1 if len(below) else None


def detection_record(detection: Any, analysis: dict[str, Any]) -> dict[str, Any]:
    """What parity compares of one text's detection: the :class:`Detection` fields and the
    per-prefix arrays of ``analyse`` (tokens scored ``n``, ``score``, ``p``)."""
    return {"n": detection.num_tokens_scored, "score": detection.score, "p": detection.p_value,
            "green": detection.num_green_tokens, "z": detection.z_score, "extra": dict(detection.extra),
            "prefix_n": np.asarray(analysis["n"], dtype=np.int64),
            "prefix_score": np.asarray(analysis["score"], dtype=np.float64),
            "prefix_p": np.asarray(analysis["p"], dtype=np.float64)}


def compare_detection(ref: dict[str, Any], got: dict[str, Any], *, exact_scores: bool,
                      bounds: Bounds = BOUNDS) -> Outcome:
    """Device detection ``got`` against numpy's ``ref`` (records of :func:`detection_record`):
    integers, p-values and decisions bit for bit; scores bit for bit when ``exact_scores``,
    else within ``bounds.score_rel`` of their scale."""
    problems = [f"{name} {got[name]!r} != {ref[name]!r}" for name in ("n", "green", "z", "p", "extra")
                if not _same_value(ref[name], got[name])]
    for name in ("prefix_n", "prefix_p"):
        if not _same_bits(ref[name], got[name]):
            problems.append(f"{name} differs")
    if (ref["p"] <= DEFAULT_THRESHOLD) != (got["p"] <= DEFAULT_THRESHOLD):
        problems.append(f"decision at p <= {DEFAULT_THRESHOLD} differs")
    if watermark_size(ref["prefix_p"]) != watermark_size(got["prefix_p"]):
        problems.append("watermark size differs")
    scores_ref = np.append(np.asarray(ref["prefix_score"], dtype=np.float64), float(ref["score"]))
    scores_got = np.append(np.asarray(got["prefix_score"], dtype=np.float64), float(got["score"]))
    identical = _same_bits(scores_ref, scores_got)
    worst, differing = 0.0, 0
    if not identical:
        if scores_ref.shape != scores_got.shape:
            problems.append("prefix scores differ in length")
            return Outcome(problems, False, float("inf"))
        n_ref = np.append(np.asarray(ref["prefix_n"], dtype=np.float64), float(ref["n"]))
        scale = np.maximum(np.maximum(np.abs(scores_ref), n_ref), 1.0)
        with np.errstate(invalid="ignore"):
            rel = np.abs(scores_got - scores_ref) / scale
        rel = np.where(scores_got == scores_ref, 0.0, rel)  # equal infinities
        rel = np.where(np.isnan(rel), np.inf, rel)
        worst, differing = float(rel.max()), int(np.count_nonzero(rel))
        if exact_scores:
            problems.append(f"{differing} scores not bit-identical (at most {worst:.2e} relative)")
        elif worst > bounds.score_rel:
            problems.append(f"scores differ by {worst:.2e} relative (bound {bounds.score_rel:g})")
    same_rest = not problems
    return Outcome(problems, identical and same_rest, worst, differing)


def _ranking_agrees(ref_row: np.ndarray, got_row: np.ndarray, k: int, ulps: float) -> bool:
    """The top-``k`` tokens of both rows (by host-side stable sorts), position by position,
    where a difference only counts when numpy's two values are more than twice the bound apart
    (a tie within the bound may order either way)."""
    finite = int(np.count_nonzero(np.isfinite(ref_row)))
    k = min(k, finite)
    if k == 0:
        return True
    top_ref = np.argsort(-ref_row, kind="stable")[:k]
    top_got = np.argsort(-got_row, kind="stable")[:k]
    for a, b in zip(top_ref, top_got):
        if a != b and abs(ref_row[a] - ref_row[b]) > 2 * ulps * np.spacing(abs(ref_row[a])):
            return False
    return True


def compare_logits(ref: np.ndarray, got: np.ndarray, *, bounds: Bounds = BOUNDS) -> Outcome:
    """A processor's device output against numpy's: shape and dtype, the same non-finite
    entries, every finite logit within ``bounds.logit_ulps`` ulps of numpy's, and the same
    argmax and top-k in every row."""
    ref, got = np.asarray(ref), np.asarray(got)
    if ref.shape != got.shape or ref.dtype != got.dtype:
        return Outcome([f"output {got.dtype}{list(got.shape)} != {ref.dtype}{list(ref.shape)}"], False,
                       float("inf"))
    if _same_bits(ref, got):
        return Outcome([], True)
    problems = []
    finite = np.isfinite(ref)
    if not np.array_equal(finite, np.isfinite(got)) or not _same_bits(ref[~finite], got[~finite]):
        problems.append("non-finite entries differ (-inf pattern: chosen tokens or masks)")
    both = finite & np.isfinite(got)
    diff = np.abs(got[both].astype(np.float64) - ref[both].astype(np.float64))
    ulps = diff / np.spacing(np.abs(ref[both])).astype(np.float64) if diff.size else diff
    worst = float(ulps.max()) if ulps.size else 0.0
    if worst > bounds.logit_ulps:
        problems.append(f"logits differ by {worst:.1f} ulps (bound {bounds.logit_ulps:g})")
    rows = ref.reshape(-1, ref.shape[-1]) if ref.ndim else ref.reshape(1, 1)
    grows = got.reshape(rows.shape)
    if ref.ndim and ref.shape[-1]:
        argmax_bad = [r for r in range(len(rows)) if not _ranking_agrees(rows[r], grows[r], 1, bounds.logit_ulps)]
        topk_bad = [r for r in range(len(rows))
                    if not _ranking_agrees(rows[r], grows[r], bounds.top_k, bounds.logit_ulps)]
        if argmax_bad:
            problems.append(f"argmax differs in rows {argmax_bad}")
        elif topk_bad:
            problems.append(f"top-{bounds.top_k} differs in rows {topk_bad}")
    return Outcome(problems, False, worst, int(np.count_nonzero(ref != got)))


def torch_schemes() -> list[str]:
    """Registered schemes whose detectors take a torch backend."""
    names = {spec.split(":")[0] for spec in PARITY_SPECS}
    return [n for n in SCHEMES.names() if n in names]


def _record(scheme: Any, tokens: Any, key: str, vocab: int, backend: str) -> dict[str, Any]:
    return detection_record(scheme.detect(tokens, key, vocab, backend=backend),
                            scheme.analyse(tokens, key, vocab, backend=backend))


def kernel_parity(device: str, texts: int, bounds: Bounds = BOUNDS) -> Check:
    """Detection and logits processors on ``device`` (torch) against numpy, held to
    ``CLAIMS``: a difference outside them is a mismatch; last-bit differences within the bounds
    are counted and reported (``figures["within_bounds"]``)."""
    import torch

    mismatches: list[str] = []
    within: dict[str, dict[str, Any]] = {}
    compared = identical = 0
    for index, spec in enumerate(PARITY_SPECS):
        scheme = parse_watermark(spec)
        assert scheme is not None
        exact = scheme.spec.name not in FLOAT_SCORES
        rng = np.random.default_rng(index)
        scores_seen = {"texts": 0, "not_bit_identical": 0, "worst_relative": 0.0}
        for i in range(texts):
            vocab = int(rng.choice([2, 3, 500, 5000, 50_000]))
            tokens = rng.integers(0, vocab, int(rng.integers(0, 80)))
            key = f"k{i}"
            out = compare_detection(_record(scheme, tokens.tolist(), key, vocab, "numpy"),
                                    _record(scheme, torch.as_tensor(tokens, device=device), key, vocab, "torch"),
                                    exact_scores=exact, bounds=bounds)
            compared += 1
            identical += out.identical
            scores_seen["texts"] += 1
            if not out.identical and not out.problems:
                scores_seen["not_bit_identical"] += 1
                scores_seen["worst_relative"] = max(scores_seen["worst_relative"], out.worst)
            if out.problems:
                mismatches.append(f"{spec} (vocab {vocab}, {len(tokens)} tokens, key {key}): "
                                  + "; ".join(out.problems))
        ids = torch.randint(0, 300, (4, 7), generator=torch.Generator().manual_seed(index))
        scores = torch.randn(4, 300, generator=torch.Generator().manual_seed(index + 1), dtype=torch.float64)
        ref = scheme.logits_processor("k", 300, temperature=0.8, seed=5, backend="numpy")(
            ids.numpy(), scores.numpy())  # the numpy reference: numpy arrays in, numpy out
        got = scheme.logits_processor("k", 300, temperature=0.8, seed=5, backend="torch")(
            ids.to(device), scores.to(device))
        out = compare_logits(np.asarray(ref), got.cpu().numpy(), bounds=bounds)
        compared += 1
        identical += out.identical
        if out.problems:
            mismatches.append(f"{spec}: logits processor: " + "; ".join(out.problems))
        entry: dict[str, Any] = {}
        if scores_seen["not_bit_identical"]:
            entry["scores"] = scores_seen
        if not out.identical and not out.problems:
            entry["logits"] = {"not_bit_identical": out.differing, "of": int(np.asarray(ref).size),
                               "worst_ulps": out.worst}
        if entry:
            within[spec] = entry
    numpy_only = [n for n in SCHEMES.names() if n not in torch_schemes()]
    last_bits = "; ".join(
        f"{spec}: " + ", ".join(
            ([f"{e['scores']['not_bit_identical']}/{e['scores']['texts']} texts' scores within "
              f"{e['scores']['worst_relative']:.1e}"] if "scores" in e else [])
            + ([f"{e['logits']['not_bit_identical']}/{e['logits']['of']} logits within "
                f"{e['logits']['worst_ulps']:.0f} ulp"] if "logits" in e else []))
        for spec, e in within.items())
    detail = (f"{compared} comparisons over {len(PARITY_SPECS)} specs of {', '.join(torch_schemes())}: "
              + (f"{len(mismatches)} outside the claims: {mismatches[:3]}" if mismatches else
                 f"within the claims, {identical} bit-identical"
                 + (f", the rest within the bounds ({last_bits})" if last_bits else ""))
              + f"; numpy only (no torch kernel): {', '.join(numpy_only)}")
    return Check("kernel parity", "failed" if mismatches else "passed", detail,
                 {"comparisons": compared, "bit_identical": identical, "mismatches": mismatches,
                  "within_bounds": within, "bounds": asdict(bounds), "claims": CLAIMS,
                  "numpy_only": numpy_only})


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
