"""The ``contraction`` and ``expansion`` attacks (MarkMyWords, Table II "Contraction &
Expansion"; HELM's contraction/expansion perturbations, which MarkMyWords copies in
``src/watermark_benchmark/attacks/helm_attacks.py``): ``do not`` <-> ``don't``.

Both are deterministic (no randomness: every occurrence changes). MarkMyWords registers only
``contraction`` (``init_helm_attacks`` lists Misspelling, Typo, Contraction and Lowercase);
``expansion`` is offered for completeness.

The table (:data:`CONTRACTIONS`) is our own list of standard English verb contractions, each
with one expansion: ``'s`` reads as *is* and ``'d`` as *would*, as in HELM's map (``he's
been`` expands to ``he is been``). HELM's map also has ``ain't``, ``ma'am``, ``how'd'y`` and
three-word forms (``you'd've``); they are left out, as is ``let's`` (``let us`` often is not
one: "they let us in").

* ``expansion``: each word (:mod:`evalrun.attacks.words`; straight or curly apostrophe) that
  is a contraction in the table, in any letter case, becomes its expansion in the word's case
  (:func:`~evalrun.attacks.words.match_case`: ``Don't`` -> ``Do not``, ``DON'T`` -> ``DO NOT``).
* ``contraction``: scanning left to right, two words joined by one space (or the one word
  ``cannot``) that spell an expansion in the table, in any letter case, become the
  contraction with a straight apostrophe, in their case (``I am`` -> ``I'm``, ``It is`` ->
  ``It's``) -- but only when a space follows, as in HELM ("only contract things followed by a
  space to avoid contract end of sentence"): ``Yes, it is.`` stays.
"""

from __future__ import annotations

import random

from evalrun._util.specs import Spec
from evalrun.attacks.base import text_attack
from evalrun.attacks.words import join_words, match_case, split_words

#: contraction -> expansion (lower case, straight apostrophe)
CONTRACTIONS: dict[str, str] = {
    "aren't": "are not", "can't": "cannot", "couldn't": "could not", "could've": "could have",
    "didn't": "did not", "doesn't": "does not", "don't": "do not", "hadn't": "had not",
    "hasn't": "has not", "haven't": "have not", "he'd": "he would", "he'll": "he will",
    "he's": "he is", "here's": "here is", "how'd": "how did", "how'll": "how will",
    "how's": "how is", "i'd": "i would", "i'll": "i will", "i'm": "i am", "i've": "i have",
    "isn't": "is not", "it'd": "it would", "it'll": "it will", "it's": "it is",
    "might've": "might have", "mightn't": "might not", "must've": "must have",
    "mustn't": "must not", "needn't": "need not", "oughtn't": "ought not", "shan't": "shall not",
    "she'd": "she would", "she'll": "she will", "she's": "she is", "should've": "should have",
    "shouldn't": "should not", "that'd": "that would", "that'll": "that will",
    "that's": "that is", "there'd": "there would", "there'll": "there will",
    "there's": "there is", "they'd": "they would", "they'll": "they will",
    "they're": "they are", "they've": "they have", "wasn't": "was not", "we'd": "we would",
    "we'll": "we will", "we're": "we are", "we've": "we have", "weren't": "were not",
    "what'll": "what will", "what're": "what are", "what's": "what is", "what've": "what have",
    "when's": "when is", "where'd": "where did", "where's": "where is", "who'd": "who would",
    "who'll": "who will", "who're": "who are", "who's": "who is", "who've": "who have",
    "why's": "why is", "won't": "will not", "would've": "would have", "wouldn't": "would not",
    "you'd": "you would", "you'll": "you will", "you're": "you are", "you've": "you have",
}
#: expansion -> contraction
EXPANSIONS: dict[str, str] = {expanded: short for short, expanded in CONTRACTIONS.items()}
assert len(EXPANSIONS) == len(CONTRACTIONS), "each expansion must come from one contraction"


@text_attack("expansion", random=False)
def expansion(text: str, spec: Spec, rng: random.Random) -> str:
    """Expand verb contractions (don't -> do not, they're -> they are)."""
    split = split_words(text)
    words = [
        match_case(word, CONTRACTIONS[key]) if (key := word.lower().replace("\u2019", "'")) in CONTRACTIONS
        else word
        for word in split.words
    ]
    return join_words(words, split.gaps)


@text_attack("contraction", random=False)
def contraction(text: str, spec: Spec, rng: random.Random) -> str:
    """Contract verbs (do not -> don't, they are -> they're) where a space follows."""
    split = split_words(text)
    words, gaps = split.words, split.gaps
    out_words: list[str] = []
    out_gaps = [gaps[0]]
    i, n = 0, len(words)
    while i < n:
        if i + 1 < n and gaps[i + 1] == " " and gaps[i + 2][:1] == " ":
            phrase = f"{words[i]} {words[i + 1]}"
            short = EXPANSIONS.get(phrase.lower())
            if short is not None:
                out_words.append(match_case(phrase, short))
                out_gaps.append(gaps[i + 2])
                i += 2
                continue
        if words[i].lower() == "cannot" and gaps[i + 1][:1] == " ":
            out_words.append(match_case(words[i], "can't"))
        else:
            out_words.append(words[i])
        out_gaps.append(gaps[i + 1])
        i += 1
    return join_words(out_words, out_gaps)
