"""Watermarking overhead in generation: the embedded model through the hf provider.

For batch sizes 1 and 16, compares decoding throughput (rows x steps per second, see
:func:`timed_run`) with each watermark scheme that imports (default parameters, plus
reference-compatible kgw) against unwatermarked generation with the same model and batch,
in one process.

The comparison is paired, because wall-clock throughput on a small shared machine drifts by
10% and more between runs: each pair runs one batch unwatermarked and one watermarked
(same prompts and sampling seeds, order drawn at random), and a scheme's figure is the median
over ``--pairs`` pairs of watermarked / unwatermarked throughput, with the interquartile
range. An A/A arm (unwatermarked against itself) shows the noise floor the ratios should be
read against. Because that floor is several percent here, each pair also gives an
*attributed* overhead: the only code that differs between the arms is the provider's
per-step token choice (``HFProvider._pick``: watermark processing and sampling), so the
extra time spent there per step, over the unwatermarked run's whole time per step, is the
watermark's cost without the drift of everything else.

Each watermark is measured in a block of its own: the per-seed table cache
(:mod:`evalrun.watermark.engine.seed_tables`) and the seed memos are emptied, ``--warmup`` untimed
tokens (default 4,096) fill them as a real run's first generations would, and then the pairs
are timed; each block's cache hit rate over its timed pairs is printed. The figures describe
a one-scheme run past its first few thousand tokens, whatever order the schemes come in. For
green lists seeded by one token that is past the point where their dense mask table is built
whole (:mod:`evalrun.watermark.engine.mask_tables`); ``--warmup 0`` shows a cold start instead.

``--shape LAYERSxHIDDEN`` (e.g. ``12x768``, GPT-2 small's shape, about 95M parameters with
this vocabulary) swaps in a randomly initialised (seeded) Llama of that shape with the
embedded tokenizer: the forward pass then costs what a mid-sized model's does, while the
watermark's per-step work, which depends on the vocabulary and the batch only, stays the
same. The embedded model (4 layers of 256) is the worst case for the ratio. A random model's
near-uniform next-token distribution is also the worst case for the seed-table cache.

``--vocab N`` gives that random model (of ``--shape``, else the embedded model's 4x256) a
vocabulary of N tokens instead (e.g. 128256, Llama 3's): the watermark's per-step work then
scales as with a real model of that vocabulary. The embedded tokenizer knows 8,192 tokens, so
prompts are then random ids instead of text (12 ids per prompt, drawn from ``[3, N)`` with a
generator seeded by the prompt's text, so both arms of a pair see the same ids; ids 0-2 are the
tokenizer's bos, eos and pad); the provider's decoding of outputs skips ids it does not know.
``--device`` runs the model (and the watermark's processors, which follow the logits) there.
``--json PATH`` also writes ``{"ratios": {scheme: {batch_size: ratio}}}`` (the medians
printed, batch sizes as strings).

Usage: python benchmarks/bench_generation_overhead.py [--max-tokens 64] [--pairs 10]
       [--batch-sizes 1,16] [--shape 12x768] [--vocab 128256] [--device cpu] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any

from evalrun.model.embedded import embedded_model_path
from evalrun.model.generation import GenerationRequest, GenParams, Prompt
from evalrun.plugins.providers.hf import HFProvider
from evalrun.watermark.engine import processing
from evalrun.watermark.engine.seed_tables import seed_tables
from evalrun.watermark.registry import SCHEMES, parse_watermark

KEY = "benchmark-key"
#: reference-compatible kgw takes the reference's integer hash key
COMPAT = "kgw:seeding=lefthash"
COMPAT_KEY = "15485863"
#: schemes whose keys are integers: SynthID's one per tournament layer, Waterfall's owner id
INTEGER_KEYS = {"synthid": "654,400,836,123,340,443,597,160,57,29,590,639,13,715,468,990,"
                           "966,226,324,585,118,504,421,521,129,669,732,225,90,960",
                "waterfall": "42"}


def bench_key(watermark: str) -> str | None:
    """The key the benchmark generates ``watermark`` with (None for no watermark)."""
    if watermark == "none":
        return None
    if "seeding=" in watermark:
        return COMPAT_KEY
    return INTEGER_KEYS.get(watermark.split(":")[0], KEY)


def requests(n: int, watermark: str, max_tokens: int, round_: int) -> list[GenerationRequest]:
    return [GenerationRequest(
        gen_key=f"{watermark}-{round_}-{i}", pack="bench", case={"id": f"c{i}"},
        prompt=Prompt(None, f"Chapter {i + 1}. It was a fine morning, and"),
        params=GenParams(temperature=1.0, max_tokens=max_tokens, seed=round_),
        repetition=i, watermark=watermark, key=bench_key(watermark))
        for i in range(n)]


@dataclass
class Run:
    """One timed batch: seconds in all, seconds in the provider's per-step token choice
    (``_pick``: watermark processing plus sampling, the only code that differs between the
    arms), and model steps."""

    seconds: float
    pick_seconds: float
    steps: int
    rows: int

    @property
    def rate(self) -> float:
        return self.rows * self.steps / self.seconds


def timed_run(provider: HFProvider, batch: int, watermark: str, max_tokens: int,
              round_: int) -> Run:
    """Decoding work per second for one full batch: rows x model steps / seconds.

    Tokens per second would punish whichever arm happens to emit an end-of-sequence token
    early (a finished row still rides along in the batch, and a batch of one pays its prompt
    for fewer tokens), so the work is counted in steps: the batch runs until its longest
    row stops, one forward per token plus one for a row's end-of-sequence token."""
    got = []
    reqs = requests(batch, watermark, max_tokens, round_)
    pick = provider._pick
    spent = [0.0]

    def timed_pick(*args: Any) -> Any:
        start = time.perf_counter()
        try:
            return pick(*args)
        finally:
            spent[0] += time.perf_counter() - start

    provider._pick = timed_pick  # type: ignore[method-assign]
    gc.collect()
    gc.disable()  # as timeit does: a collection landing in one arm is not its cost
    try:
        start = time.perf_counter()
        provider.generate(reqs, lambda req, gen: got.append(gen))
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
        del provider._pick
    errors = [g.error for g in got if g.error]
    if errors:
        raise RuntimeError(f"{watermark}: {errors[0]}")
    steps = max(g.tokens_out + (g.extra.get("finish_reason") == "stop") for g in got)
    return Run(elapsed, spent[0], steps, batch)


AA = "none (A/A)"


def paired(provider: HFProvider, batch: int, watermarks: list[str], max_tokens: int,
           pairs: int, warmup: int) -> dict[str, tuple[list[tuple[float, float]], float]]:
    """Per watermark: the timed pairs' (watermarked / unwatermarked throughput, attributed
    overhead), the latter being the extra ``_pick`` time per step over the unwatermarked
    run's whole time per step, and the seed-table hit rate over the timed pairs.

    Each watermark is measured in its own block that starts from empty caches (seed tables
    and seed memos) and warms them with ``warmup`` untimed tokens: the figure describes a run
    of that scheme, whatever order the schemes come in. Interleaving the schemes instead
    would let their tables evict one another from the shared cache, as no one-scheme run
    does."""
    out: dict[str, tuple[list[tuple[float, float]], float]] = {}
    rng = random.Random(batch)
    for arm in [AA, *watermarks]:
        seed_tables().clear()
        processing._SEED_MEMOS.clear()
        if arm != AA:
            for round_ in range(-(-warmup // (batch * max_tokens))):
                timed_run(provider, batch, arm, max_tokens, 10_000 + round_)
        stats = seed_tables().stats
        stats.hits = stats.misses = 0
        results = []
        for pair in range(pairs):
            order = [0, 1]
            rng.shuffle(order)
            runs: dict[int, Run] = {}
            for i in order:  # run 0 is unwatermarked, run 1 the arm
                w = "none" if i == 0 or arm == AA else arm
                runs[i] = timed_run(provider, batch, w, max_tokens, pair)
            base, marked = runs[0], runs[1]
            extra = marked.pick_seconds / marked.steps - base.pick_seconds / base.steps
            results.append((marked.rate / base.rate, extra / (base.seconds / base.steps)))
        out[arm] = (results, stats.hit_rate)
    return out


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], statistics.median(values), q[2]


def available_schemes() -> list[str]:
    names = []
    for name in [*SCHEMES.names(), COMPAT]:
        try:
            names.append(parse_watermark(name).spec.canonical())
        except Exception as exc:  # a scheme module that does not import or build
            print(f"skipping {name}: {type(exc).__name__}: {exc}")
    return names


#: prompt length in ids when ``--vocab`` makes prompts random ids
PROMPT_IDS = 12
#: ids below this are the embedded tokenizer's bos, eos and pad: never in a random prompt
FIRST_PLAIN_ID = 3


def random_model(provider: HFProvider, shape: str | None, vocab: int | None = None) -> None:
    """Replace ``provider.model`` by a seeded random Llama of ``LAYERSxHIDDEN`` (64-wide
    heads, SwiGLU width 8/3 of the hidden size; None: the embedded model's shape) with the
    embedded model's vocabulary, or ``vocab`` tokens. With ``vocab`` the provider's prompts
    become random ids (:func:`random_prompt_ids`)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = provider.model.config
    if shape:
        layers, hidden = (int(x) for x in shape.lower().split("x"))
        config.num_hidden_layers, config.hidden_size = layers, hidden
        config.num_attention_heads = config.num_key_value_heads = hidden // 64
        config.intermediate_size = hidden * 8 // 3
    if vocab:
        config.vocab_size = vocab
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    provider.model = model.to(provider.device)
    provider.vocab_size = int(model.get_output_embeddings().weight.shape[0])
    if vocab:
        provider._encode = lambda prompt: random_prompt_ids(prompt, vocab)
    params = sum(p.numel() for p in provider.model.parameters())
    print(f"random model {shape or 'embedded shape'}, vocabulary {provider.vocab_size}: "
          f"{params / 1e6:.0f}M parameters")


def random_prompt_ids(prompt: Prompt, vocab: int) -> list[int]:
    """``PROMPT_IDS`` ids in ``[FIRST_PLAIN_ID, vocab)`` seeded by the prompt's text: the same
    prompt gets the same ids in both arms of a pair."""
    seed = int.from_bytes(hashlib.sha256(f"{prompt.system}\0{prompt.user}".encode()).digest()[:8],
                          "little")
    rng = random.Random(seed)
    return [rng.randrange(FIRST_PLAIN_ID, vocab) for _ in range(PROMPT_IDS)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=4096, help="untimed tokens per watermark")
    ap.add_argument("--batch-sizes", default="1,16")
    ap.add_argument("--shape", default=None, help="LAYERSxHIDDEN of a random model, e.g. 12x768")
    ap.add_argument("--vocab", type=int, default=None,
                    help="vocabulary of a random model (of --shape, else the embedded shape); "
                         "prompts become random ids")
    ap.add_argument("--device", default="cpu", help="torch device of the model, e.g. cuda")
    ap.add_argument("--json", default=None, metavar="PATH",
                    help='also write {"ratios": {scheme: {batch_size: ratio}}} there')
    ap.add_argument("--only", default=None,
                    help="comma-separated scheme names to measure, e.g. kgw,its (kgw takes in "
                         "the reference-compatible kgw too; default: all)")
    args = ap.parse_args()
    if args.pairs < 2:
        ap.error("--pairs: at least 2 (the figures are medians and quartiles over pairs)")
    if args.vocab is not None and args.vocab <= FIRST_PLAIN_ID:
        ap.error(f"--vocab: more than {FIRST_PLAIN_ID} tokens")
    import torch

    schemes = available_schemes()
    if args.only:
        wanted = set(args.only.split(","))
        schemes = [w for w in schemes if w.split(":")[0] in wanted]
    print(f"model {embedded_model_path()}  torch threads {torch.get_num_threads()}  "
          f"max_tokens {args.max_tokens}  warmup {args.warmup} tokens  pairs {args.pairs}  "
          f"device {args.device}")
    ratios: dict[str, dict[str, float]] = {}
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        provider = HFProvider(str(embedded_model_path()), spec="embedded", batch_size=batch,
                              device=args.device)
        if args.shape or args.vocab:
            random_model(provider, args.shape, args.vocab)
        seed_tables().clear()
        base = statistics.median(timed_run(provider, batch, "none", args.max_tokens, 20_000).rate
                                 for _ in range(3))
        results = paired(provider, batch, schemes, args.max_tokens, args.pairs, args.warmup)
        print(f"\nbatch {batch}: unwatermarked about {base:.0f} row-steps/s")
        print(f"{'watermark':<64} {'ratio':>6} {'IQR':>11}  {'attributed':>10} {'IQR':>13}"
              f"  {'hits':>5}")
        for spec, (r, hit_rate) in results.items():
            lo, med, hi = quartiles([x[0] for x in r])
            alo, amed, ahi = quartiles([100 * x[1] for x in r])
            ratios.setdefault(spec, {})[str(batch)] = med
            print(f"{spec:<64} {med:>6.3f} {lo:.3f}-{hi:.3f}  {amed:>9.2f}% "
                  f"{alo:.2f}-{ahi:.2f}%  {hit_rate:>5.3f}", flush=True)
        if args.json:  # rewritten after each batch size: a long run leaves what it measured
            with open(args.json, "w") as f:
                json.dump({"ratios": ratios}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
