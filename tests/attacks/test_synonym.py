"""synonym: WordNet synonyms keeping inflection and case (MarkMyWords, in its fast mode)."""

from __future__ import annotations

import hashlib
import random
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalrun._util.errors import SpecError
from evalrun._util.specs import parse_spec
from evalrun.attacks import parse_attack
from evalrun.attacks.synonym import _PARTICIPLE_AUX, CLOSED_CLASS, candidates, synonym_table
from evalrun.attacks.synonym import synonym as SYNONYM
from evalrun.attacks.words import match_case, split_words
from evalrun.testing.rng import ScriptedRandom

replace = SYNONYM.fn
FAST = settings(max_examples=100, deadline=None)
REPO = Path(__file__).resolve().parents[2]
TABLE_SHA256 = "c804c0b132a338acf4a0ea715403856af1ba9adf565a51aaf224ed7706fa3182"


def run(text: str, draws: list[float], picks: list[int], p: float = 0.5) -> str:
    rng = ScriptedRandom(draws, picks)
    out = replace(text, parse_spec(f"synonym:p={p}"), rng)
    assert rng.unused == ([], [])
    return out


def test_table_is_the_committed_build_and_loads_once() -> None:
    blob = resources.files("evalrun.attacks").joinpath("data", "wordnet_synonyms.json.gz").read_bytes()
    assert hashlib.sha256(blob).hexdigest() == TABLE_SHA256
    table = synonym_table()
    assert synonym_table() is table
    # first lemma of each synset of "dog", WordNet sense order; SemCor counts 42 (n), 2 (v)
    assert table.readings["dog"] == {"n": [42, ["frump", "cad", "frank", "pawl", "andiron"]],
                                     "v": [2, ["chase"]]}
    assert ("choose", "v", "VBN") in table.inflected["chosen"]


@pytest.mark.parametrize("word, aux, expected", [
    # past tense vs participle, told apart by a preceding have/be/get
    ("developed", False, ("evolved", "grew", "originated", "explicated", "trained", "modernized", "broke")),
    ("developed", True, ("evolved", "grown", "originated", "explicated", "trained", "modernized", "broken")),
    ("dogs", False, ("frumps", "cads", "franks", "pawls", "andirons")),  # plural kept
    ("results", False, ("consequences", "solutions")),
    ("definitely", False, ("decidedly",)),
    # the most frequent reading wins: "walk" the verb (192) has no other first lemma
    ("walked", False, ()),
    # not replaceable: 3 letters or fewer, closed class, be/have/do, comparatives
    ("dog", False, ()),
    ("will", False, ()),
    ("about", False, ()),
    ("does", False, ()),
    ("being", False, ()),
    ("were", False, ()),
    ("having", False, ()),
    ("happier", False, ()),
    ("xyzzy", False, ()),
])
def test_candidates(word: str, aux: bool, expected: tuple[str, ...]) -> None:
    assert candidates(word, aux) == expected


def test_replaceable_words_draw_once_and_keep_case() -> None:
    # results: 0.1 < 0.5, pick 1 (solutions); were: be, no draw; surprising: 0.9, kept;
    # Definitely: first word of its sentence, 0.1, pick 0 (Decidedly); Paris: capitalised
    # mid-sentence, no draw; has: too short; developed (after "has": participle): 0.1,
    # pick 1 (grown); schemes: 0.9, kept
    text = "The results were surprising. Definitely, Paris has developed schemes."
    assert run(text, [0.1, 0.9, 0.1, 0.1, 0.9], [1, 0, 1]) == \
        "The solutions were surprising. Decidedly, Paris has grown schemes."


def test_upper_case_and_mid_sentence_capitals_are_left_alone() -> None:
    assert run("RESULTS, so. The Results, so.", [], []) == "RESULTS, so. The Results, so."


def test_p_one_replaces_every_replaceable_word() -> None:
    out = parse_attack("synonym:p=1").apply("Dogs developed schemes.", 7)
    words = split_words(out).words
    assert words[0] in {match_case("Dogs", c) for c in candidates("dogs")}
    assert words[1] in candidates("developed") and words[2] in candidates("schemes")


VOCAB = ["results", "Results", "dogs", "developed", "has", "were", "will", "about", "schemes",
         "definitely", "Definitely", "quick", "home", "the", "RESULTS", "went", "gone", "x"]


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(VOCAB), max_size=14))
    seps = draw(st.lists(st.sampled_from([" ", " ", ", ", ". ", "\n"]), min_size=len(words), max_size=len(words)))
    return "".join(w + s for w, s in zip(words, seps))


@FAST
@given(texts(), st.integers(0, 2**32), st.sampled_from([0.25, 0.5, 1.0]))
def test_only_replaceable_words_change_and_only_to_candidates(text: str, seed: int, p: float) -> None:
    before = split_words(text)
    after = split_words(replace(text, parse_spec(f"synonym:p={p}"), random.Random(seed)))
    assert after.gaps == before.gaps and len(after.words) == len(before.words)
    for i, (old, new) in enumerate(zip(before.words, after.words)):
        if old != new:
            aux = any(before.words[j].lower() in _PARTICIPLE_AUX for j in range(max(0, i - 2), i)
                      if before.sentences[j] == before.sentences[i])
            assert old.islower() or before.starts_sentence(i)
            assert old.lower() not in CLOSED_CLASS
            assert new in {match_case(old, c) for c in candidates(old.lower(), aux)}


@FAST
@given(st.text(), st.integers(0, 2**32))
def test_p_zero_is_the_identity(text: str, seed: int) -> None:
    assert replace(text, parse_spec("synonym:p=0"), random.Random(seed)) == text


def test_out_of_range() -> None:
    with pytest.raises(SpecError, match=r"--attack synonym:p=1.5: p=1.5 out of range"):
        parse_attack("synonym:p=1.5")


def test_build_script_reproduces_the_committed_table(tmp_path: Path) -> None:
    pytest.importorskip("pyinflect")
    if not Path("/usr/share/wordnet/index.sense").is_file():
        pytest.skip("WordNet 3.0 database not installed (apt-get install wordnet-base wordnet-sense-index)")
    import runpy

    script = runpy.run_path(str(REPO / "scripts" / "build_synonym_table.py"))
    out = tmp_path / "table.json.gz"
    assert script["main"](["--out", str(out)]) == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() == TABLE_SHA256
