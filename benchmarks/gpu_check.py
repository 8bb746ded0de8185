"""The GPU check: everything evalrun does on a GPU, in one command, with its figures.

    python benchmarks/gpu_check.py --json gpu_check.json   # on a GPU machine (device cuda)
    python benchmarks/gpu_check.py --device cpu --skip-vllm  # the smoke run CI makes (torch on the CPU)

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
3. Generation: a seeded random Llama (default on a GPU: Llama 3.2 1B's shape, 1.24 B
   parameters, V = 128,256, bfloat16; ``--gen-shape`` picks another, and the CPU's default is a
   tiny one) decoding batches of 16 and 64 rows, unwatermarked and with each registered
   scheme's logits processor applied as the hf provider applies it: tokens per second and the
   ratio to unwatermarked decoding. No network: the model is built from a config.
4. A `vllm:embedded` run of nine book reports under kgw, graded in the run: at least eight
   DETECTED with the key, at most one with a wrong one (skipped, and said, where vLLM is not
   installed).
5. The same run with vLLM engines in Ray actors, one per GPU (`--executor ray --workers N`;
   skipped where Ray, vLLM or a GPU is missing).
Prints one line per check and a summary; exits 1 when any check fails (a skip is no failure).
``--json PATH`` also writes the figures (rewritten after every check, so a run cut short keeps
what it measured). ``--max-seconds`` (default 450) bounds the whole run: generation starts no
new measurement past it, and says which it left out.
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
    seconds: float = 0.0


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


#: the device's detector rate the issue asks for, against numpy's reference path
DETECTOR_TARGET = 50.0


def detector_speed(device: str, n_texts: int, tokens: int, min_seconds: float) -> Check:
    """Texts per second of each permutation-test detector: numpy's reference path (text by
    text, the compiled kernel switched off: the "numpy rate"), the compiled CPU kernel (what
    numpy runs where it was built) and the device, all the texts in one ``detect_many`` call
    (padded into batches of texts x null keys). The ratios are the figures."""
    import torch

    from evalrun.kernels import offset_scores as osk

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
            out = scheme.detect_many(on_device, KEY, vocab, backend="torch")
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            return out

        compiled = osk._compiled
        osk._compiled = None  # numpy's reference path, as on an install without the kernel
        try:
            ref_rate = _rate(cpu, n_texts, min_seconds)
        finally:
            osk._compiled = compiled
        row = {"numpy_texts_per_s": ref_rate}
        if compiled is not None:
            row["compiled_texts_per_s"] = _rate(cpu, n_texts, min_seconds)
        row["device_texts_per_s"] = _rate(dev, n_texts, min_seconds)
        row["ratio"] = row["device_texts_per_s"] / ref_rate
        if compiled is not None:
            row["ratio_to_compiled"] = row["device_texts_per_s"] / row["compiled_texts_per_s"]
        rows[label] = row
    detail = "; ".join(
        f"{label}: {r['device_texts_per_s']:.1f} texts/s on {device} vs {r['numpy_texts_per_s']:.1f}"
        f" on numpy ({r['ratio']:.2f}x"
        + (f"; the compiled kernel {r['compiled_texts_per_s']:.1f}, {r['ratio_to_compiled']:.2f}x"
           if "compiled_texts_per_s" in r else "") + ")"
        for label, r in rows.items())
    if device.startswith("cuda"):
        short = [label for label, r in rows.items() if r["ratio"] < DETECTOR_TARGET]
        detail += (f"; every detector at least {DETECTOR_TARGET:.0f}x numpy" if not short else
                   f"; under {DETECTOR_TARGET:.0f}x numpy: {', '.join(short)}")
    return Check("align/edit detector speed", "passed", f"{n_texts} texts of {tokens} tokens: {detail}", rows)


#: Llama 3.2 1B's shape (1.24 B parameters with the embeddings tied): the generation row's model
LLAMA_1B: dict[str, Any] = {"vocab_size": 128_256, "hidden_size": 2048, "num_hidden_layers": 16,
                            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
                            "tie_word_embeddings": True}
#: the CPU's default shape (the smoke run): LAYERSxHIDDENxVOCAB
TINY_SHAPE = "2x64x2048"
#: prompt ids per row (random, seeded; ids below 3 are left out, as special tokens would be)
PROMPT_IDS = 16
#: the reference-compatible kgw, measured besides the registered schemes' defaults
COMPAT = "kgw:seeding=lefthash"
#: keys tried in turn: a scheme takes the first its ``check_key`` accepts (synthid, waterfall
#: and reference kgw take integers)
GEN_KEYS = ("gpu-check-key", "15485863")


def llama_config(shape: str) -> Any:
    """``llama-1b`` (:data:`LLAMA_1B`) or ``LAYERSxHIDDEN[xVOCAB]`` (64-wide heads, SwiGLU
    width 8/3 of the hidden size, vocabulary 128,256 unless given)."""
    from transformers import LlamaConfig

    if shape == "llama-1b":
        return LlamaConfig(**LLAMA_1B)
    parts = [int(x) for x in shape.lower().split("x")]
    if len(parts) not in (2, 3) or min(parts) < 1 or parts[1] % 64 and parts[1] > 64:
        raise ValueError(f"--gen-shape {shape!r}: llama-1b or LAYERSxHIDDEN[xVOCAB] (hidden a multiple of 64)")
    layers, hidden = parts[:2]
    heads = max(1, hidden // 64)
    return LlamaConfig(vocab_size=parts[2] if len(parts) == 3 else LLAMA_1B["vocab_size"], hidden_size=hidden,
                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                       intermediate_size=hidden * 8 // 3, tie_word_embeddings=True)


def random_llama(shape: str, device: str) -> Any:
    """A seeded random Llama of ``shape`` on ``device`` (bfloat16 on a GPU, float32 on the CPU),
    built from its config: nothing is downloaded."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it runs: 1.24 B parameters take seconds there
        model = AutoModelForCausalLM.from_config(llama_config(shape), dtype=dtype)
    return model.to(device).eval()


def gen_schemes() -> list[tuple[str, Any, str]]:
    """``(spec, scheme, key)`` of every registered scheme that builds with its defaults, and the
    reference-compatible kgw."""
    out = []
    for name in [*SCHEMES.names(), COMPAT]:
        try:
            scheme = parse_watermark(name)
        except Exception:  # kgw_compat needs a seeding (COMPAT is it)
            continue
        assert scheme is not None
        for key in GEN_KEYS:
            try:
                scheme.check_key(key)
            except Exception:
                continue
            out.append((name, scheme, key))
            break
    return out


def _sample(scores: Any, generator: Any) -> Any:
    import torch

    return torch.multinomial(torch.softmax(scores.float(), dim=-1), 1, generator=generator).squeeze(1)


def _pick(processors: list[Any] | None, shared: bool, history: Any, logits: Any, generator: Any) -> Any:
    """Next token of every row, as the hf provider picks it (``HFProvider._pick``): one
    processor for the batch where the scheme's ``shared_context`` allows it, else one per row;
    ``choose`` (with ``reuse``) where the processor has it, the tokens it picks kept and the
    other rows sampled; else the processor's scores sampled."""
    import torch

    if processors is None:
        return _sample(logits, generator)
    calls = [(processors[0], history, logits)] if shared else [
        (p, history[i:i + 1], logits[i:i + 1]) for i, p in enumerate(processors)]
    picked = []
    for processor, context, step in calls:
        choose = getattr(processor, "choose", None)
        if choose is None:
            picked.append(_sample(processor(context, step), generator))
            continue
        scores, tokens = choose(context, step, reuse=True)
        if tokens is None:
            picked.append(_sample(scores, generator))
            continue
        chosen = torch.from_numpy(tokens).to(logits.device)
        picked.append(chosen if scores is None else torch.where(chosen >= 0, chosen, _sample(scores, generator)))
    return picked[0] if shared else torch.cat(picked)


def decode(model: Any, prompt: Any, processors: list[Any] | None, shared: bool, *, warmup: int, steps: int,
           seconds: float) -> tuple[int, float]:
    """``warmup`` untimed decoding steps (the prompt's forward pass first), then up to ``steps``
    timed ones, stopping once ``seconds`` have passed in either phase (one timed step at
    least): ``(timed steps, their seconds)``. Rows never stop early (no end-of-sequence), so a
    step is ``batch`` tokens."""
    import inspect

    import torch

    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    device = prompt.device
    generator = torch.Generator(device=device).manual_seed(0)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    history, step_ids, past = prompt, prompt, None

    def step() -> None:
        nonlocal history, step_ids, past
        out = model(input_ids=step_ids, use_cache=True, logits_to_keep=1, **{cache_arg: past})
        past = getattr(out, cache_arg)
        tokens = _pick(processors, shared, history, out.logits[:, -1, :].float(), generator)
        step_ids = tokens.view(-1, 1).to(torch.long)
        history = torch.cat([history, step_ids], dim=1)

    with torch.inference_mode():
        start = time.perf_counter()
        for _ in range(warmup):
            step()
            if time.perf_counter() - start > seconds:
                break
        sync()
        start, done = time.perf_counter(), 0
        while done < steps:
            step()
            done += 1
            if time.perf_counter() - start >= seconds:
                break
        sync()
        return done, time.perf_counter() - start


def generation(device: str, shape: str, batches: list[int], *, tokens: int, warmup: int, seconds: float,
               deadline: float, only: list[str] | None = None) -> Check:
    """Tokens per second of a seeded random Llama decoding ``batches`` rows, unwatermarked
    (before and after the schemes, to show drift) and with each scheme's processor."""
    import torch

    name = "generation"
    start = time.perf_counter()
    if start > deadline:
        return Check(name, "skipped", "the run's time budget (--max-seconds) was spent before it started")
    try:
        model = random_llama(shape, device)
    except ImportError as exc:
        return Check(name, "skipped", f"transformers is missing ({exc})")
    config = model.config
    vocab = int(config.vocab_size)
    params = sum(p.numel() for p in model.parameters())
    figures: dict[str, Any] = {
        "model": {"shape": shape, "parameters": params, "vocab": vocab, "layers": config.num_hidden_layers,
                  "hidden": config.hidden_size, "dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
                  "build_seconds": round(time.perf_counter() - start, 1)},
        "batches": batches, "timed_steps": tokens, "warmup_steps": warmup, "seconds_per_cell": seconds,
        "rows": {}, "left_out": [], "errors": {}}
    schemes = [s for s in gen_schemes() if only is None or s[0].split(":")[0] in only]
    rows: dict[str, dict[str, Any]] = figures["rows"]
    for batch in batches:
        rng = np.random.default_rng(batch)
        prompt = torch.as_tensor(rng.integers(3, vocab, (batch, PROMPT_IDS)), device=device)
        arms: list[tuple[str, Any, str]] = [("none", None, ""), *schemes, ("none (again)", None, "")]
        for spec, scheme, key in arms:
            if time.perf_counter() > deadline:
                figures["left_out"].append(f"{spec} at batch {batch}")
                continue
            shared = scheme is None or (scheme.shared_context is not None and scheme.shared_context <= PROMPT_IDS)
            try:
                processors = None if scheme is None else [
                    scheme.logits_processor(key, vocab, temperature=1.0, seed=row)
                    for row in range(1 if shared else batch)]
                steps, elapsed = decode(model, prompt, processors, shared, warmup=warmup, steps=tokens,
                                        seconds=seconds)
            except Exception as exc:  # a processor that fails on this device is the finding
                figures["errors"][f"{spec} at batch {batch}"] = f"{type(exc).__name__}: {exc}"[:500]
                continue
            cell: dict[str, Any] = {"tokens_per_s": batch * steps / elapsed,
                                    "ms_per_step": 1000 * elapsed / steps, "steps": steps}
            if scheme is not None:
                cell["processors"] = "one for the batch" if shared else "one per row"
            rows.setdefault(spec, {})[str(batch)] = cell
    for b in map(str, batches):
        plain = [rows[s][b]["tokens_per_s"] for s in ("none", "none (again)") if b in rows.get(s, {})]
        if plain:
            base = sum(plain) / len(plain)
            for cells in rows.values():
                if b in cells:
                    cells[b]["ratio"] = cells[b]["tokens_per_s"] / base
    figures["seconds"] = round(time.perf_counter() - start, 1)
    parts = []
    for b in map(str, batches):
        measured = {s: c[b] for s, c in rows.items() if b in c and not s.startswith("none")}
        first = rows.get("none", {}).get(b)
        if first is None:
            continue
        ratios = sorted((c["ratio"], s) for s, c in measured.items())
        parts.append(f"batch {b}: unwatermarked {first['tokens_per_s']:.0f} tokens/s, {len(measured)} schemes at "
                     + (f"{ratios[0][0]:.2f}-{ratios[-1][0]:.2f}x of it (slowest {ratios[0][1]})" if ratios
                        else "no scheme measured"))
    size = f"{params / 1e9:.2f} B" if params >= 1e8 else f"{params / 1e6:.2f} M"
    detail = (f"random Llama {shape} ({size} parameters, V = {vocab}, {figures['model']['dtype']}): "
              + "; ".join(parts)
              + (f"; errors: {figures['errors']}" if figures["errors"] else "")
              + (f"; left out for time: {', '.join(figures['left_out'])}" if figures["left_out"] else ""))
    status = "failed" if figures["errors"] else "passed" if rows else "skipped"
    return Check(name, status, detail, figures)


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


def _batches(text: str) -> list[int]:
    values = [int(b) for b in text.split(",") if b.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated batch sizes, e.g. 16,64")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="torch device of the checks (default cuda; cpu: the smoke run)")
    parser.add_argument("--texts", type=int, default=12, help="seeded texts per spec in the parity check")
    parser.add_argument("--speed-texts", type=int, default=None,
                        help="texts per call in the speed check (default 20 on a GPU, 2 on the CPU)")
    parser.add_argument("--speed-tokens", type=int, default=None,
                        help="tokens per text in the speed check (default 200 on a GPU, 40 on the CPU)")
    parser.add_argument("--min-seconds", type=float, default=1.0, help="time per speed measurement")
    parser.add_argument("--skip-generation", action="store_true", help="leave out the generation row")
    parser.add_argument("--gen-shape", default=None,
                        help=f"model of the generation row: llama-1b (default on a GPU) or LAYERSxHIDDEN[xVOCAB] "
                             f"(default on the CPU: {TINY_SHAPE})")
    parser.add_argument("--gen-batches", type=_batches, default=[16, 64], help="batch sizes (default 16,64)")
    parser.add_argument("--gen-tokens", type=int, default=64, help="timed decoding steps per measurement")
    parser.add_argument("--gen-warmup", type=int, default=4, help="untimed steps first (the prompt included)")
    parser.add_argument("--gen-seconds", type=float, default=4.0,
                        help="a measurement stops after this long (each of its phases)")
    parser.add_argument("--gen-only", default=None, help="comma-separated scheme names to measure (default all)")
    parser.add_argument("--skip-vllm", action="store_true", help="leave out the vLLM runs")
    parser.add_argument("--timeout", type=int, default=240, help="seconds per vLLM run")
    parser.add_argument("--max-seconds", type=float, default=450.0,
                        help="the run's time budget: generation starts no measurement past it (less the vLLM "
                             "runs' --timeout where vLLM is installed)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file (after every check)")
    args = parser.parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"gpu_check: --device {args.device}, but torch {torch.__version__} sees no CUDA device; "
              "run with --device cpu for the smoke run", file=sys.stderr)
        return 2
    started = time.perf_counter()
    gpu = args.device.startswith("cuda")
    speed_texts = args.speed_texts or (20 if gpu else 2)  # torch on the CPU is slow at these:
    speed_tokens = args.speed_tokens or (200 if gpu else 40)  # the smoke run only runs them
    info = machine(args.device)
    print("gpu_check: " + ", ".join(f"{k} {v}" for k, v in info.items()), flush=True)
    checks: list[Check] = []

    def record(run: Callable[[], Check]) -> None:
        begin = time.perf_counter()
        check = run()
        check.seconds = round(time.perf_counter() - begin, 1)
        checks.append(check)
        print(f"gpu_check: {check.name}: {check.status.upper()}: {check.detail} [{check.seconds} s]", flush=True)
        if args.json:  # after every check: a run cut short keeps what it measured
            args.json.write_text(json.dumps({"machine": info, "checks": [asdict(c) for c in checks],
                                             "seconds": round(time.perf_counter() - started, 1)},
                                            indent=2, default=str) + "\n", encoding="utf-8")

    vllm_runs = 0 if args.skip_vllm or find_spec("vllm") is None else 1 + (find_spec("ray") is not None)
    deadline = started + args.max_seconds - vllm_runs * args.timeout
    record(lambda: kernel_parity(args.device, args.texts))
    record(lambda: detector_speed(args.device, speed_texts, speed_tokens, args.min_seconds))
    if not args.skip_generation:
        shape = args.gen_shape or ("llama-1b" if gpu else TINY_SHAPE)
        only = args.gen_only.split(",") if args.gen_only else None
        record(lambda: generation(args.device, shape, args.gen_batches, tokens=args.gen_tokens,
                                  warmup=args.gen_warmup, seconds=args.gen_seconds, deadline=deadline, only=only))
    if not args.skip_vllm:
        with tempfile.TemporaryDirectory(prefix="evalrun-gpu-check-") as tmp:
            record(lambda: vllm_run(args.device, Path(tmp), [], "vllm: run", args.timeout))
            record(lambda: vllm_in_ray(args.device, Path(tmp), args.timeout))
    failed = [c.name for c in checks if c.status == "failed"]
    print(f"gpu_check: {len(checks) - len(failed)} of {len(checks)} checks passed or skipped"
          + (f"; FAILED: {', '.join(failed)}" if failed else "")
          + f" in {time.perf_counter() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
