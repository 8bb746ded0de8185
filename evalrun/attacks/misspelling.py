"""The ``misspelling`` attack (MarkMyWords, Table II "Misspelling & Typo"; HELM's misspelling
perturbation, as MarkMyWords runs it): words replaced by a common misspelling of them.

The list is HELM's ``correct_to_misspelling.json`` (``helm/benchmark/augmentations/`` in
``crfm-helm`` 0.5.16, Apache-2.0; byte-identical to MarkMyWords'
``run/static_data/misspellings.json``), committed unchanged as
``evalrun/attacks/data/correct_to_misspelling.json``. HELM derived it from Wikipedia's
"Lists of common misspellings/For machines" (CC BY-SA). It maps 6,523 correct spellings (lower-
and Capitalised variants listed separately, a few of two words such as ``a lot``) to 9,053
misspellings. See ``evalrun/attacks/data/README.md``.

``misspelling:p=P`` (default 0.1; MarkMyWords registers 0.25 and 0.5). Words (as
:mod:`evalrun.attacks.words` cuts them) are scanned left to right. A word, or a word, one
space and the next word, that is a key of the list (case-sensitive, as in HELM) is a match;
where both are, the key listed first in the file wins, which is what HELM's regular
expression (the keys joined by ``|`` in file order) does. Each match draws ``rng.random()``;
below P it becomes ``rng.choice`` of its misspellings (in file order) in the case of the
matched text (:func:`~evalrun.attacks.words.match_case`). Scanning resumes after the match
whether or not it was replaced, as ``re.sub`` does.

Differences from HELM's regex: words joined by a hyphen or apostrophe are one word here
(HELM's ``\\b`` also matches ``the`` inside ``state-of-the-art``), and the few keys with a
trailing apostrophe (``countries'``) never match.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from importlib import resources

from evalrun._util.specs import Spec, spec_float
from evalrun.attacks.base import text_attack
from evalrun.attacks.words import join_words, match_case, split_words

DATA_FILE = "correct_to_misspelling.json"


@lru_cache(maxsize=1)
def misspellings() -> dict[str, tuple[int, tuple[str, ...]]]:
    """Correct spelling -> (its position in the file, its misspellings); loaded once."""
    raw = resources.files("evalrun.attacks").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    table = json.loads(raw)
    return {key: (rank, tuple(values)) for rank, (key, values) in enumerate(table.items())}


@text_attack("misspelling", keys=("p",), characters=True)
def misspelling(text: str, spec: Spec, rng: random.Random) -> str:
    """Replace each word that has a common misspelling (Wikipedia's list, via HELM) by one with probability p."""
    p = spec_float(spec, "p", 0.1, what="--attack", lo=0.0, hi=1.0)
    split = split_words(text)
    if not split.words:
        return text
    table = misspellings()
    words, gaps = split.words, split.gaps
    out_words: list[str] = []
    out_gaps = [gaps[0]]
    i, n = 0, len(words)
    while i < n:
        one = table.get(words[i])
        two = table.get(f"{words[i]} {words[i + 1]}") if i + 1 < n and gaps[i + 1] == " " else None
        if two is not None and (one is None or two[0] < one[0]):
            source, width, entry = f"{words[i]} {words[i + 1]}", 2, two
        elif one is not None:
            source, width, entry = words[i], 1, one
        else:
            out_words.append(words[i])
            out_gaps.append(gaps[i + 1])
            i += 1
            continue
        if rng.random() < p:
            out_words.append(match_case(source, rng.choice(entry[1])))
        else:
            out_words.append(source)
        out_gaps.append(gaps[i + width])
        i += width
    return join_words(out_words, out_gaps)
