"""Batched detection of many texts, in tokens per CPU-second, as ratios against baselines
measured in the same run: MarkLLM's KGW detector and the keyed-hash limit.

Every rate is over the same token ids (uniformly random ids: the worst case for any cache,
since every context token occurs about equally often).

* ``evalrun detect --tokens FILE`` is run as a child process (start-up, imports, JSON parsing
  and printing included); its CPU time is the child's user + system time. Every scheme runs
  on a file of ``--many-texts`` texts (start-up amortised, as when detecting a whole
  benchmark's outputs; lefthash draws each context's green list once and selfhash decides
  each (seed, target) pair once, so their cost per token falls as texts share them) and on
  the ``--texts`` file; the start-up alone is the CPU time of a one-text file (Python,
  numpy and ``scipy.special``, which the p-values need). MarkLLM's rate leaves its imports
  out, so each command row is also compared past the start-up: like with like.
* in-process rows call ``scheme.detect_many`` on all texts directly, each call from empty
  caches (no green list drawn, no selfhash pair decided, as in a fresh process); ``warm``
  repeats it with what earlier calls left (reference-compatible lefthash then finds its
  green lists drawn: one per distinct context token, kept in the bounded seed-table cache).
* MarkLLM's KGW detector (``markllm.watermark.kgw.KGWUtils.score_sequence``, MarkLLM's default
  KGW config: lefthash with one context token, gamma 0.5) runs in the Python given by
  ``--markllm-python`` (a venv with ``markllm`` installed) on the same texts in turn, in
  windows of ``--markllm-seconds`` of CPU time; torch is held to one thread.
* the keyed-hash limit hashes every token once with the key (``bench_detection.baseline``):
  in one numpy pass over all texts (the limit of a batched pass), and in one call per text
  (what ``bench_detection.py`` reports, the per-text limit).

All processes run one thread. Every rate is the best of three (three runs of each evalrun
row, from the same caches; three windows of ``--markllm-seconds`` for MarkLLM): on a shared
machine, interference from other work only ever adds CPU time. Selfhash decides each distinct (seed, target) pair once (up to
``size`` mt19937 draws each) with the compiled kernel (``kernels/fisher_yates.c``); its numpy
twin, what runs where the kernel was not built, is timed on the first ``--numpy-trace-texts``
texts. The kernel alone, on (seed, target) pairs, is the bound for texts whose pairs are all
distinct, as uniform ids nearly are.

``--corpus FILE`` (UTF-8 prose) adds the same rows on natural text: the file's first
``--texts`` x ``--tokens`` ids under the embedded model's tokenizer (vocab 8192), MarkLLM
measured again on those ids. Natural text repeats contexts and selfhash pairs, as model
outputs do. Jane Austen's novels, from Debian's ``r-cran-janeaustenr``::

    Rscript -e 'library(janeaustenr); writeLines(as.character(austen_books()$text), "austen.txt")'

    python benchmarks/bench_detect_tokens.py [--texts 5000] [--tokens 200] [--vocab 32000]
        [--markllm-python /work/refvenv-markllm/bin/python] [--corpus austen.txt]
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

from evalrun.kernels import fisher_yates
from evalrun.watermark.engine.membership_memo import clear_memos
from evalrun.watermark.engine.seed_tables import seed_tables
from evalrun.watermark.registry import parse_watermark

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

NATIVE = ("native kgw", "kgw:gamma=0.25,delta=2")
LEFTHASH = ("compat kgw lefthash", "kgw:seeding=lefthash,gamma=0.25")
SELFHASH = ("compat kgw selfhash", "kgw:seeding=selfhash,gamma=0.25")

#: runs in MarkLLM's venv: argv = token-id .npy file, vocab size, CPU seconds per window,
#: window scheme, windows
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
    rates, at = [], 0
    for window in range(int(sys.argv[5])):  # the best window, as evalrun's best run
        done, start = 0, time.process_time()
        while True:
            row = texts[at % len(texts)]
            at += 1
            utils.score_sequence(torch.from_numpy(row))
            done += len(row) - config.prefix_length
            if time.process_time() - start >= budget:
                break
        rates.append(done / (time.process_time() - start))
    print(max(rates), config.gamma, config.prefix_length)
""")

#: runs of each evalrun row (and CPU-time windows of MarkLLM's); the best is reported, since
#: interference from other work on a shared machine only ever adds CPU time
REPEAT = 3


def markllm_rate(python: str, texts: np.ndarray, vocab: int, seconds: float,
                 window: str = "left") -> tuple[float, str]:
    """MarkLLM's scored tokens per CPU-second (its own clock, imports excluded): the best of
    :data:`REPEAT` windows of ``seconds`` CPU-seconds each, over the texts in turn."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ids.npy"
        np.save(path, texts)
        out = subprocess.run([python, "-c", MARKLLM_CHILD, str(path), str(vocab), str(seconds),
                              window, str(REPEAT)], capture_output=True, text=True, check=True,
                             env={**os.environ, **ONE_THREAD})
    rate, gamma, prefix = out.stdout.split()
    return float(rate), f"gamma {gamma}, prefix_length {prefix}, window {window}"


#: the child runs as after any install: bytecode cached (this sandbox sets
#: PYTHONDONTWRITEBYTECODE, which would recompile evalrun's modules in every process)
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cli_cpu(spec: str, path: Path, texts: int, vocab: int, repeat: int = REPEAT) -> float:
    """CPU seconds (user + system) of a whole ``evalrun detect --tokens`` child process over
    a file of ``texts`` texts: the least of ``repeat`` runs."""
    return min(_cli_cpu_once(spec, path, texts, vocab) for _ in range(repeat))


def _cli_cpu_once(spec: str, path: Path, texts: int, vocab: int) -> float:
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


#: (label, tokens/CPU-s, tokens/CPU-s past the command's start-up or None): one printed row
Row = tuple[str, float, "float | None"]


def cli_row(label: str, spec: str, path: Path, count: tuple[int, int], vocab: int,
            startup: float) -> Row:
    """Tokens per CPU-second of a whole ``evalrun detect --tokens`` child process over
    ``count = (tokens, texts)``, and past its ``startup`` CPU-seconds (MarkLLM's rate leaves
    its own imports out: this one compares like with like)."""
    cpu = cli_cpu(spec, path, count[1], vocab)
    return label, count[0] / cpu, count[0] / max(cpu - startup, 1e-9)


def print_rows(rows: list[Row], ml: float | None, limit: float | None = None,
               per_text: float | None = None) -> None:
    """The table of rates: against MarkLLM, past start-up (command rows), and against the
    keyed-hash limits where given."""
    head = (f"{'':62s} {'tokens/CPU-s':>13s} {'x MarkLLM':>10s} {'past start-up':>14s}"
            + (f" {'/ one pass':>11s} {'/ per text':>11s}" if limit and per_text else ""))
    print(head)
    for label, rate, past in rows:
        vs = f"{rate / ml:10.1f}" if ml else f"{'-':>10s}"
        after = f"{past / ml:13.1f}x" if ml and past else f"{'':>14s}"
        tail = f" {rate / limit:11.4f} {rate / per_text:11.4f}" if limit and per_text else ""
        print(f"{label:62s} {rate:13,.0f} {vs} {after}{tail}")


def in_process_rate(spec: str, texts: list[np.ndarray], vocab: int, cold: bool = True,
                    repeat: int = REPEAT) -> float:
    """Tokens per CPU-second of one ``detect_many`` call over all ``texts`` (imports done),
    the best of ``repeat`` calls; ``cold``: each from a fresh process's caches (no green list
    drawn, no pair decided), else from what earlier calls left."""
    scheme = parse_watermark(spec)
    best = 0.0
    for _ in range(repeat):
        if cold:
            seed_tables().clear()
            clear_memos()
        # imports (torch too where compat has no compiled kernel), the hashint table
        # (selfhash), one green list: a text long enough to score under every scheme here
        scheme.detect_many([list(range(12))], KEY, vocab)
        start = time.process_time()
        dets = scheme.detect_many(texts, KEY, vocab)
        assert len(dets) == len(texts)
        best = max(best, sum(len(t) for t in texts) / (time.process_time() - start))
    return best


def kernel_rate(vocab: int, gamma: float, pairs: int = 16_000, green: float = 0.0) -> float:
    """(seed, target) pairs per CPU-second of the compiled Fisher-Yates kernel alone, random
    32-bit seeds and targets: the selfhash bound when every n-gram is distinct. With
    ``green``, that fraction of the targets is drawn from their own green lists, as in
    watermarked text (a green target is settled when the shuffle reaches it)."""
    from evalrun.kernels import _fisher_yates

    rng = np.random.default_rng(2)
    seeds = rng.integers(0, 2**32, pairs, dtype=np.uint64).astype(np.uint32)
    targets = rng.integers(0, vocab, pairs).astype(np.uint32)
    if green:
        size = int(vocab * gamma)
        prefixes = np.zeros((pairs, size), dtype=np.uint32)
        _fisher_yates.randperm(seeds, prefixes, vocab, size)
        inside = prefixes[np.arange(pairs), rng.integers(0, size, pairs)]
        targets = np.where(rng.random(pairs) < green, inside, targets).astype(np.uint32)
    flags = np.zeros(pairs, dtype=np.uint8)
    # warm-up at full size: the first ~0.1 s of heavy work in a fresh process runs at a
    # lower clock here (a first call measured 45% slower than the next, whatever the code)
    _fisher_yates.trace(seeds, targets, flags, vocab, int(vocab * gamma))
    best = 0.0
    for _ in range(REPEAT):
        start = time.process_time()
        _fisher_yates.trace(seeds, targets, flags, vocab, int(vocab * gamma))
        best = max(best, pairs / (time.process_time() - start))
    return best


def numpy_trace_rate(spec: str, texts: list[np.ndarray], vocab: int) -> float:
    """:func:`in_process_rate` with the numpy trace, as where the kernel was not built."""
    saved = fisher_yates._compiled
    fisher_yates._compiled = None
    try:
        return in_process_rate(spec, texts, vocab)
    finally:
        fisher_yates._compiled = saved


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
    ap.add_argument("--numpy-trace-texts", type=int, default=250)
    ap.add_argument("--markllm-python", default=os.environ.get("MARKLLM_PYTHON"))
    ap.add_argument("--markllm-seconds", type=float, default=2.0,
                    help="CPU seconds of each of MarkLLM's timed windows")
    ap.add_argument("--markllm-selfhash", action="store_true",
                    help="also time MarkLLM's KGW with window_scheme=self on one scored token"
                         " (V green lists per token: seconds per token at V=32000)")
    ap.add_argument("--corpus", help="UTF-8 prose: also time lefthash and selfhash on its ids")
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

    results: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        every = Path(tmp) / "all.jsonl"
        write_tokens(every, texts)
        one = Path(tmp) / "one.jsonl"
        write_tokens(one, texts[:1])
        cli_cpu(NATIVE[1], one, 1, args.vocab, repeat=1)  # writes the bytecode caches
        startup = cli_cpu(NATIVE[1], one, 1, args.vocab)
        many = Path(tmp) / "many.jsonl"
        big = np.random.default_rng(1).integers(0, args.vocab, size=(args.many_texts,
                                                                     args.tokens))
        write_tokens(many, big)
        many_count = (big.size, args.many_texts)
        del big
        for label, spec in (NATIVE, LEFTHASH, SELFHASH):
            results.append(cli_row(f"{label}: evalrun detect --tokens, {args.many_texts} texts",
                                   spec, many, many_count, args.vocab, startup))
        print(f"evalrun detect start-up (a one-text file): {startup:.3f} CPU-s; past it, "
              f"{args.many_texts} texts of native kgw run at {results[0][2]:,.0f} tokens/CPU-s")
        for label, spec in (NATIVE, LEFTHASH, SELFHASH):
            results.append(cli_row(f"{label}: evalrun detect --tokens, {args.texts} texts",
                                   spec, every, n_all, args.vocab, startup))
        selfhash_cli = results[-1][1]
    for label, spec in (NATIVE, LEFTHASH):
        results.append((f"{label}: detect_many in process",
                        in_process_rate(spec, rows, args.vocab), None))
        results.append((f"{label}: detect_many in process, warm",
                        in_process_rate(spec, rows, args.vocab, cold=False), None))
    selfhash_in = in_process_rate(SELFHASH[1], rows, args.vocab)
    results.append((f"{SELFHASH[0]}: detect_many in process", selfhash_in, None))
    k = min(args.numpy_trace_texts, args.texts)
    results.append((f"{SELFHASH[0]}: numpy trace (kernel not built), {k} texts",
                    numpy_trace_rate(SELFHASH[1], rows[:k], args.vocab), None))
    bound = kernel_rate(args.vocab, 0.25) if fisher_yates.compiled_available() else None
    marked = kernel_rate(args.vocab, 0.25, green=0.9) if bound else None
    print_rows(results, ml, limit, per_text)
    if ml_sel:
        print(f"selfhash against MarkLLM's selfhash KGW: "
              f"{selfhash_cli / ml_sel:,.0f}x (in process: {selfhash_in / ml_sel:,.0f}x)")
    if bound:
        print(f"selfhash bound: each distinct (seed, target) pair takes up to int(V*gamma) = "
              f"{int(args.vocab * 0.25)} mt19937 draws (torch's shuffle); the compiled kernel "
              f"alone decides {bound:,.0f} pairs/CPU-s"
              + (f" = {bound / ml:.1f}x MarkLLM's lefthash KGW" if ml else "")
              + f"; in process reaches {selfhash_in / bound:.2f} of it (above 1 where pairs "
              f"repeat: a candidate that minimises its own anchored hash seeds by itself)")
        print(f"the kernel alone when 90% of targets are green, as in watermarked text (a "
              f"green one is settled when the shuffle reaches it): {marked:,.0f} pairs/CPU-s"
              + (f" = {marked / ml:.1f}x MarkLLM" if ml else "")
              + f", {marked / bound:.2f}x the uniform rate")
    else:
        print("selfhash bound: the compiled kernel was not built with this install")
    if args.corpus:
        corpus_rows(args.corpus, args.texts, args.tokens, args.markllm_python,
                    args.markllm_seconds, startup)
    print(f"load after: {os.getloadavg()[0]:.2f}")


def corpus_ids(path: str, texts: int, tokens: int) -> tuple[np.ndarray, int]:
    """``texts`` rows of ``tokens`` ids of the prose in ``path`` (the embedded tokenizer), and
    its vocabulary size."""
    from tokenizers import Tokenizer

    from evalrun.model.embedded import embedded_model_path

    tok = Tokenizer.from_file(str(embedded_model_path() / "tokenizer.json"))
    ids = np.asarray(tok.encode(Path(path).read_text(encoding="utf-8")).ids, dtype=np.int64)
    if len(ids) < texts * tokens:
        raise SystemExit(f"--corpus {path}: {len(ids):,} tokens, fewer than --texts x --tokens "
                         f"= {texts * tokens:,}")
    return ids[: texts * tokens].reshape(texts, tokens), tok.get_vocab_size()


def corpus_rows(path: str, texts: int, tokens: int, markllm_python: str | None,
                markllm_seconds: float, startup: float) -> None:
    """The selfhash and lefthash rows again, on natural text."""
    ids, vocab = corpus_ids(path, texts, tokens)
    rows = list(ids)
    count = (ids.size, texts)
    print(f"\nnatural text: {Path(path).name}, {texts} x {tokens} tokens of the embedded "
          f"tokenizer (vocab {vocab})")
    ml = None
    if markllm_python:
        ml, cfg = markllm_rate(markllm_python, ids, vocab, markllm_seconds)
        print(f"MarkLLM KGW detector ({cfg}): {ml:,.0f} tokens/CPU-s")
    results: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        every = Path(tmp) / "corpus.jsonl"
        write_tokens(every, ids)
        for label, spec in (LEFTHASH, SELFHASH):
            results.append(cli_row(f"{label}: evalrun detect --tokens, {texts} texts", spec,
                                   every, count, vocab, startup))
    for label, spec in (LEFTHASH, SELFHASH):
        results.append((f"{label}: detect_many in process", in_process_rate(spec, rows, vocab),
                        None))
    print_rows(results, ml)


if __name__ == "__main__":
    main()
