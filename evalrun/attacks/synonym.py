"""The ``synonym`` attack (MarkMyWords, Table II and section IV-A): words replaced by WordNet
synonyms, keeping their inflection and letter case.

The paper: "With probability p, we replace each word in the text by a semantically
equivalent word", with candidates from WordNet (its GPT-3.5 candidates are not used by
MarkMyWords' registered "fast" mode, which is what is reproduced here:
``SynonymAttack.generate_synonyms_fast`` / ``warp_sentence`` in
``src/watermark_benchmark/attacks/synonym_attack.py``).

``synonym:p=P`` (default 0.5; MarkMyWords registers 0.25, 0.5, 0.75 and 1). Words (as
:mod:`evalrun.attacks.words` cuts them) are scanned left to right; each *replaceable* word
draws ``u = rng.random()`` and, when ``u < P``, becomes ``rng.choice`` of its candidate list.

Which words are replaceable. MarkMyWords POS-tags the text with nltk and keeps words longer
than 3 characters tagged ``JJ* RB* VB* NN NNS`` (adjective, adverb, verb, common noun) whose
verb lemma is not *be*, *have* or *do*. nltk's tagger needs data that cannot be had offline,
so here a word is replaceable when it

* has more than 3 letters, all ASCII letters, and is lower-case, or Capitalised as the first
  word of a sentence (other capitalised or upper-case words are taken for proper nouns and
  acronyms, which the tagger would tag ``NNP``);
* is not in :data:`CLOSED_CLASS` (prepositions, determiners, modals, pronouns and the like
  that WordNet also lists under an open class, e.g. *will* the noun, *about* the adverb, and
  that the tagger would tag ``MD``, ``IN``, ``DT``, ``EX`` …);
* is known to WordNet 3.0 as a noun, verb, adjective or adverb, directly or as a noun plural
  or verb form (``-s``, ``-ed``, ``-ing`` and irregular forms from the table); comparatives and
  superlatives (``happier``) are left alone unless WordNet lists them as lemmas;
* has no verb reading whose lemma is *be*, *have* or *do* (``does``, ``being``, ``were``).

Its reading (lemma and part of speech) is the one with the highest SemCor tag count in
WordNet (ties: noun, verb, adjective, adverb, then lemma order), standing in for the tagger.

Candidates, as MarkMyWords' ``wordNetSynonyms``: the first lemma of each WordNet synset of
that lemma and part of speech, one-word lemmas only (see ``scripts/build_synonym_table.py``),
in the same inflection as the word (plural, ``-s``, past, participle, ``-ing``; the past tense
and participle are told apart by a preceding form of *have*/*be*/*get* within two words,
e.g. "has walked", "was quickly chosen") and the same case (lower or Capitalised).
MarkMyWords inflects with pyinflect at run time; here the forms come from the committed table,
which was made with pyinflect 0.5.1. Differences from MarkMyWords' code: the word itself is
never a candidate (there, the synset's first lemma is often the word itself, so a "replacement"
may change nothing, and p is not the rate of changed words), a word without candidates draws
nothing, candidates keep the case of the word (there, always lower-case), proper nouns are
found by case rather than by tag, and words are taken left to right (there, right to left
within each sentence) with a fixed candidate order (there, a Python ``set``, whose order
changes between processes).

The table (``evalrun/attacks/data/wordnet_synonyms.json.gz``, WordNet 3.0 licence) is read
once, on first use, and cached for the process.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from evalrun._util.specs import Spec, spec_float
from evalrun.attacks.base import text_attack
from evalrun.attacks.words import match_case, split_words

DATA_FILE = "wordnet_synonyms.json.gz"
TABLE_FORMAT = "evalrun-synonyms/1"
_POS_ORDER = "nvar"
_BASE = "base"
_SKIP_VERBS = frozenset({"be", "have", "do"})
#: words before a past participle ("has walked", "was taken", "got stolen")
_PARTICIPLE_AUX = frozenset({
    "have", "has", "had", "having", "be", "is", "are", "was", "were", "been", "being", "am",
    "get", "gets", "got", "gotten", "getting",
})

#: Closed-class words (and modals) WordNet also lists as nouns, verbs, adjectives or adverbs,
#: which a POS tagger would not tag as replaceable; words of 3 letters or fewer are never
#: replaced anyway.
CLOSED_CLASS = frozenset("""
    will would shall should could might must cannot ought
    some every each either neither both none another
    this that these those there what which whose whom whoever whatever when whenever where
    wherever whether while
    they them their theirs themselves your yours ours mine thee thou
    about above across after against along among amongst around before behind below beneath
    beside besides between beyond down during except inside into like near onto outside over
    past round since than through throughout till toward towards under underneath unlike until
    upon versus within without despite plus
    although though because unless
""".split())


@dataclass(frozen=True)
class SynonymTable:
    """The committed WordNet table, loaded (see ``scripts/build_synonym_table.py``)."""

    #: lemma -> pos -> [SemCor count, [synonym lemma, …]]
    readings: dict[str, dict[str, list]]
    #: pos -> inflection tags, in the order of the ``forms`` lists
    tags: dict[str, list[str]]
    #: pos -> lemma -> one list of forms per tag
    forms: dict[str, dict[str, list[list[str]]]]
    #: inflected form -> [(lemma, pos, tag), …] for lemmas that have a reading in that pos
    inflected: dict[str, list[tuple[str, str, str]]]

    def form(self, lemma: str, pos: str, tag: str) -> str | None:
        """``lemma`` in inflection ``tag`` (``_BASE``: itself); None when there is none."""
        if tag == _BASE:
            return lemma
        forms = self.forms.get(pos, {}).get(lemma)
        if not forms:
            return None
        found = forms[self.tags[pos].index(tag)]
        return found[0] if found else None


@lru_cache(maxsize=1)
def synonym_table() -> SynonymTable:
    """Read the table once per process."""
    blob = resources.files("evalrun.attacks").joinpath("data", DATA_FILE).read_bytes()
    data = json.loads(gzip.decompress(blob))
    if data.get("format") != TABLE_FORMAT:
        raise RuntimeError(f"{DATA_FILE}: format {data.get('format')!r}, expected {TABLE_FORMAT!r}")
    readings = data["readings"]
    inflected: dict[str, list[tuple[str, str, str]]] = {}
    for pos, by_lemma in data["forms"].items():
        tags = data["tags"][pos]
        for lemma, forms in by_lemma.items():
            if pos not in readings.get(lemma, {}):
                continue
            for tag, tag_forms in zip(tags, forms):
                for form in tag_forms:
                    if form != lemma:
                        inflected.setdefault(form, []).append((lemma, pos, tag))
    return SynonymTable(readings=readings, tags=data["tags"], forms=data["forms"], inflected=inflected)


def _reading(word: str, participle_context: bool) -> tuple[str, str, str] | None:
    """(lemma, pos, tag) of a lower-case word, or None when it is not replaceable."""
    table = synonym_table()
    tags_of: dict[tuple[str, str], set[str]] = {}
    for pos in table.readings.get(word, {}):
        tags_of.setdefault((word, pos), set()).add(_BASE)
    for lemma, pos, tag in table.inflected.get(word, ()):
        tags_of.setdefault((lemma, pos), set()).add(tag)
    if not tags_of or any(pos == "v" and lemma in _SKIP_VERBS for lemma, pos in tags_of):
        return None
    lemma, pos = min(tags_of, key=lambda lp: (-table.readings[lp[0]][lp[1]][0], _POS_ORDER.index(lp[1]), lp[0]))
    tags = tags_of[(lemma, pos)]
    if participle_context and "VBN" in tags:
        return lemma, pos, "VBN"
    for tag in (_BASE, "NNS", "VBZ", "VBG", "VBD", "VBN"):
        if tag in tags:
            return lemma, pos, tag
    return None


@lru_cache(maxsize=1 << 16)
def candidates(word: str, participle_context: bool = False) -> tuple[str, ...]:
    """Replacements for the lower-case ``word`` (empty: not replaceable), in table order.

    ``participle_context``: a form of have/be/get precedes, so an ``-ed`` form is read as a
    participle.
    """
    if len(word) <= 3 or not (word.isascii() and word.isalpha()) or word in CLOSED_CLASS:
        return ()
    reading = _reading(word, participle_context)
    if reading is None:
        return ()
    lemma, pos, tag = reading
    table = synonym_table()
    out: list[str] = []
    for synonym in table.readings[lemma][pos][1]:
        form = table.form(synonym, pos, tag)
        if form and form != word and form not in out:
            out.append(form)
    return tuple(out)


def _case_ok(word: str, sentence_start: bool) -> bool:
    if word.islower():
        return True
    return sentence_start and word[0].isupper() and (len(word) == 1 or word[1:].islower())


@text_attack("synonym", keys=("p",))
def synonym(text: str, spec: Spec, rng: random.Random) -> str:
    """Replace each replaceable word with a WordNet synonym with probability p."""
    p = spec_float(spec, "p", 0.5, what="--attack", lo=0.0, hi=1.0)
    split = split_words(text)
    words = list(split.words)
    for i, word in enumerate(split.words):
        if len(word) <= 3 or not _case_ok(word, split.starts_sentence(i)):
            continue
        lower = word.lower()
        aux = any(split.words[j].lower() in _PARTICIPLE_AUX for j in range(max(0, i - 2), i)
                  if split.sentences[j] == split.sentences[i])
        options = candidates(lower, aux)
        if not options:
            continue
        if rng.random() < p:
            words[i] = match_case(word, rng.choice(options))
    return "".join(g + w for g, w in zip(split.gaps, words)) + split.gaps[-1]
