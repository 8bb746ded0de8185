"""evalrun's detection against MarkLLM's detector, in one run on the same token ids, for the
MarkLLM-compatible schemes whose detection needs no model: ``dipmark`` (MarkLLM "DIP"), ``pf``
("PF"), ``exp_gumbel`` ("EXPGumbel") and ``morphmark`` ("MorphMark") -- issue 32.

Per scheme: ``--texts`` uniformly random texts of ``--tokens`` ids at vocabulary ``--vocab``;
CPU milliseconds per text of

* MarkLLM (THU-BPM/MarkLLM at 112fa74, a scratch checkout in ``MARKLLM_DIR``, run by
  ``--markllm-python``, its own venv with torch/transformers): ``<Scheme>.detect_watermark(text)``,
  the call MarkLLM users make, with ``text = " ".join(f"t{id}")`` on the word-level tokenizer of
  ``scripts/markllm_reference.py`` (its tokenisation is included in the time), MarkLLM's default
  config for each scheme, objects built as that script builds them (``Runner.make``: DIP's
  ``hash_key`` shim; construction -- EXPGumbel's table -- is not timed). torch holds one thread;
  one warm-up call first.
* evalrun, in process: ``scheme.detect_many(texts, key, V)`` in native mode and with
  ``compat=markllm`` (``--key`` = MarkLLM's config integer: DIP ``key`` 42, PF ``salt_key``
  35317 with ``seed=0``, EXPGumbel ``seed`` 42, MorphMark ``hash_key`` 15485863); a fresh scheme
  object and empty process-wide caches (seed tables, membership memos) for each of ``--repeat``
  calls, after one warm-up call on another text; the best call.

and the ratios MarkLLM time / evalrun time. As a correctness guard every compat text's
``extra["markllm_score"]`` is compared with the ``score`` MarkLLM returned for it (float32
rounding: relative 1e-6; PF's raw float32 sum bit for bit).

EXPGumbel: MarkLLM builds a (prefix_length*V) x V float32 table twice (uniform and Gumbel),
2*2*V*V*4 bytes: 40 GB at V = 50,257, which it cannot allocate here. Its row is therefore timed
at ``--exp-vocab`` (default 5,000: 400 MB), where its table fits, on both sides; evalrun's rows
at ``--vocab`` follow on the first ``--exp-texts`` texts, with no MarkLLM figure.

Without ``MARKLLM_DIR`` (or ``--markllm-dir``) MarkLLM's side is skipped with a message and
only evalrun's rows are printed. Run (about 2 minutes on 2 shared cores)::

    OMP_NUM_THREADS=1 MARKLLM_DIR=/work/scratch/markllm \\
        python benchmarks/bench_markllm.py [--texts 50] [--tokens 200] [--vocab 50257] \\
        [--markllm-python /work/scratch/mllm-venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from evalrun.watermark.engine.membership_memo import clear_memos
from evalrun.watermark.engine.seed_tables import seed_tables
from evalrun.watermark.registry import parse_watermark

ROOT = Path(__file__).resolve().parent.parent
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
NATIVE_KEY = "bench-markllm key"

#: (evalrun name, MarkLLM algorithm, native spec, compat spec, MarkLLM config field of the key)
SCHEMES = (
    ("dipmark", "DIP", "dipmark", "dipmark:compat=markllm", "key"),
    ("pf", "PF", "pf", "pf:compat=markllm,ngram=8,seed=0", "salt_key"),
    ("morphmark", "MorphMark", "morphmark", "morphmark:compat=markllm", "hash_key"),
    ("exp_gumbel", "EXPGumbel", "exp_gumbel", "exp_gumbel:compat=markllm", "seed"),
)
#: MarkLLM's config integers at 112fa74 (checked against MARKLLM_DIR/config when it is set)
DEFAULT_KEYS = {"DIP": 42, "PF": 35317, "MorphMark": 15485863, "EXPGumbel": 42}

#: runs in MarkLLM's venv: argv = scripts/ directory, JSON [[algorithm, V, ids .npy], ...];
#: prints JSON {algorithm: {V, cpu_s, scores}}
MARKLLM_CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import markllm_reference as ref
    ref.set_threads()
    out = {}
    for name, vocab, path in json.loads(sys.argv[2]):
        runner = ref.Runner(vocab)
        start = time.process_time()
        wm = runner.make(name)
        build = time.process_time() - start
        texts = [ref.ids_to_text(row) for row in np.load(path).tolist()]
        wm.detect_watermark(ref.ids_to_text(list(range(1, 30))))  # warm-up
        scores = []
        start = time.process_time()
        for text in texts:
            scores.append(ref._fl(wm.detect_watermark(text)["score"]))
        cpu = time.process_time() - start
        out[name] = {"V": vocab, "cpu_s": cpu, "build_s": build, "scores": scores}
        print(f"  MarkLLM {name} V={vocab}: {1000 * cpu / len(texts):.2f} ms/text "
              f"(construction, untimed: {build:.2f} s)", file=sys.stderr, flush=True)
    print(json.dumps(out))
""")


def markllm_side(python: str, jobs: list[tuple[str, int, np.ndarray]]) -> dict:
    """MarkLLM's CPU seconds and scores per algorithm, in one child process of its venv."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = []
        for name, vocab, ids in jobs:
            path = Path(tmp) / f"{name}.npy"
            np.save(path, ids)
            spec.append([name, vocab, str(path)])
        proc = subprocess.run([python, "-c", MARKLLM_CHILD, str(ROOT / "scripts"), json.dumps(spec)],
                              stdout=subprocess.PIPE, text=True, check=True,
                              env={**os.environ, **ONE_THREAD})
    return json.loads(proc.stdout)


def evalrun_side(spec: str, key: str, texts: list[np.ndarray], vocab: int, repeat: int,
                 warm: np.ndarray) -> tuple[float, list]:
    """Best CPU seconds of ``repeat`` ``detect_many`` calls, and the detections: each call from a
    fresh scheme and empty process-wide caches (no green list drawn), as in a fresh process."""
    best, dets = float("inf"), []
    for _ in range(repeat):
        seed_tables().clear()
        clear_memos()
        scheme = parse_watermark(spec)
        scheme.detect_many([warm], key, vocab)
        start = time.process_time()
        dets = scheme.detect_many(texts, key, vocab)
        best = min(best, time.process_time() - start)
        assert len(dets) == len(texts)
    return best, dets


def agreement(dets: list, scores: list[float], exact: bool) -> tuple[int, float]:
    """(texts whose markllm_score equals MarkLLM's score, the largest relative difference)."""
    ok, worst = 0, 0.0
    for det, ref in zip(dets, scores):
        ours = det.extra.get("markllm_score")
        if ours is None:
            worst = float("inf")
            continue
        rel = abs(ours - ref) / max(abs(ref), 1e-300)
        worst = max(worst, rel)
        ok += (ours == ref) if exact else (abs(ours - ref) <= 1e-6 * abs(ref) + 1e-12)
    return ok, worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=50)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--vocab", type=int, default=50_257)
    ap.add_argument("--exp-vocab", type=int, default=5_000,
                    help="vocabulary of the EXPGumbel comparison (MarkLLM's table is 16*V*V bytes)")
    ap.add_argument("--exp-texts", type=int, default=10,
                    help="texts of evalrun's exp_gumbel rows at --vocab (no MarkLLM figure)")
    ap.add_argument("--repeat", type=int, default=3, help="evalrun calls per row; the best is kept")
    ap.add_argument("--markllm-dir", default=os.environ.get("MARKLLM_DIR"))
    ap.add_argument("--markllm-python", default=os.environ.get("MARKLLM_PYTHON", "/work/scratch/mllm-venv/bin/python"))
    args = ap.parse_args()

    rng = np.random.default_rng(20261126)
    ids = rng.integers(0, args.vocab, (args.texts, args.tokens), dtype=np.int64)
    exp_ids = rng.integers(0, args.exp_vocab, (args.texts, args.tokens), dtype=np.int64)
    warm_big = rng.integers(0, args.vocab, args.tokens, dtype=np.int64)
    warm_exp = rng.integers(0, args.exp_vocab, args.tokens, dtype=np.int64)
    keys = dict(DEFAULT_KEYS)

    ml: dict = {}
    if not args.markllm_dir:
        print("MARKLLM_DIR not set: MarkLLM's side skipped (set it to a MarkLLM 112fa74 checkout, "
              "see scripts/markllm_reference.py); evalrun's rows only", flush=True)
    else:
        os.environ["MARKLLM_DIR"] = args.markllm_dir
        for alg in keys:
            cfg = json.loads((Path(args.markllm_dir) / "config" / f"{alg}.json").read_text())
            field = next(s[4] for s in SCHEMES if s[1] == alg)
            assert cfg[field] == keys[alg], (alg, cfg[field])
        jobs = [(alg, args.exp_vocab if alg == "EXPGumbel" else args.vocab,
                 exp_ids if alg == "EXPGumbel" else ids) for _, alg, *_ in SCHEMES]
        print(f"MarkLLM ({args.markllm_dir}, {args.markllm_python}): detect_watermark(text)", flush=True)
        ml = markllm_side(args.markllm_python, jobs)

    rows = []
    for name, alg, native, compat, _ in SCHEMES:
        vocab, arr, warm = ((args.exp_vocab, exp_ids, warm_exp) if name == "exp_gumbel"
                            else (args.vocab, ids, warm_big))
        texts = list(arr)
        t_nat, _ = evalrun_side(native, NATIVE_KEY, texts, vocab, args.repeat, warm)
        t_cmp, dets = evalrun_side(compat, str(keys[alg]), texts, vocab, args.repeat, warm)
        m = ml.get(alg)
        match = agreement(dets, m["scores"], exact=name == "pf") if m else None
        rows.append((name, alg, len(texts), vocab, m["cpu_s"] if m else None, t_nat, t_cmp, match))
        print(f"  evalrun {name} V={vocab}: native {1000 * t_nat / len(texts):.3f}, "
              f"compat {1000 * t_cmp / len(texts):.3f} ms/text", flush=True)
    if args.exp_texts and args.exp_vocab != args.vocab:
        texts = list(ids[:args.exp_texts])
        t_nat, _ = evalrun_side("exp_gumbel", NATIVE_KEY, texts, args.vocab, 1, warm_big)
        t_cmp, _ = evalrun_side("exp_gumbel:compat=markllm", str(keys["EXPGumbel"]), texts, args.vocab, 1, warm_big)
        rows.append(("exp_gumbel", "EXPGumbel", len(texts), args.vocab, None, t_nat, t_cmp, None))

    print(f"\n{args.tokens} uniform random tokens per text; CPU ms per text, one thread; "
          f"MarkLLM: detect_watermark(text); evalrun: detect_many (best of {args.repeat})")
    print(f"{'scheme':11s} {'MarkLLM':9s} {'texts':>5s} {'V':>6s} {'MarkLLM':>9s} {'native':>8s} "
          f"{'compat':>8s} {'x native':>9s} {'x compat':>9s}  markllm_score == MarkLLM")
    for name, alg, n, vocab, t_ml, t_nat, t_cmp, match in rows:
        ml_ms = f"{1000 * t_ml / n:9.2f}" if t_ml is not None else f"{'-':>9s}"
        r_nat = f"{t_ml / t_nat:9.1f}" if t_ml is not None else f"{'-':>9s}"
        r_cmp = f"{t_ml / t_cmp:9.1f}" if t_ml is not None else f"{'-':>9s}"
        note = (f"{match[0]}/{n} (max rel diff {match[1]:.1e})" if match
                else ("MarkLLM cannot build its 16*V^2-byte table" if alg == "EXPGumbel" and t_ml is None and ml
                      else "-"))
        # three decimals: native rows take tens of microseconds per text
        print(f"{name:11s} {alg:9s} {n:5d} {vocab:6d} {ml_ms} {1000 * t_nat / n:8.3f} "
              f"{1000 * t_cmp / n:8.3f} {r_nat} {r_cmp}  {note}")
    if any(r[7] is not None and r[7][0] != r[2] for r in rows):
        sys.exit("markllm_score differs from MarkLLM's score on some text")


if __name__ == "__main__":
    main()
