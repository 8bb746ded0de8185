"""The transform stage: apply the run's attacks to stored outputs and store what they give.

Runs after generation, before grading. For each (generation, attack) it stores the attacked
text and its token ids, re-tokenized with the generating model's tokenizer after checking the
tokenizer's fingerprint against the one stored with the output; without a tokenizer (an API
model and no ``--tokenizer``) it stores the text and says why there are no ids. Text attacks
are seeded per generation; model attacks (``paraphrase:``, ``translate:``) call their provider,
batched like generation. Both are executor tasks (:mod:`evalrun.run.stages.transform_tasks`): the run's
executor may spread them over other processes, while tokenizing and storing stay here.
Transforms are keyed by their inputs: a re-run reuses finished ones and retries failed ones,
and each is stored the moment it is complete, so a run killed here resumes here. Unattacked
API outputs get token ids the same way when a tokenizer is given. Ids from the run's
``--tokenizer`` (a model evalrun has no tokenizer of its own for) are stored with the
vocabulary size they index (``--vocab-size``, else the tokenizer's), which detection needs, and
that tokenizer is part of the transform's key. A watermarked generation whose case has a
reference answer also gets that answer's token ids, stored the same way under
:data:`~evalrun.pack.grade.REFERENCE_TRANSFORM`, so that its grader can measure true negatives
on the human text (WaterBench).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from evalrun._util.errors import EvalrunError
from evalrun._util.hashing import sha256_hex
from evalrun._util.specs import is_none
from evalrun.attacks import ModelAttack, parse_attack
from evalrun.model.generation import Generation
from evalrun.model.providers import ModelSpec, model_revision, tokenizer_source
from evalrun.model.tokenization import TextTokenizer, load_tokenizer
from evalrun.pack.grade import REFERENCE_TRANSFORM, reference_text
from evalrun.run.executors import Executor, LocalExecutor, ProviderFactory
from evalrun.run.options import RunOptions
from evalrun.run.plan import Item
from evalrun.run.stages.transform_tasks import (
    AttackInput,
    AttackOutcome,
    attack_seed,
    model_attack_task,
    text_attack_task,
)
from evalrun.store.database import HAS_OUTPUT, Store, transform_key, utc_now

__all__ = ["TOKENS_ONLY", "TransformSummary", "attack_seed", "run_transforms"]

Progress = Callable[[int, int], None]
#: the transform of an unattacked output that only adds token ids
TOKENS_ONLY = "none"


@dataclass
class TransformSummary:
    cached: int = 0
    applied: int = 0
    errors: int = 0
    #: reference answers tokenized and stored (:func:`_store_references`)
    references: int = 0
    per_attack_seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class _Job:
    key: str
    gen_key: str
    attack: str
    row: Mapping[str, Any]
    item: Item
    result_ids: list[int]
    #: result ids whose stored transform_key is not this one yet
    unlinked: list[int]


class _Tokens:
    """The generating model's tokenizer per model, loaded once, checked against the stored
    fingerprint; the reason when there is none."""

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self._cache: dict[ModelSpec, TextTokenizer | str] = {}
        self._external: dict[ModelSpec, int | None] = {}

    def source(self, model: ModelSpec) -> str | None:
        return tokenizer_source(model, self.options.tokenizer)

    def external_vocab(self, model: ModelSpec) -> int | None:
        """The vocabulary size of ids from the run's ``--tokenizer`` (None for a model whose
        own tokenizer evalrun has, whose outputs record their model's size); once per model."""
        if model not in self._external:
            own = tokenizer_source(model, None) is not None
            tok = None if own else self._load(model)
            self._external[model] = (None if tok is None or isinstance(tok, str)
                                     else self.options.vocab_size or tok.vocab_size)
        return self._external[model]

    def identity(self, model: ModelSpec) -> str:
        """What besides the text decides the ids of an external tokenizer (its fingerprint and
        vocabulary), for the transform's key: another ``--tokenizer`` gives other ids."""
        vocab = self.external_vocab(model)
        tok = self._load(model)
        return "" if vocab is None or isinstance(tok, str) else f"tokenizer={tok.fingerprint};vocab_size={vocab}"

    def _load(self, model: ModelSpec) -> TextTokenizer | str:
        if model not in self._cache:
            source = self.source(model)
            if source is None:
                self._cache[model] = (f"no tokenizer for {model.identity()}: pass --tokenizer PATH (a local directory "
                                      "with the model's tokenizer) to get token ids")
            else:
                try:
                    self._cache[model] = load_tokenizer(str(source))
                except EvalrunError as exc:
                    self._cache[model] = str(exc)
        return self._cache[model]

    def encode(self, model: ModelSpec, stored_hash: str | None, text: str) -> tuple[list[int] | None, str | None, str | None]:
        """(ids, fingerprint, note): ids None with a note saying why."""
        tok = self._load(model)
        if isinstance(tok, str):
            return None, None, tok
        if stored_hash and stored_hash != tok.fingerprint:
            return None, tok.fingerprint, (f"tokenizer {tok.source} has fingerprint {tok.fingerprint[:12]}, the "
                                           f"output was generated with {stored_hash[:12]}: no token ids")
        return tok.encode(text), tok.fingerprint, None


def run_transforms(items: Sequence[Item], store: Store, run_id: str, options: RunOptions,
                   make_provider: ProviderFactory, *, progress: Progress | None = None,
                   executor: Executor | None = None) -> TransformSummary:
    """Store the transform of every attacked item (and token ids of unattacked outputs from
    providers without them, when a tokenizer is known). Never raises for one failed call.
    ``executor`` runs each attack's calls (default: in this process); the re-tokenizing and
    the store writes stay here."""
    summary = TransformSummary()
    rows = {r["item_key"]: r for r in _rows(store, [it.item_key for it in items])}
    tokens = _Tokens(options)
    jobs: dict[str, _Job] = {}
    for item in items:
        row = rows.get(item.item_key)
        if row is None:
            continue
        if is_none(item.attack):
            if row["output_tokens_json"] is not None or tokens.source(item.model_spec) is None:
                continue
            attack_text, revision = TOKENS_ONLY, ""
        else:
            attack_text = item.attack
            attack = parse_attack(item.attack)
            revision = model_revision(attack.model, item.pack, options) if isinstance(attack, ModelAttack) else ""
        identity = tokens.identity(item.model_spec)
        if identity:
            revision = f"{revision}|{identity}"
        key = transform_key(item.gen_key, attack_text, revision)
        job = jobs.setdefault(key, _Job(key, item.gen_key, attack_text, row, item, [], []))
        job.result_ids.append(row["result_id"])
        if row["transform_key"] != key:
            job.unlinked.append(row["result_id"])
    done = store.transforms(jobs)
    pending: dict[str, list[_Job]] = {}
    for key, job in jobs.items():
        stored = done.get(key)
        if stored is not None and stored["error"] is None:
            summary.cached += 1
            if job.unlinked:
                store.link_transform(key, job.unlinked)
            continue
        pending.setdefault(job.attack, []).append(job)
    total = sum(len(v) for v in pending.values())
    finished = 0
    if progress and total:
        progress(0, total)

    def stored(job: _Job, text: str | None, error: str | None, seed: int | None, gen: Generation | None,  # type: ignore[no-redef]  # reuses the loop variable's name above
               extra: dict[str, Any] | None = None) -> None:
        nonlocal finished
        ids = fingerprint = note = None
        if text is not None:
            ids, fingerprint, note = tokens.encode(job.item.model_spec, job.row["tokenizer_hash"], text)
            vocab = tokens.external_vocab(job.item.model_spec)
            if ids is not None and vocab is not None:
                extra = {**(extra or {}), "vocab_size": vocab}
        store.store_transform({
            "transform_key": job.key, "gen_key": job.gen_key, "attack": job.attack, "seed": seed,
            "text": text, "token_ids_json": json.dumps(ids) if ids is not None else None,
            "tokenizer_hash": fingerprint, "token_note": note, "error": error,
            "latency_ms": gen.latency_ms if gen else None, "served_model": gen.served_model if gen else None,
            "extra_json": json.dumps(extra, sort_keys=True) if extra else None, "run_id": run_id,
            "created_at": utc_now()}, job.result_ids)
        finished += 1
        summary.applied += 1
        summary.errors += bool(error)
        if progress:
            progress(finished, total)

    for attack_text, group in pending.items():
        start = time.perf_counter()
        attack = None if attack_text == TOKENS_ONLY else parse_attack(attack_text)
        if attack is None:  # token ids only: the tokenizer is here, no call to make
            for job in group:
                stored(job, job.row["raw_output"], None, None, None)  # type: ignore[operator, misc]  # the function above, not the loop's row
        else:
            by_input = {AttackInput(job.key, job.item.seed_key or job.gen_key, job.row["raw_output"],
                                    job.item.pack.name, job.item.case.id): job for job in group}

            def sink(value: AttackInput, outcome: AttackOutcome, _by_input=by_input) -> None:
                stored(_by_input[value], outcome.text, outcome.error, outcome.seed, outcome.gen, outcome.extra())  # type: ignore[operator, misc]  # the function above

            model, task = ((attack.model, model_attack_task) if isinstance(attack, ModelAttack)
                           else (None, text_attack_task))
            (executor or LocalExecutor()).map(model, partial(task, attack_text), list(by_input), sink, make_provider)
        summary.per_attack_seconds[attack_text] = time.perf_counter() - start
    summary.references = _store_references(items, rows, store, run_id, tokens)
    return summary


def _store_references(items: Sequence[Item], rows: Mapping[str, Mapping[str, Any]], store: Store, run_id: str,
                      tokens: _Tokens) -> int:
    """Store the reference answer of each watermarked generation's case
    (:func:`~evalrun.pack.grade.reference_text`), tokenized like the output, as a transform of
    kind :data:`~evalrun.pack.grade.REFERENCE_TRANSFORM` linked to no result: its grader then
    detects the human answer under the generation's watermark with the run's key (WaterBench's
    true negatives), which it can only do here, where the tokenizer is, and at grading, where
    the key is. Once per generation and tokenizer; stored ones are reused. Returns how many
    were stored."""
    wanted: dict[str, tuple[Item, Mapping[str, Any], str]] = {}
    for item in items:
        text = reference_text(item.case.data)
        row = rows.get(item.item_key)
        if (text is None or row is None or is_none(item.watermark) or not item.pack.grader_reads_context
                or tokens.source(item.model_spec) is None):
            continue
        revision = f"{sha256_hex(text)}|{tokens.identity(item.model_spec)}"
        wanted.setdefault(transform_key(item.gen_key, REFERENCE_TRANSFORM, revision), (item, row, text))
    done = store.transforms(wanted)
    for key, (item, row, text) in wanted.items():
        if key in done:
            continue
        ids, fingerprint, note = tokens.encode(item.model_spec, row["tokenizer_hash"], text)
        vocab = tokens.external_vocab(item.model_spec)
        extra = {"vocab_size": vocab} if ids is not None and vocab is not None else None
        store.store_transform({
            "transform_key": key, "gen_key": item.gen_key, "attack": REFERENCE_TRANSFORM, "seed": None,
            "text": text, "token_ids_json": json.dumps(ids) if ids is not None else None,
            "tokenizer_hash": fingerprint, "token_note": note, "error": None, "latency_ms": None,
            "served_model": None, "extra_json": json.dumps(extra, sort_keys=True) if extra else None,
            "run_id": run_id, "created_at": utc_now()}, [])
    return len(wanted) - len(done)


def _rows(store: Store, item_keys: Sequence[str]) -> list[Any]:
    return list(store.select_in("SELECT * FROM results", "item_key", item_keys, also=HAS_OUTPUT))
