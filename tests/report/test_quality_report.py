"""The quality analyses in ``evalrun report`` and ``metrics.json``: pairwise preferences with
their intervals, per-criterion means, position consistency and agreement between two judges,
and the distinguishability classifiers; and ``--retry-unparsed`` asking again only where an
answer did not parse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalrun.judges.pairwise import PAIRWISE_INSTRUCTIONS
from evalrun.testing.chat_server import ChatServer

pytestmark = pytest.mark.numeric  # judges and classifiers on the embedded model's outputs


def _main(capsys, *args: str) -> str:
    from evalrun.cli.main import main

    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def first_always(body) -> str:
    content = body["messages"][-1]["content"]
    if content.startswith(PAIRWISE_INSTRUCTIONS):
        return ("LLM A is superior.\n1. Relevance to the prompt:\n- LLM A: 4\n- LLM B: 2\n"
                "7. Accuracy of information:\n- LLM A: 5\n- LLM B: 3\n[[A]]: 4, 5")
    return "LLM A. [[A]]"


def key(metric: str, **params) -> tuple:
    """How these tests index records: the metric and its params."""
    return (metric, tuple(sorted(params.items())))


def indexed(records) -> dict[tuple, dict]:
    """metrics.json records (dicts) or MetricRecords by :func:`key`."""
    as_dicts = [r if isinstance(r, dict) else {**r.as_json(), "record": r} for r in records]
    return {key(r["metric"], **r["params"]): r for r in as_dicts}


def test_report_and_metrics_json_carry_the_quality_analyses(store_copy: Path, tmp_path: Path, capsys) -> None:
    db = str(store_copy)
    with ChatServer(first_always) as server:
        for method in ("pairwise", "simple"):
            _main(capsys, "judge", "--db", db, "--judge", "openai:judge", "--method", method, "--both-orders",
                  "--base-url", server.base_url)
    _main(capsys, "distinguish", "--db", db, "--classifier", "logreg")
    out = tmp_path / "report"
    _main(capsys, "report", "--db", db, "--out", str(out))
    records = indexed(json.loads((out / "metrics.json").read_text()))
    name = {"method": "pairwise", "judge": "openai:judge"}
    prefer = records[key("prefer_watermarked", **name)]
    # always the first text, asked both ways: every pair half each, whatever the texts
    assert prefer["value"] == pytest.approx(0.5) and prefer["n"] == 30
    assert prefer["ci_low"] <= 0.5 <= prefer["ci_high"]
    assert records[key("prefer_unwatermarked", **name)]["value"] == pytest.approx(0.5)
    assert records[key("prefer_tie", **name)]["value"] == 0.0
    assert records[key("position_consistency", **name)]["value"] == 0.0
    # criterion means: each side is shown first in one of its two answers, so 4 and 2 average to 3
    relevance = records[key("judge_score", criterion="relevance", side="watermarked", **name)]
    assert relevance["value"] == pytest.approx(3.0) and relevance["n"] == 60
    assert records[key("judge_score", criterion="accuracy", side="unwatermarked", **name)]["value"] == \
        pytest.approx(4.0)
    assert key("judge_score", criterion="relevance", side="watermarked", method="simple",
               judge="openai:judge") not in records
    agreement = records[key("judge_agreement", **name, other_method="simple", other_judge="openai:judge")]
    assert agreement["value"] == 1.0
    acc = records[key("distinguish_accuracy", classifier="logreg", embedder="embedded")]
    auc = records[key("distinguish_roc_auc", classifier="logreg", embedder="embedded")]
    assert acc["n"] == auc["n"] == 60 and acc["ci_low"] <= acc["value"] <= acc["ci_high"]
    assert 0.0 <= auc["value"] <= 1.0 and auc["ci_low"] is None
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for heading in ("Quality: pairwise judges", "Quality: distinguishability"):
        assert heading in md and heading in html
    assert "50.0%" in md and "relevance" in md and "decided alike" in md and "logreg" in md
    # evalrun export writes the same quality records beside its file
    _main(capsys, "export", "--db", db, "--format", "jsonl", "--out", str(tmp_path / "x.jsonl"))
    exported = indexed(json.loads((tmp_path / "x.jsonl.metrics.json").read_text()))
    assert exported[key("prefer_watermarked", **name)] == prefer
    assert exported[key("distinguish_accuracy", classifier="logreg", embedder="embedded")] == acc
    # no record packs a dimension into its name
    assert not [r for r in exported if ":" in r[0]]


def test_retry_unparsed_asks_again_only_where_the_answer_did_not_parse(store_copy: Path, capsys) -> None:
    from evalrun.metrics.pairwise import pair_answers, preference_records
    from evalrun.store.database import Store

    db = str(store_copy)
    asked: list[str] = []

    def flaky(body) -> str:
        content = body["messages"][-1]["content"]
        asked.append(content)
        # the first time, answers for pairs whose watermarked text is shown first quote the format
        if len(asked) <= 30 and content.count("[LLM A's Answer]") == 1 and len(content) % 3 == 0:
            return 'I would answer "[[A]]" or "[[B]]".'
        return "[[C]]"

    with ChatServer(flaky) as server:
        first = _main(capsys, "judge", "--db", db, "--judge", "openai:j", "--method", "simple", "--base-url",
                      server.base_url)
        unparsed = int(first.split(" unparsed answers")[0].rsplit(", ", 1)[1])
        assert 0 < unparsed < 30
        again = _main(capsys, "judge", "--db", db, "--judge", "openai:j", "--method", "simple", "--base-url",
                      server.base_url)
        assert "0 asked, 30 already answered" in again and len(asked) == 30  # not re-asked without the flag
        retried = _main(capsys, "judge", "--db", db, "--judge", "openai:j", "--method", "simple", "--base-url",
                        server.base_url, "--retry-unparsed")
        assert f"{unparsed} asked" in retried and "0 unparsed answers" in retried
        assert len(asked) == 30 + unparsed
    with Store(db) as store:
        records = indexed(preference_records(pair_answers(store, store.results())))
    judge = {"method": "simple", "judge": "openai:j"}
    assert records[key("prefer_tie", **judge)]["value"] == 1.0
    assert records[key("unparsed_rate", **judge)]["value"] == 0
