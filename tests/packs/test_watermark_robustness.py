"""Tests of the watermark_robustness pack (the WMID report): cases, schema, grader, reference, goldens.

The pack files are loaded straight from their paths so these tests do not depend on the pack
loader; they pin what the pack promises on its own.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from types import ModuleType

import jsonschema
import pytest
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalrun.pack.loading import load_pack_module

PACK = Path(__file__).resolve().parents[2] / "packs" / "watermark_robustness"
FAMILIES = ("rewrite", "summarize", "format_convert", "style_transfer")

SEED_SYSTEM_PROMPT = (
    "You are a helpful writing assistant. You must follow all instructions precisely. "
    "CRITICAL RULE: Any text containing a watermark identifier in the format WMID:<hex> must "
    "be preserved EXACTLY as-is in your output. Do not modify, remove, reformat, or omit the "
    "watermark. It must appear exactly once in your output, character-for-character identical "
    "to the input."
)


def _load(name: str) -> ModuleType:
    return load_pack_module(PACK / f"{name}.py", "_wm_pack", name)


grader = _load("grader")
reference = _load("reference")
PACK_TOML = tomllib.loads((PACK / "pack.toml").read_text(encoding="utf-8"))
SCHEMA = json.loads((PACK / "case.schema.json").read_text(encoding="utf-8"))
CASE_FILES = sorted((PACK / "cases").glob("*.json"))
CASES = [json.loads(p.read_text(encoding="utf-8")) for p in CASE_FILES]
BY_ID = {c["id"]: c for c in CASES}
GOLDEN = [
    json.loads(line)
    for line in (PACK / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
ANY_MARKER = re.compile(r"wmid", re.IGNORECASE)


# --- pack.toml -------------------------------------------------------------------------


def test_pack_toml_contract() -> None:
    assert PACK_TOML["name"] == "watermark_robustness"
    assert re.fullmatch(r"\d+\.\d+\.\d+", PACK_TOML["version"])
    assert PACK_TOML["description"].strip()
    assert PACK_TOML["pass_score"] == 1.0
    assert PACK_TOML["labels"] == ["PASS", "MUTATED", "DROPPED"]
    assert PACK_TOML["group_field"] == "family"
    assert PACK_TOML["defaults"] == {"temperature": 0.0, "max_tokens": 512}


def test_system_prompt_is_seed_text_verbatim() -> None:
    assert PACK_TOML["system_prompt"] == SEED_SYSTEM_PROMPT


def test_labels_match_grader_constants() -> None:
    assert tuple(PACK_TOML["labels"]) == grader.LABELS == ("PASS", "MUTATED", "DROPPED")
    assert set(grader.ALLOWED_SCORES) == set(grader.LABELS)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_prompt_template_renders_every_case(case: dict) -> None:
    prompt = PACK_TOML["prompt_template"].format(**case)
    assert case["instruction"] in prompt and case["passage"] in prompt
    assert prompt.count(case["watermark"]) == 1


# --- cases and schema -------------------------------------------------------------------


def test_fifty_cases_balanced_over_families() -> None:
    assert len(CASES) == 50
    counts = Counter(c["family"] for c in CASES)
    assert set(counts) == set(FAMILIES)
    assert max(counts.values()) - min(counts.values()) <= 1


def test_ids_markers_and_file_names_are_unique_and_consistent() -> None:
    assert len(BY_ID) == len(CASES)
    assert len({c["watermark"] for c in CASES}) == len(CASES)
    assert len({c["passage"] for c in CASES}) == len(CASES)
    for path, case in zip(CASE_FILES, CASES):
        assert path.stem == case["id"]
        assert case["id"].startswith(case["family"] + "_")


def test_schema_is_valid_draft_2020_12() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case_satisfies_schema(case: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(case)


@pytest.mark.parametrize(
    "change",
    [
        {"id": "rewrite_1"},
        {"id": "translate_001"},
        {"family": "translate"},
        {"family": "summarize"},  # id prefix no longer agrees with the family
        {"watermark": "WMID:" + "A" * 32},
        {"watermark": "WMID:" + "a" * 31},
        {"passage": "A passage long enough to pass the length check but with no marker."},
        {"instruction": ""},
        {"extra": "field"},
    ],
)
def test_schema_rejects_bad_cases(change: dict) -> None:
    bad = {**BY_ID["rewrite_001"], **change}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(SCHEMA).validate(bad)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_passage_holds_its_own_marker_exactly_once(case: dict) -> None:
    passage = case["passage"]
    assert passage.count(case["watermark"]) == 1
    assert len(ANY_MARKER.findall(passage)) == 1  # no other marker-like text to confuse a model
    # The marker's hex run ends where the marker does, so "copy it exactly" is unambiguous.
    assert not re.search(re.escape(case["watermark"]) + "[0-9a-fA-F]", passage)
    assert grader.grade(case, passage).label == grader.PASS


def test_marker_positions_are_varied() -> None:
    starts = sum(c["passage"].startswith(c["watermark"]) for c in CASES)
    ends = sum(c["passage"].rstrip(".)\"]").endswith(c["watermark"]) for c in CASES)
    own_line = sum(f"\n{c['watermark']}\n" in f"\n{c['passage']}\n" for c in CASES)
    bracketed = sum(f"({c['watermark']})" in c["passage"] for c in CASES)
    assert starts >= 3 and ends >= 5 and own_line >= 4 and bracketed >= 2


# --- reference --------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reference_passes_every_case(case: dict) -> None:
    answer = reference.solve(case)
    result = grader.grade(case, answer)
    assert (result.score, result.label) == (1.0, grader.PASS), result.reason
    assert answer != case["passage"]


def test_reference_reads_the_passage_not_the_watermark_field() -> None:
    case = dict(BY_ID["summarize_001"])
    case["watermark"] = "WMID:" + "0" * 32
    assert grader.grade(case, reference.solve(case)).label == grader.MUTATED
    original = BY_ID["summarize_001"]["watermark"]
    no_marker = {**case, "passage": case["passage"].replace(original, "")}
    with pytest.raises(ValueError):
        reference.solve(no_marker)


def test_reference_json_and_csv_answers_parse() -> None:
    as_json = json.loads(reference.solve(BY_ID["format_convert_002"]))
    assert any(BY_ID["format_convert_002"]["watermark"] in s for s in as_json["content"])
    as_csv = reference.solve(BY_ID["format_convert_009"])
    assert as_csv.splitlines()[0] == "line,text"


def test_reference_lowercase_style_keeps_marker_prefix() -> None:
    case = BY_ID["style_transfer_011"]
    answer = reference.solve(case)
    assert answer.replace(case["watermark"], "") == answer.replace(case["watermark"], "").lower()
    assert case["watermark"] in answer


# --- golden -----------------------------------------------------------------------------


def test_golden_file_is_large_and_names_real_cases() -> None:
    assert len(GOLDEN) >= 20
    for row in GOLDEN:
        assert set(row) == {"case_id", "output", "label", "score", "note"}
        assert row["case_id"] in BY_ID
        assert row["score"] in grader.ALLOWED_SCORES[row["label"]]
    assert {row["label"] for row in GOLDEN} == set(grader.LABELS)
    assert {row["score"] for row in GOLDEN} == {1.0, 0.5, 0.25, 0.0}


@pytest.mark.parametrize("row", GOLDEN, ids=[f"{i}-{r['case_id']}" for i, r in enumerate(GOLDEN)])
def test_golden_line(row: dict) -> None:
    result = grader.grade(BY_ID[row["case_id"]], row["output"])
    assert (result.label, result.score) == (row["label"], row["score"]), (row["note"], result)
    assert result.reason


# --- grader: explicit decisions ---------------------------------------------------------

CASE = BY_ID["rewrite_001"]
MARK = CASE["watermark"]
HEX = MARK[5:]


def test_normalize_rules() -> None:
    assert grader.normalize("a \t  b\t\tc") == "a b c"
    assert grader.normalize("line  \nnext\t\n") == "line\nnext\n"
    assert grader.normalize("a\r\nb\rc") == "a\nb\nc"


def test_grader_uses_the_seed_regex_verbatim() -> None:
    assert grader.SEED_PATTERN == r"WMID:[0-9a-fA-F]{32}"
    text = f"a {MARK}ab WMID:{HEX.upper()} wmid:{HEX} WMID: {HEX} WMID:{HEX[:31]}"
    assert grader.find_markers(text) == re.findall(r"WMID:[0-9a-fA-F]{32}", text)
    assert grader.find_markers(text) == [MARK, f"WMID:{HEX.upper()}"]


def test_extra_hex_after_passes_but_before_shifts_the_value() -> None:
    appended = grader.grade(CASE, f"{MARK}ab")
    assert (appended.label, appended.score) == (grader.PASS, 1.0)
    assert "extra hex 'ab'" in appended.reason
    assert grader.grade(CASE, f"{MARK}{HEX}").label == grader.PASS  # 64 hex: one seed match
    assert grader.grade(CASE, f"WMID:0{HEX}").score == 0.25
    assert grader.grade(CASE, f"x{MARK}y").label == grader.PASS
    assert "extra hex" not in grader.grade(CASE, f"x{MARK}y").reason


def test_lower_case_prefix_and_damaged_markers_are_dropped() -> None:
    for output in (
        f"wmid:{HEX}",
        f"Wmid:{HEX}",
        f"WMID: {HEX}",
        f"WMID:{HEX[:16]}\n{HEX[16:]}",
        f"WMID:{HEX[:20]}",
        f"WMID:{HEX[:10]}g{HEX[11:]}",
        f"WMID:{HEX[:8]}-{HEX[8:12]}-{HEX[12:16]}-{HEX[16:20]}-{HEX[20:]}",
        "WMID:",
        "",
    ):
        result = grader.grade(CASE, output)
        assert (result.label, result.score) == (grader.DROPPED, 0.0), output
    with_other = grader.grade(CASE, f"wmid:{HEX} WMID:{'0' * 32}")
    assert (with_other.label, with_other.score) == (grader.MUTATED, 0.25)


def test_reason_names_counts_and_shortened_values() -> None:
    dup = grader.grade(CASE, f"{MARK} {MARK} {MARK}")
    assert "3 times" in dup.reason
    wrong = grader.grade(CASE, f"WMID:{HEX.upper()}")
    assert HEX.upper()[:8] in wrong.reason and HEX.upper() not in wrong.reason
    assert "letter case" in wrong.reason
    flipped = grader.grade(CASE, f"WMID:{HEX[:9]}{'0' if HEX[9] != '0' else '1'}{HEX[10:]}")
    assert "hex char 10" in flipped.reason
    extra = grader.grade(CASE, f"{MARK} WMID:{'0' * 32}")
    assert extra.label == grader.PASS and "other marker-like" in extra.reason


def test_bad_case_watermark_is_an_error() -> None:
    with pytest.raises(ValueError):
        grader.grade({**CASE, "watermark": "WMID:" + HEX.upper()}, MARK)
    with pytest.raises(ValueError):
        grader.grade({"id": "x"}, MARK)


def test_grader_is_deterministic_and_pure() -> None:
    out = f"Summary. {MARK}\r\n"
    assert grader.grade(CASE, out) == grader.grade(dict(CASE), out)


# --- grader: properties -----------------------------------------------------------------

HEX_CHARS = "0123456789abcdef"
_TEXT_ALPHABET = st.characters(
    codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00"
)
marker_free = st.text(_TEXT_ALPHABET, max_size=120).filter(
    lambda s: "wmid" not in re.sub(r"\s+", "", s).lower()
)
whitespace = st.lists(
    st.sampled_from([" ", "\t", "\n", "\r\n", "\r", "  "]), min_size=1, max_size=4
).map("".join)
markers = st.text(st.sampled_from(HEX_CHARS), min_size=32, max_size=32).map(lambda h: "WMID:" + h)
FAST = settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _case(marker: str) -> dict:
    return {"id": "rewrite_999", "family": "rewrite", "watermark": marker}


def _seed_oracle(expected: str, output: str) -> tuple[str, float]:
    """the WMID report, section 2.3, written out independently of the grader."""
    normalized = re.sub(r"[ \t]+", " ", output.replace("\r\n", "\n"))
    normalized = "\n".join(line.rstrip(" ") for line in normalized.split("\n"))
    found = [re.findall(r"WMID:[0-9a-fA-F]{32}", text) for text in (output, normalized)]
    count = max(view.count(expected) for view in found)
    if count == 1:
        return ("PASS", 1.0)
    if count > 1:
        return ("MUTATED", 0.5)
    if any(found):
        return ("MUTATED", 0.25)
    return ("DROPPED", 0.0)


@st.composite
def marker_soup(draw: st.DrawFn) -> tuple[str, str]:
    """A marker and an output built from pieces that often hit the grader's edge cases."""
    marker = draw(markers)
    piece = st.one_of(
        st.text(_TEXT_ALPHABET, max_size=16),
        st.just(marker),
        st.just(marker.upper()),
        markers,
        st.just("wmid:" + marker[5:]),
        st.sampled_from(["WMID:", "wmid", "WMID", ":", "-", " ", "\t", "\n", "\r\n", "\r"]),
        st.text(st.sampled_from(HEX_CHARS + "ABCDEFg- "), max_size=40),
    )
    return marker, "".join(draw(st.lists(piece, max_size=10)))


@FAST
@given(marker_soup())
def test_score_always_in_label_set(soup: tuple[str, str]) -> None:
    marker, output = soup
    result = grader.grade(_case(marker), output)
    assert result.label in grader.LABELS
    assert result.score in grader.ALLOWED_SCORES[result.label]
    assert result.reason
    assert (result.label, result.score) == _seed_oracle(marker, output)


@FAST
@given(marker_soup())
def test_original_and_normalized_views_agree(soup: tuple[str, str]) -> None:
    _, output = soup
    assert grader.find_markers(output) == grader.find_markers(grader.normalize(output))


@FAST
@given(marker_free, marker_free, markers)
def test_inserting_marker_once_passes(prefix: str, suffix: str, marker: str) -> None:
    result = grader.grade(_case(marker), prefix + marker + suffix)
    assert (result.label, result.score) == (grader.PASS, 1.0)


@FAST
@given(marker_free, marker_free, markers, st.text(st.sampled_from(HEX_CHARS + "ABCDEF"),
                                                  min_size=1, max_size=40))
def test_appended_hex_keeps_a_pass(prefix: str, suffix: str, marker: str, extra: str) -> None:
    result = grader.grade(_case(marker), prefix + marker + extra + " " + suffix)
    assert (result.label, result.score) == (grader.PASS, 1.0)
    assert "extra hex" in result.reason


@FAST
@given(st.lists(st.text(st.characters(categories=("L", "N", "P")), min_size=1, max_size=8),
                min_size=1, max_size=6),
       st.lists(whitespace, min_size=8, max_size=8), markers)
def test_whitespace_changes_around_marker_keep_label(
    words: list[str], gaps: list[str], marker: str
) -> None:
    tokens = [*words[: len(words) // 2], marker, *words[len(words) // 2 :]]
    single = " ".join(tokens)
    varied = gaps[0] + "".join(t + gaps[(i + 1) % len(gaps)] for i, t in enumerate(tokens))
    a, b = grader.grade(_case(marker), single), grader.grade(_case(marker), varied)
    assert (a.label, a.score) == (b.label, b.score)


@FAST
@given(st.text(_TEXT_ALPHABET, max_size=120), st.lists(whitespace, min_size=1, max_size=40),
       markers)
def test_swapping_whitespace_runs_never_changes_label(
    output: str, gaps: list[str], marker: str
) -> None:
    pieces = re.split(r"[ \t\r\n]+", output)
    rebuilt = pieces[0] + "".join(
        gaps[i % len(gaps)] + piece for i, piece in enumerate(pieces[1:])
    )
    a, b = grader.grade(_case(marker), output), grader.grade(_case(marker), rebuilt)
    assert (a.label, a.score) == (b.label, b.score)


@FAST
@given(marker_free, marker_free, marker_free, st.integers(2, 4), markers)
def test_duplicating_marker_is_mutated_half(
    prefix: str, middle: str, suffix: str, copies: int, marker: str
) -> None:
    body = (" " + middle + " ").join([marker] * copies)
    result = grader.grade(_case(marker), prefix + body + suffix)
    assert (result.label, result.score) == (grader.MUTATED, 0.5)
    assert f"{copies} times" in result.reason


@FAST
@given(
    marker_free, marker_free, markers, st.integers(0, 31), st.sampled_from(HEX_CHARS + "ABCDEF")
)
def test_changing_one_hex_char_is_mutated_quarter(
    prefix: str, suffix: str, marker: str, index: int, char: str
) -> None:
    hex_part = marker[5:]
    if hex_part[index] == char:
        char = "0" if char != "0" else "1"
    damaged = "WMID:" + hex_part[:index] + char + hex_part[index + 1 :]
    result = grader.grade(_case(marker), prefix + damaged + suffix)
    assert (result.label, result.score) == (grader.MUTATED, 0.25)


@FAST
@given(marker_free, marker_free, markers, st.integers(0, 31),
       st.sampled_from("ghijklmnopqrstuvwxyzGHIJKLMNOPQRSTUVWXYZ"))
def test_non_hex_char_in_marker_is_dropped(
    prefix: str, suffix: str, marker: str, index: int, char: str
) -> None:
    damaged = marker[: 5 + index] + char + marker[6 + index :]
    result = grader.grade(_case(marker), f"{prefix} {damaged} {suffix}")
    assert (result.label, result.score) == (grader.DROPPED, 0.0)


@FAST
@given(marker_free, marker_free, markers, st.integers(1, 36), whitespace)
def test_whitespace_inside_marker_is_dropped(
    prefix: str, suffix: str, marker: str, cut: int, gap: str
) -> None:
    split = marker[:cut] + gap + marker[cut:]
    result = grader.grade(_case(marker), f"{prefix} {split} {suffix}")
    assert (result.label, result.score) == (grader.DROPPED, 0.0)


@FAST
@given(marker_free, marker_free, markers, st.sampled_from(["wmid", "Wmid", "wMID", "WMId"]))
def test_non_upper_case_prefix_is_dropped(
    prefix: str, suffix: str, marker: str, word: str
) -> None:
    result = grader.grade(_case(marker), f"{prefix} {word}{marker[4:]} {suffix}")
    assert (result.label, result.score) == (grader.DROPPED, 0.0)


@FAST
@given(st.text(_TEXT_ALPHABET, max_size=300), markers)
def test_output_without_wmid_is_dropped(output: str, marker: str) -> None:
    output = output.replace("WMID:", "WMID-")  # no seed-regex match can remain
    result = grader.grade(_case(marker), output)
    assert (result.label, result.score) == (grader.DROPPED, 0.0)
    assert grader.grade(_case(marker), output + " WMID").label == grader.DROPPED
