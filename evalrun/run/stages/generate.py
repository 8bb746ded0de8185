"""The generation phase: make every missing model call of a run and store it.

Runs before any item is graded. Finished rows (output, no error) are reused -- that is the
cache and the resume -- errored or missing ones are (re)generated, and each generation is
written as its provider hands it back, in its own transaction, so a killed run loses nothing
it finished. With ``commit_ms`` (``evalrun run --commit-ms``) fast ones (a reference solver)
are committed in groups holding at most that much model time (:mod:`evalrun.store.commit_batch`),
and a killed run loses at most that much finished work.
A generation that only lacks rows for a newly added attack reuses the stored output.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from evalrun.model.generation import Generation, GenerationRequest
from evalrun.model.providers import ModelSpec
from evalrun.run.executors import Executor, LocalExecutor, ProviderFactory
from evalrun.run.plan import Item, unique_generations
from evalrun.store.commit_batch import CommitBatch
from evalrun.store.database import HAS_OUTPUT, Store, utc_now

Progress = Callable[[int, int], None]


@dataclass
class PhaseSummary:
    """Counts of a generation phase: ``cached`` and ``generated`` count results (rows), ``texts``
    the model calls made for them (one call fills the results of all its attacks), ``errors``
    the calls that failed."""

    cached: int = 0
    generated: int = 0
    texts: int = 0
    errors: int = 0
    per_model_seconds: dict[str, float] = field(default_factory=dict)


def generation_columns(gen: Generation) -> dict[str, object]:
    """The store columns a provider's answer fills."""
    extra = dict(gen.extra)
    return {
        "raw_output": gen.text,
        "output_tokens_json": json.dumps(gen.token_ids) if gen.token_ids is not None else None,
        "latency_ms": gen.latency_ms, "tokens_in": gen.tokens_in, "tokens_out": gen.tokens_out,
        "error": gen.error if gen.error else (None if gen.text is not None else "provider returned no text"),
        "served_model": gen.served_model, "retries": gen.retries, "tokenizer_hash": gen.tokenizer_hash,
        "extra_json": json.dumps(extra, sort_keys=True) if extra else None,
    }


def redo_cost_ms(gen: Generation) -> float | None:
    """What losing ``gen`` before its commit would cost the next run: its model time (None
    when unknown); nothing for a failed call, which the next run asks again anyway."""
    return 0.0 if gen.error or gen.text is None else gen.latency_ms


def _reuse_sibling(store: Store, gen_key: str) -> dict[str, object] | None:
    row = store.conn.execute(
        f"SELECT * FROM results WHERE gen_key = ? AND {HAS_OUTPUT} LIMIT 1",
        (gen_key,),
    ).fetchone()
    if row is None:
        return None
    keep = ("raw_output", "output_tokens_json", "latency_ms", "tokens_in", "tokens_out",
            "served_model", "retries", "tokenizer_hash", "extra_json")
    return {**{k: row[k] for k in keep}, "error": None}


def run_generation(items: Sequence[Item], store: Store, run_id: str, make_provider: ProviderFactory,
                   *, key: str | None = None, progress: Progress | None = None,
                   executor: Executor | None = None, commit_ms: float = 0.0) -> PhaseSummary:
    """Fill the store for ``items``; returns counts. Never raises for a single failed call.
    ``executor`` runs each model's requests (default: its provider in this process);
    ``commit_ms`` groups fast results into one transaction per that much work
    (:mod:`evalrun.store.commit_batch`; 0: one transaction per generation)."""
    summary = PhaseSummary()
    done = store.finished_keys(item.item_key for item in items)
    store.link(run_id, done.values())
    summary.cached = len(done)

    with CommitBatch[Mapping[str, Any]](lambda rows: store.store_generation(rows, run_id),
                                        budget_ms=commit_ms) as batch:
        pending: dict[ModelSpec, list[tuple[Item, list[Item]]]] = {}
        for gen_key, group in unique_generations(items).items():
            missing = [it for it in group if it.item_key not in done]
            if not missing:
                continue
            if len(missing) < len(group):
                sibling = _reuse_sibling(store, gen_key)
                if sibling is not None:
                    now = utc_now()
                    batch.add([{**it.row(run_id, now), **sibling} for it in missing], cost_ms=0.0)
                    summary.generated += len(missing)
                    continue
            pending.setdefault(missing[0].model_spec, []).append((missing[0], missing))

        # progress counts texts, the model calls that take the time (the main job's 300 calls fill
        # 2,100 results): a bar counting results ran at 2-3 "results" a second for one text in 7
        total = sum(len(work) for work in pending.values())
        if progress and total:
            progress(0, total)
        for model, work in pending.items():
            # a batch's composition changes a local model's floating-point sums, and so now and
            # then a sampled token: batch in an order of the work itself, never of pytest's items
            # (pytest-randomly shuffles those), nor of the cache secret (gen_key holds it for
            # watermarked work), so a rerun here or elsewhere generates the same outputs
            work.sort(key=lambda entry: (entry[0].watermark, entry[0].seed_key or entry[0].gen_key))
            by_key: Mapping[str, list[Item]] = {first.gen_key: rows for first, rows in work}
            requests: list[GenerationRequest] = [first.request(key) for first, _ in work]

            def sink(request: GenerationRequest, gen: Generation, _by_key=by_key) -> None:
                cols = generation_columns(gen)
                now = utc_now()
                batch.add([{**it.row(run_id, now), **cols} for it in _by_key[request.gen_key]], redo_cost_ms(gen))
                summary.generated += len(_by_key[request.gen_key])
                summary.texts += 1
                if cols["error"]:
                    summary.errors += 1
                if progress:
                    progress(summary.texts, total)

            start = time.perf_counter()
            (executor or LocalExecutor()).generate(model, requests, sink, make_provider)
            summary.per_model_seconds[str(model)] = time.perf_counter() - start
    return summary


class ProgressBar:
    """A one-line progress bar on a stream (redrawn in place on a terminal). ``unit`` names
    what it counts, in the words of the stage's closing line, so the two totals read alike."""

    def __init__(self, label: str, stream=None, min_interval: float = 0.2, unit: str = "") -> None:
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        # a terminal, or a Jupyter cell (its streams redraw a line on "\r" but are no tty)
        self.tty = (bool(getattr(self.stream, "isatty", lambda: False)())
                    or type(self.stream).__module__.startswith("ipykernel"))
        self.min_interval = min_interval
        self._last = 0.0
        self._start = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        final = done >= total
        if not final and now - self._last < (self.min_interval if self.tty else 10.0):
            return
        self._last = now
        width = 30
        filled = int(width * done / total) if total else width
        rate = done / (now - self._start) if now > self._start else 0.0
        unit = f" {self.unit}" if self.unit else ""
        line = f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}{unit} ({rate:.1f}/s)"
        if self.tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
