"""Content tests for the MarkMyWords task packs (MarkMyWords, section III and appendix A).

``mmw_book_reports``, ``mmw_stories``, ``mmw_news`` and ``mmw_validation`` are detection packs
whose grader is the shared detection grader. These tests read the packs' files straight from
disk with ``json``/``tomllib``/``jsonschema`` and never import a pack's grader, so they pin the
case content (counts, ids, schema, prompt wording, passages) on their own.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import tomllib

from evalrun.pack.loading import load_pack

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
    assert "MarkMyWords, section III" in meta["description"]
    assert meta["labels"] == ["DETECTED", "NOT_DETECTED"]
    assert meta["pass_score"] == 0.0
    assert meta["detection_threshold"] == 0.02
    assert meta["defaults"] == {"max_tokens": 1024, "temperature": 1.0}
    assert meta["system_prompt"] == SYSTEM_PROMPTS[name]
    assert meta["group_field"]


@pytest.mark.parametrize("name", GENERATION_PACKS)
def test_grader_is_the_shared_detection_grader(name: str) -> None:
    pack = load_pack(PACKS / name)
    assert not (PACKS / name / "grader.py").exists() and pack.builtin_grader is not None
    assert pack.builtin_grader.name == "detection" and pack.prepares  # batched detection before grading


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
# Prompt wording: MarkMyWords appendix A-A, as its code writes it


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


# ---------------------------------------------------------------------------------------------
# mmw_validation (MarkMyWords, appendix A-B)

VALIDATION = "mmw_validation"
VCASES = load_cases(VALIDATION)
EXPECTED_VALIDATION = {
    ("V1", "legal_research"): 50,
    ("V1", "rfc_summary"): 50,
    ("V2", "french_book_report"): 100,
    ("V3", "paraphrase"): 100,
    ("V3", "translate"): 100,
    ("V4", "code"): 300,  # the seed's count (300 APPS problems); ours are written for the pack
    ("V5", "summary"): 100,
}
PASSAGE_TASKS = ("paraphrase", "translate", "summary")
PACKAGES = ("r-cran-janeaustenr", "r-cran-tokenizers", "bible-kjv-text")
SOURCE_PATTERNS = (
    re.compile(r"^Jane Austen, (Sense and Sensibility|Pride and Prejudice|Mansfield Park|Emma|Northanger Abbey"
               r"|Persuasion), (volume [1-3], )?chapter [1-9][0-9]*, paragraph [1-9][0-9]*$"),
    re.compile(r"^Herman Melville, Moby-Dick, chapter [1-9][0-9]*, paragraph [1-9][0-9]*$"),
    re.compile(r"^King James Version, ([12] )?[A-Z][a-z]+ [1-9][0-9]*:1-[1-9][0-9]*$"),
)


def by_task(task: str) -> list[dict[str, Any]]:
    return [c for c in VCASES if c["task"] == task]


def validation_schema() -> dict[str, Any]:
    return json.loads((PACKS / VALIDATION / "case.schema.json").read_text(encoding="utf-8"))


def test_validation_pack_toml() -> None:
    meta = pack_toml(VALIDATION)
    assert meta["name"] == VALIDATION and meta["version"] == "1.0"
    assert "Piet et al., section III" in meta["description"]
    assert meta["labels"] == ["DETECTED", "NOT_DETECTED"]
    assert meta["pass_score"] == 0.0
    assert meta["detection_threshold"] == 0.02
    assert meta["defaults"] == {"max_tokens": 1024, "temperature": 1.0}
    assert meta["group_field"] == "set"
    assert meta["system_prompt"] == ACCURATE_ASSISTANT
    assert template_fields(meta["prompt_template"]) == {"prompt"}
    assert meta["grader"] == "detection" and load_pack(PACKS / VALIDATION).prepares  # batched detection


def test_validation_counts_per_set_and_task() -> None:
    assert len(VCASES) == sum(EXPECTED_VALIDATION.values()) == 800
    assert dict(Counter((c["set"], c["task"]) for c in VCASES)) == EXPECTED_VALIDATION
    assert dict(Counter(c["set"] for c in VCASES)) == {"V1": 100, "V2": 100, "V3": 200, "V4": 300, "V5": 100}


def test_validation_ids_unique_and_readable() -> None:
    ids = [c["id"] for c in VCASES]
    assert len(ids) == len(set(ids))
    for case in VCASES:
        assert case["id"].startswith(case["set"].lower() + "-"), case["id"]


def test_validation_cases_valid_against_schema() -> None:
    schema = validation_schema()
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    validator = validator_cls(schema)
    for case in VCASES:
        errors = [e.message for e in validator.iter_errors(case)]
        assert not errors, (case["id"], errors)


def test_validation_schema_ties_fields_to_task() -> None:
    validator = jsonschema.Draft202012Validator(validation_schema())
    legal = by_task("legal_research")[0]
    assert not validator.is_valid({**legal, "source_text": "x" * 300})  # a field of another task
    assert not validator.is_valid({**legal, "set": "V2"})  # the wrong set for the task
    assert not validator.is_valid({k: v for k, v in legal.items() if k != "topic"})
    summary = by_task("summary")[0]
    assert not validator.is_valid({k: v for k, v in summary.items() if k != "source"})
    assert not validator.is_valid({**summary, "extra": 1})


def test_validation_prompts_distinct_and_template_fields_present() -> None:
    fields = template_fields(pack_toml(VALIDATION)["prompt_template"])
    for case in VCASES:
        assert fields <= case.keys()
        assert render(VALIDATION, case) == case["prompt"]
    prompts = [c["prompt"] for c in VCASES]
    assert len(prompts) == len(set(prompts))


def test_v1_prompts_follow_the_seed() -> None:
    # Seed 000 appendix A-B (V1), with the seed's "Make sure is it" read as "Make sure it is".
    for case in by_task("legal_research"):
        x = case["topic"]
        assert case["prompt"] == (
            f"Conduct legal research on {x}. Please summarize relevant regulations by region or country and "
            "include citations. Make conclusions based on your research about key developments in this field. "
            f"Based on the current trends, make your forecast about how {x} will be regulated in the future."
        )
    assert by_task("legal_research")[0]["topic"] == "AI"  # the seed's example
    for case in by_task("rfc_summary"):
        assert case["prompt"] == (
            f"Write a detailed explanation and description of RFC {case['rfc_number']}: {case['rfc_title']}. "
            "Make sure it is self contained so I do not need to read the RFC myself to fully understand it."
        )
        assert case["id"] == f"v1-rfc-{case['rfc_number']}"
    assert len({c["topic"].casefold() for c in by_task("legal_research")}) == 50
    assert len({c["rfc_number"] for c in by_task("rfc_summary")}) == 50
    titles = {c["rfc_number"]: c["rfc_title"] for c in by_task("rfc_summary")}
    assert titles[8446] == "The Transport Layer Security (TLS) Protocol Version 1.3"
    assert titles[791] == "Internet Protocol"


FRENCH_PROMPT = re.compile(r"^Écris un résumé détaillé de « (?P<title>.+) », écrit par (?P<author>.+)\.$")


def test_v2_prompts_are_french_book_reports_over_the_book_pack() -> None:
    french = by_task("french_book_report")
    books = {c["id"]: c for c in CASES["mmw_book_reports"]}
    assert [c["book_id"] for c in french] == list(books)
    for case in french:
        match = FRENCH_PROMPT.match(case["prompt"])
        assert match, case["prompt"]
        assert (match["title"], match["author"]) == (case["title"], case["author"])
        assert not re.search(r"\b(Write|book report|written by)\b", case["prompt"])
        assert case["id"] == f"v2-{case['book_id']}"
    by_book = {c["book_id"]: c for c in french}
    # French titles, not the English ones, where a French title differs
    assert by_book["book-001"]["title"] == "Orgueil et Préjugés"
    assert by_book["book-032"]["title"] == "Les Hauts de Hurlevent"
    assert by_book["book-025"]["author"] == "Homère"
    assert sum(1 for c in french if c["title"] != books[c["book_id"]]["title"]) >= 70
    assert len({c["title"] for c in french}) == 100


def test_v3_v5_passages_are_short_sourced_and_distinct() -> None:
    texts = []
    for task in PASSAGE_TASKS:
        for case in by_task(task):
            text = case["source_text"]
            n = len(text.split())
            assert text.strip() == text and "  " not in text and "\n" not in text, case["id"]
            assert 80 <= n <= 250, (case["id"], n)
            if task == "summary":
                assert n >= 120, (case["id"], n)
            assert "_" not in text, case["id"]  # Gutenberg italics markers removed
            assert re.search(r"[.!?][\"')]?$", text), case["id"]  # ends on a full sentence
            assert any(p.match(case["source"]) for p in SOURCE_PATTERNS), case["source"]
            package, version = case["source_package"].split(" ")
            assert package in PACKAGES and version
            texts.append(text)
    assert len(texts) == 300
    assert len(set(texts)) == 300  # no passage is used twice, across V3 and V5
    for task in PASSAGE_TASKS:
        cases = by_task(task)
        per_corpus = Counter(c["source_package"].split(" ")[0] for c in cases)
        assert per_corpus == {"r-cran-janeaustenr": 50, "r-cran-tokenizers": 25, "bible-kjv-text": 25}, task
        assert [c["id"] for c in cases] == [f"{cases[0]['set'].lower()}-{task}-{i:03d}" for i in range(1, 101)]


def test_v3_prompts_are_markmywords_wording() -> None:
    # MarkMyWords src/watermark_benchmark/utils/generation_prompts.py (paraphrase_prompt,
    # translation_prompt); the seed names the tasks but gives no wording.
    for case in by_task("paraphrase"):
        assert case["prompt"] == f"Paraphrase the following text:\n[[START OF TEXT]]\n{case['source_text']}\n[[END OF TEXT]]"
    for case in by_task("translate"):
        assert case["prompt"] == (
            f"Translate the following text to French:\n[[START OF TEXT]]\n{case['source_text']}\n[[END OF TEXT]]"
        )


V5_PROMPT = re.compile(
    r"^Extract a 3 sentence highlight from the following article\. Here is one example for reference\.\n"
    r"Example:\n\* Article: (?P<xx>[^\n]+)\n\* Highlights: (?P<yy>[^\n]+)\n"
    r"Current Task:\n\* Article: (?P<x>[^\n]+)\n\* Highlights:$"
)


def test_v5_prompts_follow_the_seed_one_shot_layout() -> None:
    examples = set()
    passages = {c["source_text"] for t in PASSAGE_TASKS for c in by_task(t)}
    for case in by_task("summary"):
        match = V5_PROMPT.match(case["prompt"])
        assert match, case["id"]
        assert match["x"] == case["source_text"]
        examples.add((match["xx"], match["yy"], case["example_source"]))
    assert len(examples) == 1  # one fixed worked example, as in the seed
    (article, highlights, source), = examples
    assert article not in passages
    assert any(p.match(source) for p in SOURCE_PATTERNS)
    assert len(re.findall(r"(?<!Mr)(?<!Mrs)[.!?](?=\s|$)", highlights)) == 3  # three sentences


def test_v4_problems_are_complete_and_distinct() -> None:
    cases = by_task("code")
    assert len({c["title"] for c in cases}) == 300
    assert len({c["statement"] for c in cases}) == 300
    for case in cases:
        prompt = case["prompt"]
        assert prompt.startswith("Solve the following programming problem in Python 3.")
        for field in ("title", "statement", "input_spec", "output_spec", "example_input", "example_output"):
            assert case[field] in prompt, (case["id"], field)
        assert prompt.endswith(f"Example output:\n{case['example_output']}")
        assert case["example_output"].strip(), case["id"]


def _load_module(path: Path, name: str):
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def test_v4_example_outputs_come_from_the_reference_solutions() -> None:
    tasks = _load_module(PACKS / VALIDATION / "programming_tasks.py", "_mmw_programming_tasks").TASKS
    by_slug = {c["id"].removeprefix("v4-code-"): c for c in by_task("code")}
    assert [t.slug for t in tasks] == list(by_slug)
    for t in tasks:
        case = by_slug[t.slug]
        assert t.solve(t.example_input).rstrip("\n") == case["example_output"], t.slug


def test_generator_reproduces_the_committed_cases() -> None:
    import shutil
    import subprocess
    import sys

    if not (shutil.which("Rscript") and shutil.which("bible") and shutil.which("dpkg-query")):
        pytest.skip("the corpora come from Debian r-cran-janeaustenr, r-cran-tokenizers and bible-kjv")
    for package in PACKAGES:
        if subprocess.run(["dpkg-query", "-W", package], capture_output=True).returncode:
            pytest.skip(f"Debian package {package} is not installed")
    script = PACKS / VALIDATION / "generate_cases.py"
    proc = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
