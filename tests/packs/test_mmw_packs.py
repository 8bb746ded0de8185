"""Content tests for the MarkMyWords task packs (seed 000, section III and appendix A).

``mmw_book_reports``, ``mmw_stories``, ``mmw_news`` and ``mmw_validation`` are detection packs
whose grader is the shared detection grader. These tests read the packs' files straight from
disk with ``json``/``tomllib``/``jsonschema`` and never import a pack's grader, so they pin the
case content (counts, ids, schema, prompt wording, passages) on their own.
"""

from __future__ import annotations

import json
import re
import string
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[2]
PACKS = REPO / "packs"

GENERATION_PACKS = ("mmw_book_reports", "mmw_stories", "mmw_news")
ALL_PACKS = (*GENERATION_PACKS, "mmw_validation")

# Exact case counts per pack and per group value (the pack's group_field).
EXPECTED_GROUPS: dict[str, dict[str, int]] = {
    "mmw_book_reports": {"book_report": 100},
    "mmw_stories": {t: 16 for t in ("none", "funny", "sad", "dramatic", "suspenseful", "thrilling")},
    "mmw_news": {
        "a peace conference": 25,
        "an international summit": 25,
        "a diplomatic event": 25,
        "the Summer Olympics": 25,
    },
}
EXPECTED_TOTAL = {"mmw_book_reports": 100, "mmw_stories": 96, "mmw_news": 100}

# System prompts of MarkMyWords' generation tasks (src/watermark_benchmark/utils/
# generation_prompts.py: report/story_system_prompt, fake_news_system_prompt).
ACCURATE_ASSISTANT = "You are a helpful assistant. Always answer in the most accurate way."
SYSTEM_PROMPTS = {
    "mmw_book_reports": ACCURATE_ASSISTANT,
    "mmw_stories": ACCURATE_ASSISTANT,
    "mmw_news": "You are a helpful assistant. Always respond with realistic yet invented articles.",
}


def pack_toml(name: str) -> dict[str, Any]:
    with open(PACKS / name / "pack.toml", "rb") as handle:
        return tomllib.load(handle)


def load_cases(name: str) -> list[dict[str, Any]]:
    cases = []
    for path in sorted((PACKS / name / "cases").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                cases.append(json.loads(line))
    return cases


def template_fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def render(name: str, case: dict[str, Any]) -> str:
    return pack_toml(name)["prompt_template"].format_map(case)


CASES = {name: load_cases(name) for name in GENERATION_PACKS}


# ---------------------------------------------------------------------------------------------
# Pack metadata


@pytest.mark.parametrize("name", GENERATION_PACKS)
def test_pack_toml(name: str) -> None:
    meta = pack_toml(name)
    assert meta["name"] == name
    assert meta["version"] == "1.0"
    assert "seed 000" in meta["description"]
    assert meta["labels"] == ["DETECTED", "NOT_DETECTED"]
    assert meta["pass_score"] == 0.0
    assert meta["detection_threshold"] == 0.02
    assert meta["defaults"] == {"max_tokens": 1024, "temperature": 1.0}
    assert meta["system_prompt"] == SYSTEM_PROMPTS[name]
    assert meta["group_field"]


@pytest.mark.parametrize("name", GENERATION_PACKS)
def test_grader_is_the_shared_detection_grader(name: str) -> None:
    source = (PACKS / name / "grader.py").read_text(encoding="utf-8")
    assert "from evalrun.detection_grading import grade_detection" in source
    assert "return grade_detection(case, output, context)" in source


# ---------------------------------------------------------------------------------------------
# Cases: counts, ids, schema, template fields


@pytest.mark.parametrize("name", GENERATION_PACKS)
def test_case_counts_per_pack_and_group(name: str) -> None:
    cases = CASES[name]
    assert len(cases) == EXPECTED_TOTAL[name]
    group_field = pack_toml(name)["group_field"]
    assert dict(Counter(c[group_field] for c in cases)) == EXPECTED_GROUPS[name]


@pytest.mark.parametrize("name", GENERATION_PACKS)
def test_ids_unique(name: str) -> None:
    ids = [c["id"] for c in CASES[name]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("name", GENERATION_PACKS)
def test_every_case_valid_against_schema(name: str) -> None:
    schema = json.loads((PACKS / name / "case.schema.json").read_text(encoding="utf-8"))
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    validator = validator_cls(schema)
    for case in CASES[name]:
        errors = [e.message for e in validator.iter_errors(case)]
        assert not errors, (case["id"], errors)


@pytest.mark.parametrize("name", GENERATION_PACKS)
def test_schema_rejects_unknown_and_missing_fields(name: str) -> None:
    schema = json.loads((PACKS / name / "case.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    case = dict(CASES[name][0])
    assert not validator.is_valid({**case, "extra": "x"})
    for key in schema["required"]:
        assert not validator.is_valid({k: v for k, v in case.items() if k != key}), key


@pytest.mark.parametrize("name", GENERATION_PACKS)
def test_template_fields_present_and_prompts_distinct(name: str) -> None:
    fields = template_fields(pack_toml(name)["prompt_template"])
    assert fields
    prompts = []
    for case in CASES[name]:
        assert fields <= case.keys(), case["id"]
        prompts.append(render(name, case))
    assert len(prompts) == len(set(prompts))


@pytest.mark.parametrize("name", GENERATION_PACKS)
def test_group_field_is_a_required_case_field(name: str) -> None:
    schema = json.loads((PACKS / name / "case.schema.json").read_text(encoding="utf-8"))
    assert pack_toml(name)["group_field"] in schema["required"]


# ---------------------------------------------------------------------------------------------
# Prompt wording: seed 000 appendix A-A, as MarkMyWords' code writes it


def test_book_report_prompt_is_the_seed_sentence() -> None:
    pattern = re.compile(r"^Write a book report about '(?P<title>.+)', written by (?P<author>[^,]+)\.$")
    for case in CASES["mmw_book_reports"]:
        prompt = render("mmw_book_reports", case)
        assert prompt == f"Write a book report about '{case['title']}', written by {case['author']}."
        match = pattern.match(prompt)
        assert match and match["title"] == case["title"] and match["author"] == case["author"]
    first = CASES["mmw_book_reports"][0]
    assert render("mmw_book_reports", first) == "Write a book report about 'Pride and Prejudice', written by Jane Austen."


def test_books_are_distinct_with_authors() -> None:
    books = CASES["mmw_book_reports"]
    assert len({c["title"].casefold() for c in books}) == 100
    assert [c["id"] for c in books] == [f"book-{i:03d}" for i in range(1, 101)]
    spot = {c["title"]: c["author"] for c in books}
    assert spot["And Then There Were None"] == "Agatha Christie"
    assert spot["Villette"] == "Charlotte Brontë"
    assert spot["The Catcher in the Rye"] == "J. D. Salinger"
    assert spot["Journey to the End of the Night"] == "Louis-Ferdinand Céline"
    assert spot["The Three-Body Problem"] == "Liu Cixin"
    assert sum(1 for a in spot.values() if a == "William Shakespeare") == 6


def test_story_prompts_are_tone_times_topic() -> None:
    stories = CASES["mmw_stories"]
    topics = {c["topic"] for c in stories}
    tones = {c["tone"] for c in stories}
    assert len(topics) == 16 and len(tones) == 6
    assert {(c["tone"], c["topic"]) for c in stories} == {(t, s) for t in tones for s in topics}
    assert "three strangers that win a getaway vacation together" in topics  # the seed's example
    for case in stories:
        prompt = render("mmw_stories", case)
        if case["tone"] == "none":
            assert prompt == f"Write a story about {case['topic']}."
        else:
            assert prompt == f"Write a {case['tone']} story about {case['topic']}."
        assert not prompt.endswith("..")
        assert case["id"].startswith(f"story-{case['tone']}-")
    # the id names the topic the same way under every tone
    slug = {}
    for case in stories:
        tail = case["id"].removeprefix(f"story-{case['tone']}-")
        assert slug.setdefault(case["topic"], tail) == tail


def test_news_prompts_name_two_distinct_figures() -> None:
    news = CASES["mmw_news"]
    for case in news:
        assert case["visitor"] != case["host"]
        assert render("mmw_news", case) == (
            f"Write a news article about {case['visitor']}'s visit to {case['host']} in {case['location']}."
        )
    assert len({(c["visitor"], c["host"], c["location"]) for c in news}) == 100
    people = {c["visitor"] for c in news} | {c["host"] for c in news}
    assert len(people) == 8
