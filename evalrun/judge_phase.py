"""The judge stage: ask a judge model about stored results and store its raw answers.

Subjects are read from the store (the text a result's grader sees: the attacked text when
there is one), questions come from the :class:`~evalrun.judges.Judge`, and each answer is
stored the moment it arrives, keyed by the judge model, the method and the results it is
about: running the same command again asks only what has no answer yet (or failed; with
``retry_unparsed``, also answers that could not be parsed). Parsing is not stored: it is redone
whenever an answer is read, so a fixed parser applies to old answers with no new call.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from evalrun.generation import Generation, GenerationRequest, Provider
from evalrun.grading import Judgement
from evalrun.hashing import canonical_json, sha256_hex
from evalrun.judges import UNPARSED, Judge, Subject
from evalrun.specs import is_none
from evalrun.store import Store, utc_now

ProviderFactory = Callable[[str], Provider]


@dataclass
class JudgeSummary:
    asked: int = 0
    cached: int = 0
    errors: int = 0
    unparsed: int = 0
    seconds: float = 0.0


def subjects(store: Store, run_id: str | None = None) -> list[Subject]:
    """Every stored result with an output (one run's, or all), as a judge sees it."""
    out = []
    for row in store.results(run_id=run_id):
        if row["raw_output"] is None or (row["error"] and row["label"] not in ("GRADER_ERROR",)):
            continue
        text = row["attacked_output"]
        if text is None and row["transform_key"]:
            stored = store.transforms([row["transform_key"]]).get(row["transform_key"])
            text = stored["text"] if stored is not None else None
        if text is None:
            if not is_none(row["attack"]):
                continue  # its attack has no stored text (it failed): nothing to judge
            text = row["raw_output"]
        prompt = json.loads(row["prompt_json"])
        out.append(Subject(item_key=row["item_key"], text=text, task=prompt.get("user", ""), case_id=row["case_id"],
                           pack=row["pack"], model=row["model"], watermark=row["watermark"], attack=row["attack"],
                           repetition=row["repetition"]))
    return out


def read_judgements(rows: Sequence[Any]) -> tuple[Judgement, ...]:
    """Stored judge answers (rows of :meth:`Store.judgements_for`) parsed by their method's
    judge, now: a fixed parser applies to old answers with no new call. An answer of a method
    this install does not know keeps its raw text and an empty parse."""
    from evalrun.errors import EvalrunError
    from evalrun.judges import get_judge

    out = []
    for j in rows:
        parsed: dict[str, Any] = {}
        if j["raw_answer"] is not None:
            try:
                parsed = dict(get_judge(j["method"]).parse(j["raw_answer"]))
            except EvalrunError:
                pass
        out.append(Judgement(judge=j["judge"], method=j["method"], raw=j["raw_answer"], position=j["position"],
                             parsed=parsed, error=j["error"]))
    return tuple(out)


def with_judgements(store: Store, rows: Sequence[Any]) -> list[dict[str, Any]]:
    """Result rows as dicts with their parsed judge answers under ``judgements`` (what
    aggregates such as quality read)."""
    if not store.has_judgements():
        return [{**dict(r), "judgements": ()} for r in rows]
    return [{**dict(r), "judgements": read_judgements(store.judgements_for(r["item_key"]))} for r in rows]


def judgement_key(judge_model: str, judge: Judge, prompt_json: str, item_keys: Sequence[str]) -> str:
    return sha256_hex("judge", judge_model, judge.method, canonical_json(list(item_keys)), prompt_json)


def run_judges(store: Store, judge: Judge, judge_model: str, make_provider: ProviderFactory, *,
               run_id: str | None, selection: Sequence[Subject], retry_unparsed: bool = False,
               progress: Callable[[int, int], None] | None = None) -> JudgeSummary:
    """Ask ``judge_model`` every question ``judge`` makes of ``selection`` that has no stored
    answer; store each answer as it arrives. Never raises for one failed call."""
    summary = JudgeSummary()
    pending: dict[str, tuple[tuple[Subject, ...], Any, str]] = {}
    for group in judge.groups(selection):
        prompt = judge.prompt(group)
        prompt_json = canonical_json(prompt.as_json())
        key = judgement_key(judge_model, judge, prompt_json, [s.item_key for s in group])
        stored = store.judgement(key)
        if stored is not None and stored["error"] is None:
            parsed = judge.parse(stored["raw_answer"] or "")
            if not (retry_unparsed and parsed.get("label") == UNPARSED):
                summary.cached += 1
                continue
        pending[key] = (group, prompt, prompt_json)
    if not pending:
        return summary
    start = time.perf_counter()
    requests = [GenerationRequest(gen_key=key, pack=group[0].pack, case={"id": group[0].case_id}, prompt=prompt,
                                  params=judge.params, repetition=0)
                for key, (group, prompt, _) in pending.items()]
    done = 0

    def sink(request: GenerationRequest, gen: Generation) -> None:
        nonlocal done
        group, _, prompt_json = pending[request.gen_key]
        error = gen.error if gen.error else (None if gen.text is not None else "judge returned no text")
        extra = {**gen.extra, **judge.annotate(group)}
        store.store_judgement({
            "judgement_key": request.gen_key, "judge": judge_model, "method": judge.method,
            "subjects_json": json.dumps([s.item_key for s in group]), "prompt_json": prompt_json,
            "raw_answer": gen.text, "error": error, "latency_ms": gen.latency_ms,
            "served_model": gen.served_model,
            "extra_json": json.dumps(extra, sort_keys=True) if extra else None,
            "run_id": run_id, "created_at": utc_now()}, [s.item_key for s in group])
        summary.asked += 1
        summary.errors += bool(error)
        if not error and judge.parse(gen.text or "").get("label") == UNPARSED:
            summary.unparsed += 1
        done += 1
        if progress:
            progress(done, len(requests))

    provider = make_provider(judge_model)
    try:
        if judge.local:
            groups = [pending[r.gen_key][0] for r in requests]
            for request, answer in zip(requests, judge.answer_locally(provider, judge_model, groups)):
                sink(request, Generation(text=answer, served_model=judge_model))
        else:
            provider.generate(requests, sink)
    finally:
        provider.close()
    summary.seconds = time.perf_counter() - start
    return summary
