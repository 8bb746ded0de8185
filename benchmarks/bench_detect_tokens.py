"""Batched detection of many texts, in tokens per CPU-second, as ratios against baselines
measured in the same run: MarkLLM's KGW detector and the keyed-hash limit.

Every rate is over the same token ids (uniformly random ids: the worst case for any cache,
since every context token occurs about equally often).

* ``evalrun detect --tokens FILE`` is run as a child process (start-up, imports, JSON parsing
  and printing included); its CPU time is the child's user + system time. Native and
  lefthash rows run on a file of ``--many-texts`` texts (start-up amortised, as when detecting
  a whole benchmark's outputs; lefthash draws each context's green list once, so its cost
  per token falls as texts share contexts) and on the ``--texts`` file; the start-up alone is
  the CPU time of a one-text file.
* in-process rows call ``scheme.detect_many`` on all texts directly; ``warm`` repeats it in
  the same process (reference-compatible lefthash then finds its green lists drawn: one per
  distinct context token, kept in the bounded seed-table cache).
* MarkLLM's KGW detector (``markllm.watermark.kgw.KGWUtils.score_sequence``, MarkLLM's default
  KGW config: lefthash with one context token, gamma 0.5) runs in the Python given by
  ``--markllm-python`` (a venv with ``markllm`` installed) on a prefix of the same texts
  until ``--markllm-seconds`` of CPU time have passed; torch is held to one thread.
* the keyed-hash limit hashes every token once with the key (``bench_detection.baseline``):
  in one numpy pass over all texts (the limit of a batched pass), and in one call per text
  (what ``bench_detection.py`` reports, the per-text limit).

All processes run one thread. Selfhash traces one green list per distinct n-gram
(``size`` mt19937 draws each), so it runs on the first ``--selfhash-texts`` texts only.

    python benchmarks/bench_detect_tokens.py [--texts 5000] [--tokens 200] [--vocab 32000]
        [--markllm-python /work/refvenv-markllm/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from bench_detection import KEY, baseline
from evalrun.watermark.registry import parse_watermark

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

NATIVE = ("native kgw", "kgw:gamma=0.25,delta=2")
LEFTHASH = ("compat kgw lefthash", "kgw:seeding=lefthash,gamma=0.25")
SELFHASH = ("compat kgw selfhash", "kgw:seeding=selfhash,gamma=0.25")

#: runs in MarkLLM's venv: argv = token-id .npy file, vocab size, CPU seconds, window scheme
MARKLLM_CHILD = textwrap.dedent("""
    import sys, time, types
    import numpy as np, torch
    torch.set_num_threads(1)
    from markllm.watermark.kgw.kgw import KGWConfig, KGWUtils
    texts = np.load(sys.argv[1]); vocab = int(sys.argv[2]); budget = float(sys.argv[3])
    model = types.SimpleNamespace(model=None, tokenizer=None, vocab_size=vocab, device="cpu",
                                  gen_kwargs={})
    config = KGWConfig(None, model)  # MarkLLM's own config/KGW.json
    config.window_scheme = sys.argv[4]
    utils = KGWUtils(config)
    done, start = 0, time.process_time()
    for row in texts:
        utils.score_sequence(torch.from_numpy(row))
        done += len(row) - config.prefix_length
        if time.process_time() - start >= budget:
            break
    print(done / (time.process_time() - start), config.gamma, config.prefix_length)
""")


def markllm_rate(python: str, texts: np.ndarray, vocab: int, seconds: float,
                 window: str = "left") -> tuple[float, str]:
    """MarkLLM's scored tokens per CPU-second (its own clock, imports excluded)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ids.npy"
        np.save(path, texts)
        out = subprocess.run([python, "-c", MARKLLM_CHILD, str(path), str(vocab), str(seconds),
                              window], capture_output=True, text=True, check=True,
                             env={**os.environ, **ONE_THREAD})
    rate, gamma, prefix = out.stdout.split()
    return float(rate), f"gamma {gamma}, prefix_length {prefix}, window {window}"


#: the child runs as after any install: bytecode cached (this sandbox sets
#: PYTHONDONTWRITEBYTECODE, which would recompile evalrun's modules in every process)
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cli_cpu(spec: str, path: Path, texts: int, vocab: int) -> float:
    """CPU seconds (user + system) of a whole ``evalrun detect --tokens`` child process over
    a file of ``texts`` texts."""
    exe = shutil.which("evalrun", path=str(Path(sys.executable).parent)) or "evalrun"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([exe, "detect", "--watermark", spec, "--key", KEY, "--tokens",
                           str(path), "--vocab-size", str(vocab)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env={**CHILD_ENV, **ONE_THREAD})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode()[-500:])
    lines = proc.stdout.count(b"\n")
    if lines != texts:
        raise RuntimeError(f"{lines} results for {texts} texts")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cli_rate(spec: str, path: Path, count: tuple[int, int], vocab: int) -> float:
    """Tokens per CPU-second of a whole ``evalrun detect --tokens`` child process over
    ``count = (tokens, texts)``."""
    return count[0] / cli_cpu(spec, path, count[1], vocab)


def in_process_rate(spec: str, texts: list[np.ndarray], vocab: int) -> float:
    """Tokens per CPU-second of one ``detect_many`` call over all ``texts`` (imports done)."""
    scheme = parse_watermark(spec)
    scheme.detect_many([[0, 1]], KEY, vocab)  # imports (torch for compat), one green list
    start = time.process_time()
    dets = scheme.detect_many(texts, KEY, vocab)
    assert len(dets) == len(texts)
    return sum(len(t) for t in texts) / (time.process_time() - start)


def mt19937_floor(vocab: int, gamma: float, seeds: int = 2000) -> float:
    """Distinct n-grams per CPU-second when each costs only its ``int(vocab * gamma)`` raw
    mt19937 draws (numpy's generator, seeded as torch seeds): the bound for selfhash texts
    whose n-grams are all distinct, whatever the code around the draws."""
    bit_gen = np.random.MT19937(0)
    size = int(vocab * gamma)
    start = time.process_time()
    for seed in range(seeds):
        bit_gen._legacy_seeding(seed)
        bit_gen.random_raw(size)
    return seeds / (time.process_time() - start)


def write_tokens(path: Path, texts: np.ndarray) -> None:
    with path.open("w") as fh:
        for i, row in enumerate(texts.tolist()):
            fh.write(json.dumps({"id": i, "token_ids": row}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=5000)
    ap.add_argument("--many-texts", type=int, default=50_000,
                    help="texts in the file of the many-texts CLI row (start-up amortised)")
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--vocab", type=int, default=32_000)
    ap.add_argument("--selfhash-texts", type=int, default=250)
    ap.add_argument("--markllm-python", default=os.environ.get("MARKLLM_PYTHON"))
    ap.add_argument("--markllm-seconds", type=float, default=5.0)
    ap.add_argument("--markllm-selfhash", action="store_true",
                    help="also time MarkLLM's KGW with window_scheme=self on one scored token"
                         " (V green lists per token: seconds per token at V=32000)")
    args = ap.parse_args()
    texts = np.random.default_rng(0).integers(0, args.vocab, size=(args.texts, args.tokens))
    rows = list(texts)
    n_all = (texts.size, args.texts)
    print(f"texts: {args.texts} x {args.tokens} tokens, vocab {args.vocab}, uniform ids; "
          f"load before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")

    limit = baseline(texts.reshape(1, -1), repeat=5)
    per_text = baseline(texts, repeat=1)
    ml, ml_sel = None, None
    if args.markllm_python:
        ml, ml_cfg = markllm_rate(args.markllm_python, texts, args.vocab, args.markllm_seconds)
        print(f"MarkLLM KGW detector ({ml_cfg}): {ml:,.0f} tokens/CPU-s")
        if args.markllm_selfhash:
            ml_sel, cfg = markllm_rate(args.markllm_python, texts[:1, :2], args.vocab, 0.0,
                                       window="self")
            print(f"MarkLLM KGW detector ({cfg}): {ml_sel:,.3f} tokens/CPU-s")
    else:
        print("MarkLLM: not measured (give --markllm-python or $MARKLLM_PYTHON)")
    print(f"keyed-hash limit: one numpy pass {limit:,.0f}, one call per text {per_text:,.0f}"
          f" tokens/CPU-s")

    results: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        every = Path(tmp) / "all.jsonl"
        write_tokens(every, texts)
        some = Path(tmp) / "some.jsonl"
        k = min(args.selfhash_texts, args.texts)
        write_tokens(some, texts[:k])
        one = Path(tmp) / "one.jsonl"
        write_tokens(one, texts[:1])
        cli_cpu(NATIVE[1], one, 1, args.vocab)  # writes the bytecode caches, as any install
        startup = min(cli_cpu(NATIVE[1], one, 1, args.vocab) for _ in range(3))
        many = Path(tmp) / "many.jsonl"
        big = np.random.default_rng(1).integers(0, args.vocab, size=(args.many_texts,
                                                                     args.tokens))
        write_tokens(many, big)
        many_cpu = cli_cpu(NATIVE[1], many, args.many_texts, args.vocab)
        results.append((f"{NATIVE[0]}: evalrun detect --tokens, {args.many_texts} texts",
                        big.size / many_cpu))
        results.append((f"{LEFTHASH[0]}: evalrun detect --tokens, {args.many_texts} texts",
                        cli_rate(LEFTHASH[1], many, (big.size, args.many_texts), args.vocab)))
        print(f"evalrun detect start-up (a one-text file): {startup:.3f} CPU-s; past it, "
              f"{args.many_texts} texts take {many_cpu - startup:.3f} CPU-s = "
              f"{big.size / (many_cpu - startup):,.0f} tokens/CPU-s")
        del big
        for label, spec in (NATIVE, LEFTHASH):
            results.append((f"{label}: evalrun detect --tokens, {args.texts} texts",
                            cli_rate(spec, every, n_all, args.vocab)))
        selfhash_cli = cli_rate(SELFHASH[1], some, (k * args.tokens, k), args.vocab)
        results.append((f"{SELFHASH[0]}: evalrun detect --tokens, {k} texts", selfhash_cli))
    for label, spec in (NATIVE, LEFTHASH):
        results.append((f"{label}: detect_many in process", in_process_rate(spec, rows, args.vocab)))
        results.append((f"{label}: detect_many in process, warm",
                        in_process_rate(spec, rows, args.vocab)))
    results.append((f"{SELFHASH[0]}: detect_many in process, {k} texts",
                    in_process_rate(SELFHASH[1], rows[:k], args.vocab)))

    floor = mt19937_floor(args.vocab, 0.25)
    head = (f"{'':62s} {'tokens/CPU-s':>13s} {'x MarkLLM':>10s} {'/ one pass':>11s}"
            f" {'/ per text':>11s}")
    print(head)
    for label, rate in results:
        vs = f"{rate / ml:10.1f}" if ml else f"{'-':>10s}"
        print(f"{label:62s} {rate:13,.0f} {vs} {rate / limit:11.4f} {rate / per_text:11.4f}")
    if ml_sel:
        print(f"selfhash against MarkLLM's selfhash KGW: "
              f"{selfhash_cli / ml_sel:,.0f}x (in process: {results[-1][1] / ml_sel:,.0f}x)")
    print(f"selfhash floor: each distinct n-gram seeds its own green list, and membership "
          f"needs int(V*gamma) = {int(args.vocab * 0.25)} mt19937 draws (torch's shuffle); "
          f"drawing them alone allows at most {floor:,.0f} tokens/CPU-s"
          + (f" = {floor / ml:.1f}x MarkLLM's lefthash KGW" if ml else ""))
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
