"""The MAUVE judge: which texts it compares, and its answers from the embedded model."""

from __future__ import annotations

import json

import pytest

from evalrun.judges import UNPARSED, Subject, get_judge
from evalrun.model.providers import make_provider, parse_model

WORDS = ("river", "stone", "garden", "window", "letter", "market", "winter", "engine", "silver", "forest")


def subject(case: int, watermark: str = "none", attack: str = "none", text: str | None = None) -> Subject:
    body = text if text is not None else f"The {WORDS[case % 10]} story number {case} was told by {watermark}."
    return Subject(item_key=f"{watermark}|{attack}|{case}", text=body, task="Write.", case_id=f"c{case}",
                   pack="mmw_book_reports", model=parse_model("embedded"), watermark=watermark, attack=attack, repetition=0)


def test_groups_pair_each_result_with_the_unwatermarked_output_of_its_case() -> None:
    judge = get_judge("mauve")
    subjects = [subject(i) for i in range(3)] + [subject(i, "kgw") for i in (2, 0, 1, 7)]
    subjects += [subject(i, "kgw", "swap:p=0.1") for i in range(2)]
    groups = {(g[0].watermark, g[0].attack): g for g in judge.groups(subjects)}
    assert set(groups) == {("none", "none"), ("kgw", "none"), ("kgw", "swap:p=0.1")}
    assert [s.case_id for s in groups[("none", "none")]] == ["c0", "c1", "c2"]     # the reference alone
    kgw = groups[("kgw", "none")]                                                 # c7 has no partner
    assert [(s.watermark, s.case_id) for s in kgw] == [("kgw", "c0"), ("kgw", "c1"), ("kgw", "c2"),
                                                        ("none", "c0"), ("none", "c1"), ("none", "c2")]
    assert [s.case_id for s in groups[("kgw", "swap:p=0.1")][2:]] == ["c0", "c1"]  # unattacked partners


@pytest.fixture(scope="module")
def embedded():
    provider = make_provider(parse_model("embedded"))
    yield provider
    provider.close()


def test_answers_from_the_embedded_model_score_like_texts_above_unlike_ones(embedded) -> None:
    judge = get_judge("mauve")
    base = [subject(i) for i in range(20)]
    alike = [subject(i, "kgw", text=s.text) for i, s in enumerate(base)]
    unlike = [subject(i, "exp", text="four hundred " * (5 + i % 3)) for i in range(20)]
    groups = judge.groups(base + alike + unlike)
    answers = dict(zip([(g[0].watermark) for g in groups], judge.answer_locally(embedded, "embedded", groups)))
    parsed = {wm: judge.parse(raw) for wm, raw in answers.items()}
    assert parsed["none"]["quality"] == 1.0 and parsed["none"]["reference"]
    # the noise floor: two halves of the 20 unwatermarked texts, 10 each, against each other
    floor = parsed["none"]["noise_floor"]
    assert floor["texts_per_half"] == 10 and floor["buckets"] == 2 and len(floor["replicates"]) == 50
    assert 0.0 <= floor["low"] <= floor["mauve"] <= floor["high"] <= 1.0
    assert parsed["kgw"]["quality"] == pytest.approx(1.0)           # the same texts
    assert parsed["exp"]["quality"] < 0.2                            # looping text, far from the baseline
    for wm in ("kgw", "exp"):
        p = parsed[wm]
        assert p["source"] == "mauve" and p["pairs"] == 20 and p["buckets"] == 2 and p["scorer"] == "embedded"
        assert p["about"] == {"watermark": wm, "attack": "none"}
        assert p["interval"][0] <= p["interval"][1] and len(p["replicates"]) == 50
    # recomputed: the same bits (seeds come from the texts)
    assert judge.answer_locally(embedded, "embedded", groups) == [answers[g[0].watermark] for g in groups]


def test_no_noise_floor_below_twenty_unwatermarked_texts(embedded) -> None:
    judge = get_judge("mauve")
    groups = judge.groups([subject(i) for i in range(19)])
    [raw] = judge.answer_locally(embedded, "embedded", groups)
    assert "noise_floor" not in judge.parse(raw) and judge.parse(raw)["reference"]


def test_unreadable_answers_are_unparsed_never_guessed() -> None:
    judge = get_judge("mauve")
    for raw in ("", "0.9", json.dumps({"mauve": 1.5, "about": {}}), json.dumps({"mauve": 0.5})):
        assert judge.parse(raw)["label"] == UNPARSED


def test_any_provider_with_embeddings_serves_mauve_over_http() -> None:
    """An OpenAI-compatible /v1/embeddings endpoint as the embedder (the real openai client,
    real HTTP, the local test server's deterministic embeddings)."""
    from evalrun.testing.chat_server import ChatServer

    judge = get_judge("mauve")
    base = [subject(i) for i in range(20)]
    same = [subject(i, "kgw", text=s.text) for i, s in enumerate(base)]
    groups = judge.groups(base + same)
    with ChatServer() as server:
        provider = make_provider(parse_model("openai:embedder"), base_url=server.base_url)
        try:
            answers = judge.answer_locally(provider, "openai:embedder", groups)
        finally:
            provider.close()
        assert server.texts_embedded == 20   # the distinct texts, each embedded once
    parsed = judge.parse(answers[[g[0].watermark for g in groups].index("kgw")])
    assert parsed["quality"] == pytest.approx(1.0) and parsed["scorer"] == "openai:embedder"
