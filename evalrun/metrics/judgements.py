"""Stored judge answers read back: parsed now by their method's judge (a fixed parser applies
to old answers with no new call), attached to the result rows that aggregates read."""

from __future__ import annotations

from typing import Any, Sequence

from evalrun._util.errors import EvalrunError
from evalrun.judges import get_judge
from evalrun.pack.grade import Judgement
from evalrun.store.database import Store


def read_judgements(rows: Sequence[Any]) -> tuple[Judgement, ...]:
    """Stored judge answers (rows of :meth:`Store.judgements_for`) parsed by their method's
    judge, now: a fixed parser applies to old answers with no new call. An answer of a method
    this install does not know keeps its raw text and an empty parse."""
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
