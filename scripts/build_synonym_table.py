#!/usr/bin/env python3
"""Build ``evalrun/attacks/data/wordnet_synonyms.json.gz``, the synonym table of the
``synonym`` attack, from the WordNet 3.0 database files.

Run at development time only; the attack reads the committed table and never downloads.

Inputs
------
* WordNet 3.0 (Princeton University; licence in ``evalrun/attacks/data/LICENSE-WordNet``),
  as Debian ships it: ``apt-get install wordnet-base wordnet-sense-index`` puts ``index.*``,
  ``data.*`` and ``index.sense`` in ``/usr/share/wordnet`` (``--wordnet`` to use another
  directory). The files are parsed directly (format: ``wndb(5WN)``, ``senseidx(5WN)``).
* ``pyinflect`` 0.5.1 (MIT; its inflection data is the AGID list by Kevin Atkinson) for the
  inflected forms: ``pip install pyinflect==0.5.1``. It is a build-time tool only: the forms
  are stored in the table, so the attack has no run-time dependency on it.

What the table holds (``format`` ``evalrun-synonyms/1``)
-------------------------------------------------------
``readings``: ``{lemma: {pos: [count, [synonym, ...]]}}`` for one-word lower-case alphabetic
lemmas, ``pos`` one of ``n v a r`` (adjective satellites are ``a``).

* ``count`` is the SemCor tag count of the lemma in that part of speech (the sum of
  ``tag_cnt`` over its senses in ``index.sense``); the attack uses it to pick the most
  frequent reading of an untagged word.
* the synonyms follow MarkMyWords' ``SynonymAttack.wordNetSynonyms``
  (``src/watermark_benchmark/attacks/synonym_attack.py``): the *first* lemma of each synset
  the lemma belongs to, in WordNet's sense order, keeping one-word lemmas only. Unlike
  MarkMyWords, the lemma itself and capitalised (proper-noun) lemmas are dropped, and the list
  is ordered and duplicate-free instead of a Python ``set`` (whose order varies per process).
* a reading is kept when it has synonyms or a non-zero count (so that it can win the
  choice of part of speech).

``forms``: ``{pos: {lemma: [[form, ...] per tag]}}`` with tags ``NNS`` (n) and ``VBZ VBD VBN
VBG`` (v), for every noun or verb lemma that is a key or a synonym; pyinflect's regular rules
fill in words AGID lacks, and an empty list means "no such form". Comparatives and
superlatives are left out on purpose: AGID's simplified list pyinflect ships gives forms such
as ``beautifuler`` and ``anhydrousser``, so the attack leaves ``-er``/``-est`` forms alone.

Usage: ``python scripts/build_synonym_table.py [--wordnet DIR] [--out FILE]``; prints counts
and the SHA-256 of the output. The output is byte-for-byte reproducible (gzip mtime 0).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "evalrun" / "attacks" / "data" / "wordnet_synonyms.json.gz"
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
#: ss_type digit of a sense key -> our part of speech (5 = adjective satellite)
SS_TYPE = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}
TAGS = {"n": ("NNS",), "v": ("VBZ", "VBD", "VBN", "VBG")}
KEY_WORD = re.compile(r"[a-z]+")
SYNONYM_WORD = re.compile(r"[a-z]+(?:-[a-z]+)*")
ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")


def read_counts(wordnet: Path) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    with open(wordnet / "index.sense", encoding="utf-8") as f:
        for line in f:
            key, _offset, _sense_number, tag_cnt = line.split()
            lemma, _, rest = key.partition("%")
            counts[(lemma, SS_TYPE[rest[0]])] += int(tag_cnt)
    return counts


def read_index(wordnet: Path, pos: str) -> dict[str, list[str]]:
    """lemma -> synset offsets in sense order (``index.<pos>``)."""
    out: dict[str, list[str]] = {}
    with open(wordnet / f"index.{POS_FILES[pos]}", encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):
                continue  # licence header
            fields = line.split()
            lemma, synset_cnt, p_cnt = fields[0], int(fields[2]), int(fields[3])
            offsets = fields[4 + p_cnt + 2:]
            assert len(offsets) == synset_cnt, line
            out[lemma] = offsets
    return out


def read_first_lemmas(wordnet: Path, pos: str) -> dict[str, str]:
    """synset offset -> its first lemma, as written (case kept, adjective markers removed)."""
    out: dict[str, str] = {}
    with open(wordnet / f"data.{POS_FILES[pos]}", encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):
                continue
            fields = line.split(" ", 5)
            out[fields[0]] = ADJ_MARKER.sub("", fields[4])
    return out


def forms_of(lemma: str, pos: str) -> list[list[str]]:
    from pyinflect import getInflection

    out = []
    for tag in TAGS[pos]:
        found = getInflection(lemma, tag, inflect_oov=True) or ()
        out.append(sorted(set(found), key=list(found).index))
    return out


def build(wordnet: Path) -> dict:
    counts = read_counts(wordnet)
    readings: dict[str, dict[str, list]] = defaultdict(dict)
    for pos in "nvar":
        index = read_index(wordnet, pos)
        first = read_first_lemmas(wordnet, pos)
        for lemma, offsets in index.items():
            if not KEY_WORD.fullmatch(lemma):
                continue
            synonyms: list[str] = []
            for offset in offsets:
                word = first[offset]
                if SYNONYM_WORD.fullmatch(word) and word != lemma and word not in synonyms:
                    synonyms.append(word)
            count = counts.get((lemma, pos), 0)
            if synonyms or count:
                readings[lemma][pos] = [count, synonyms]
    needed: dict[str, set[str]] = defaultdict(set)
    for lemma, by_pos in readings.items():
        for pos, (_count, synonyms) in by_pos.items():
            needed[pos].add(lemma)
            needed[pos].update(synonyms)
    forms = {pos: {lemma: forms_of(lemma, pos) for lemma in sorted(needed[pos])} for pos in TAGS}
    return {
        "format": "evalrun-synonyms/1",
        "source": "WordNet 3.0 (Princeton University, Debian wordnet-base/wordnet-sense-index); "
                  "inflections from pyinflect 0.5.1 (AGID). Built by scripts/build_synonym_table.py.",
        "tags": {pos: list(tags) for pos, tags in TAGS.items()},
        "readings": {lemma: readings[lemma] for lemma in sorted(readings)},
        "forms": forms,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not (args.wordnet / "index.sense").is_file():
        print(f"{args.wordnet}: no WordNet 3.0 database with index.sense "
              "(apt-get install wordnet-base wordnet-sense-index)", file=sys.stderr)
        return 2
    try:
        import pyinflect  # noqa: F401
    except ImportError:
        print("pyinflect is needed at build time: pip install pyinflect==0.5.1", file=sys.stderr)
        return 2
    table = build(args.wordnet)
    raw = json.dumps(table, ensure_ascii=True, sort_keys=False, separators=(",", ":")).encode()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0,
                                                  compresslevel=9) as gz:
        gz.write(raw)
    n_readings = sum(len(v) for v in table["readings"].values())
    n_with = sum(1 for v in table["readings"].values() for c, s in v.values() if s)
    print(f"{len(table['readings'])} lemmas, {n_readings} readings ({n_with} with synonyms), "
          f"{sum(len(v) for v in table['forms'].values())} inflected lemmas; "
          f"{len(raw)} bytes JSON, {args.out.stat().st_size} bytes gzip")
    print(f"sha256 {hashlib.sha256(args.out.read_bytes()).hexdigest()}  {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
