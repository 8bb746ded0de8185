"""Singh & Zou's pairwise judges: parsing (the seed's own example answers, malformed answers,
property tests), pairing and the seeded coin, and the judge stage end to end against the local
OpenAI-compatible test server."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun.judges import UNPARSED, Subject, get_judge
from evalrun.judges.pairwise import (
    CRITERIA,
    CRITERION_TITLES,
    PAIRWISE_INSTRUCTIONS,
    SIMPLE_INSTRUCTIONS,
    coin,
    pair_subjects,
    parse_criteria,
    parse_verdict,
)
from evalrun.testing.chat_server import ChatServer

#: Singh & Zou, appendix A, Table 2: the judge's answer as printed (the seed elides criteria 3-6)
SEED_PAIRWISE_ANSWER = """In my assessment, the superior response is from LLM B.
1. Relevance to the prompt:
- LLM A: 3
- LLM B: 5
LLM B's response directly addresses the prompt by emphasizing the opportunity to build a dream home and \
providing directions to the property. In contrast, LLM A's response focuses more on general information about \
the location and potential uses of the land, which is somewhat relevant but not as specific.
2. Depth of detail:
- LLM A: 4
- LLM B: 3
LLM A provides more details about the property, such as mentioning the presence of mountain views, a babbling \
creek, pasture land, and a storage shed. On the other hand, LLM B's response lacks specific details about the \
land itself, instead focusing more on the nearby town and activities.
.
.
.
7. Accuracy of information:
- LLM A: 5
- LLM B: 5
Both responses provide information that does not require fact-checking. They introduce no factual \
inconsistencies.
Based on the evaluation above, my verdict is:
[[B]]: 3, 3, 5, 5, 4, 3, 5"""

#: Singh & Zou, appendix A, Table 3: the simple judge's answer
SEED_SIMPLE_ANSWER = """The response provided by LLM A provides more specific information about the property \
and its potential uses. It mentions that the land could be used as a homestead, farm, or a place to park an RV. \
It also highlights the proximity to the Blue Ridge Parkway, Boone, and Watauga River, appealing to outdoor \
enthusiasts. Additionally, it mentions that the property is being sold as is with no disclosures or warranties, \
and that a cash deal is the most likely outcome.
On the other hand, LLM B's response is focused more on the location and nearby amenities. It mentions that the \
property is located in a quiet and peaceful area, with nearby access to the Blue Ridge Parkway and various \
outdoor activities. It also briefly mentions the nearby town of Spruce Pine and the options for shopping, dining, \
and entertainment. The response concludes with directions to the property from a specific intersection.
Overall, both responses provide relevant information, but LLM A's response provides more details about the \
property and its potential uses. Therefore, based on the evaluation, [[A]] is better."""

PAIRWISE = get_judge("pairwise")
SIMPLE = get_judge("simple")


# -- parsing ----------------------------------------------------------------------------------
def test_the_seeds_pairwise_example_answer() -> None:
    parsed = PAIRWISE.parse(SEED_PAIRWISE_ANSWER)
    assert parsed["label"] == "B" and parsed["verdict"] == "B" and "problem" not in parsed
    assert parsed["scores"]["A"] == {"relevance": 3.0, "depth": 4.0, "clarity": None, "coherence": None,
                                     "originality": None, "examples": None, "accuracy": 5.0}
    assert parsed["scores"]["B"] == {"relevance": 5.0, "depth": 3.0, "clarity": None, "coherence": None,
                                     "originality": None, "examples": None, "accuracy": 5.0}
    # the list after the verdict is kept as given, not assigned to a side
    assert parsed["verdict_scores"] == [3, 3, 5, 5, 4, 3, 5]


def test_the_seeds_simple_example_answer() -> None:
    assert SIMPLE.parse(SEED_SIMPLE_ANSWER) == {"label": "A", "verdict": "A"}
    assert PAIRWISE.parse(SEED_SIMPLE_ANSWER)["label"] == "A"  # no scores: all None
    assert all(v is None for side in PAIRWISE.parse(SEED_SIMPLE_ANSWER)["scores"].values() for v in side.values())


@pytest.mark.parametrize("raw, label, problem", [
    ("", UNPARSED, "missing"),
    ("I prefer the first one.", UNPARSED, "missing"),
    ("Verdict: [A]", UNPARSED, "missing"),
    ("[[D]]", UNPARSED, "missing"),
    # an answer that quotes the format instead of choosing is ambiguous, never a guess
    ('"[[A]]" if assistant A is better, "[[B]]" if assistant B is better, and "[[C]]" for a tie.', UNPARSED,
     "ambiguous"),
    ("At first [[A]], but on reflection [[B]]", UNPARSED, "ambiguous"),
    ("[[C]]", "C", None),
    ("[[ b ]]: 4, 4, 4", "B", None),
    ("[[A]] ... final verdict: [[A]]", "A", None),
])
def test_malformed_and_edge_answers(raw: str, label: str, problem: str | None) -> None:
    for judge in (PAIRWISE, SIMPLE):
        parsed = judge.parse(raw)
        assert parsed["label"] == label
        assert (parsed.get("problem") or "").startswith(problem or "") and (problem is None) == ("problem" not in parsed)


def test_scores_out_of_range_repeated_or_foreign_are_not_taken() -> None:
    raw = ("**1. Relevance to the prompt:**\n- LLM A: 7\n- LLM B: 4/5\n"
           "3) Clarity of writing\n* Assistant A: 2\n* Assistant A: 3\n- LLM B: 5\n"
           "LLM A: 4 was given outside any criterion? no: still under clarity for B only\n"
           "4. Coherence and logical flow:\nLLM A's response is 5 times better\n- LLM B: 1.5\n[[B]]")
    scores = parse_criteria(raw)
    assert scores["A"]["relevance"] is None and scores["B"]["relevance"] == 4.0
    assert scores["A"]["clarity"] is None  # two different lines: not guessed
    assert scores["B"]["clarity"] == 5.0 and scores["B"]["coherence"] == 1.5 and scores["A"]["coherence"] is None


def test_the_prompts_are_the_seeds() -> None:
    assert PAIRWISE_INSTRUCTIONS.startswith("Please act as an impartial judge and evaluate the quality of the text "
                                            "completions provided by two large language models")
    assert "\n".join(f"{i}. {t}" for i, t in enumerate(CRITERION_TITLES, 1)) in PAIRWISE_INSTRUCTIONS
    assert PAIRWISE_INSTRUCTIONS.endswith('"[[A]]: [list of scores]" if assistant A is better, "[[B]]: [list of '
                                          'scores]" if assistant B is better, or "[[C]]" for a tie.')
    assert SIMPLE_INSTRUCTIONS.endswith('"[[A]]" if assistant A is better, "[[B]]" if assistant B is better, and '
                                        '"[[C]]" for a tie.')
    a, b = _subject("k1", "kgw", text="first text"), _subject("k2", "none", text="second text")
    user = PAIRWISE.prompt((a, b)).user
    assert user.endswith("[Prompt]\nWrite about c1.\n\n[LLM A's Answer]\nfirst text\n\n[LLM B's Answer]\nsecond text")


# -- property tests ---------------------------------------------------------------------------
_NO_BRACKETS = st.text(st.characters(blacklist_characters="[]", blacklist_categories=("Cs",)), max_size=300)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_parsing_never_raises_and_labels_are_known(raw: str) -> None:
    for judge in (PAIRWISE, SIMPLE):
        parsed = judge.parse(raw)
        assert parsed["label"] in ("A", "B", "C", UNPARSED)
        assert (parsed["label"] == UNPARSED) == (parsed["verdict"] is None) == ("problem" in parsed)


@settings(max_examples=200, deadline=None)
@given(_NO_BRACKETS, st.sampled_from("ABCabc"), _NO_BRACKETS, st.integers(1, 3))
def test_one_verdict_letter_is_read_wherever_it_stands(before: str, letter: str, after: str, times: int) -> None:
    raw = before + f" [[{letter}]]" * times + after
    assert parse_verdict(raw) == (letter.upper(), None)


@settings(max_examples=100, deadline=None)
@given(_NO_BRACKETS, st.lists(st.sampled_from("ABC"), min_size=2, max_size=5, unique=True))
def test_two_different_verdicts_are_never_guessed(text: str, letters: list[str]) -> None:
    verdict, problem = parse_verdict(text + " ".join(f"[[{x}]]" for x in letters))
    assert verdict is None and problem.startswith("ambiguous")


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(CRITERIA), st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=1),
       st.sampled_from(["LLM", "Assistant", "Response"]))
def test_score_tables_in_the_seeds_layout_round_trip(table: dict, who: str) -> None:
    lines = ["In my assessment, the superior response is from LLM A."]
    for i, criterion in enumerate(CRITERIA, 1):
        if criterion in table:
            a, b = table[criterion]
            lines += [f"{i}. {CRITERION_TITLES[i - 1]}:", f"- {who} A: {a}", f"- {who} B: {b}", "Because."]
    lines.append("[[A]]: 1, 2, 3")
    parsed = PAIRWISE.parse("\n".join(lines))
    for criterion in CRITERIA:
        expected = table.get(criterion)
        assert parsed["scores"]["A"][criterion] == (expected[0] if expected else None)
        assert parsed["scores"]["B"][criterion] == (expected[1] if expected else None)


# -- pairing and the coin ---------------------------------------------------------------------
def _subject(key: str, watermark: str, *, case: str = "c1", attack: str = "none", rep: int = 0, text: str = "t",
             model: str = "m") -> Subject:
    return Subject(item_key=key, text=text, task=f"Write about {case}.", case_id=case, pack="p", model=model,
                   watermark=watermark, attack=attack, repetition=rep)


def test_pairs_match_case_model_attack_and_repetition() -> None:
    subjects = [_subject("w1", "kgw"), _subject("n1", "none"), _subject("w2", "kgw", rep=1),
                _subject("w3", "kgw", attack="swap:p=0.1"), _subject("n3", "none", attack="swap:p=0.1"),
                _subject("e1", "exp"), _subject("w4", "kgw", case="c2"), _subject("n5", "none", model="other")]
    pairs = [(a.item_key, b.item_key) for a, b in pair_subjects(subjects)]
    assert pairs == [("w1", "n1"), ("w3", "n3"), ("e1", "n1")]  # w2, w4 have no partner
    assert [(a.item_key, b.item_key) for a, b in pair_subjects(subjects, "kgw")] == [("n1", "w1"), ("n3", "w3"),
                                                                                     ("e1", "w1")]


def test_the_coin_is_seeded_by_the_pair_and_fair() -> None:
    flips = [coin(f"w{i}", f"n{i}") for i in range(2000)]
    assert flips == [coin(f"w{i}", f"n{i}") for i in range(2000)]
    assert 900 < sum(flips) < 1100
    subjects = [s for i in range(40) for s in (_subject(f"w{i}", "kgw", case=f"c{i}"),
                                               _subject(f"n{i}", "none", case=f"c{i}"))]
    groups = PAIRWISE.groups(subjects)
    assert len(groups) == 40
    for a, b in groups:
        marked, base = (a, b) if a.watermark == "kgw" else (b, a)
        assert (a is marked) == (coin(marked.item_key, base.item_key) == 0)
    both = PAIRWISE.configured(both_orders=True).groups(subjects)
    assert len(both) == 80 and both[0::2] == groups and [g[::-1] for g in both[1::2]] == groups


def test_options_are_checked() -> None:
    from evalrun._util.errors import SpecError

    with pytest.raises(SpecError, match="--method rating takes no option --both-orders"):
        get_judge("rating").configured(both_orders=True)
    with pytest.raises(SpecError):
        PAIRWISE.configured(baseline="nosuchscheme:x=1")
    assert get_judge("rating").configured(baseline=None, both_orders=False) is get_judge("rating")


# -- the judge stage end to end ---------------------------------------------------------------
def _judge(capsys, *args: str) -> str:
    """``evalrun judge`` in this process (it runs no pytest): its standard output."""
    from evalrun.cli.main import main

    capsys.readouterr()
    code = main(["judge", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def first_always(body) -> str:
    """A judge with total position bias: it always prefers the text shown first."""
    content = body["messages"][-1]["content"]
    assert "[LLM A's Answer]" in content and "[LLM B's Answer]" in content
    if content.startswith(PAIRWISE_INSTRUCTIONS):
        return "In my assessment, the superior response is from LLM A.\n1. Relevance to the prompt:\n- LLM A: 4\n" \
               "- LLM B: 2\n4. Coherence and logical flow:\n- LLM A: 5\n- LLM B: 1\n[[A]]: 4, 5"
    return "LLM A is better. [[A]]"


def _key(metric: str, **params) -> tuple:
    return (metric, tuple(sorted(params.items())))


def _indexed(records) -> dict:
    """Records by metric and params (a judge is in the params, never in the name)."""
    return {_key(r.metric, **r.params): r for r in records}


def test_judge_stage_pairs_randomised_order_and_both_orders(store_copy: Path, capsys) -> None:
    from evalrun.metrics.pairwise import pair_answers, preference_records
    from evalrun.store.database import Store

    db = store_copy
    with ChatServer(first_always) as server:
        judged = _judge(capsys, "--db", str(db), "--judge", "openai:judge", "--method", "pairwise",
                        "--base-url", server.base_url)
        assert "30 asked, 0 already answered, 0 failed calls, 0 unparsed answers" in judged
        conn = sqlite3.connect(db)
        try:
            rows = conn.execute("SELECT subjects_json, raw_answer FROM judgements").fetchall()
            judged_rows = conn.execute("SELECT COUNT(*), COUNT(DISTINCT judgement_key) FROM judged").fetchone()
        finally:
            conn.close()
        assert len(rows) == 30 and all(len(json.loads(s)) == 2 for s, _ in rows)  # one raw answer per pair
        assert judged_rows == (60, 30)
        with Store(db) as store:
            answers = pair_answers(store, store.results())
            records = _indexed(preference_records(answers))
        expected = sum(coin(a.watermarked_key, a.baseline_key) == 0 for a in answers) / 30
        name = {"method": "pairwise", "judge": "openai:judge"}
        assert records[_key("prefer_watermarked", **name)].value == pytest.approx(expected)
        assert records[_key("prefer_unwatermarked", **name)].value == pytest.approx(1 - expected)
        assert 0.25 <= expected <= 0.75 and records[_key("prefer_tie", **name)].value == 0.0
        assert records[_key("first_position_rate", **name)].value == 1.0
        assert records[_key("judge_score", criterion="coherence", side="watermarked", **name)].n == 30
        assert _key("position_consistency", **name) not in records
        # both orders: only the 30 other orders are asked; every pair comes out inconsistent
        both = _judge(capsys, "--db", str(db), "--judge", "openai:judge", "--method", "pairwise",
                      "--both-orders", "--base-url", server.base_url)
        assert "30 asked, 30 already answered" in both
        # the simple prompt, by the same judge: a second "judge" to agree with
        simple = _judge(capsys, "--db", str(db), "--judge", "openai:judge", "--method", "simple",
                        "--base-url", server.base_url)
        assert "30 asked" in simple
        assert len(server.records()) == 90
    with Store(db) as store:
        records = _indexed(preference_records(pair_answers(store, store.results())))
    consistency = records[_key("position_consistency", **name)]
    assert consistency.value == 0.0 and consistency.n == 30
    assert records[_key("prefer_watermarked", **name)].value == pytest.approx(0.5)  # each pair: one answer each way
    agreement = records[_key("judge_agreement", **name, other_method="simple", other_judge="openai:judge")]
    assert agreement.value == 1.0
