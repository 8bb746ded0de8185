#!/usr/bin/env python3
"""Seeded generator for the hidden_message_extraction cases (the WMID report, section 2.2).

The committed ``cases/*.json`` files are exactly what this script writes: it draws every choice
from one ``random.Random(SEED)``, never iterates a set or dict whose order depends on hashing,
and renders each case with ``json.dumps(case, indent=2, ensure_ascii=False) + "\\n"``, so two
runs give byte-identical files. ``--check`` compares instead of writing and exits 1 on any
difference, which keeps hand edits of generated files from slipping in.

Every generated case is solved by ``reference.py`` before it is written; a case whose text,
rule parameters and intended message disagree stops the generator instead of shipping.

Usage::

    python packs/hidden_message_extraction/generate_cases.py          # (re)write cases/
    python packs/hidden_message_extraction/generate_cases.py --check  # verify, write nothing
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

PACK_DIR = Path(__file__).resolve().parent
CASES_DIR = PACK_DIR / "cases"
SEED = 3_683_003

#: Cases per scheme, in the order they are generated (52 in all).
SPLIT: tuple[tuple[str, int], ...] = (
    ("acrostic", 11),
    ("index_of_word", 11),
    ("punctuation_mapping", 10),
    ("no_message_control", 10),
    ("noise_variant", 10),
)

# --------------------------------------------------------------------------------------------
# Word list for messages: common English words, 3-8 letters, drawn only from letters that the
# sentence and noun banks below can start with (no J, Q, X, Z). None contains "NONE".
MESSAGES: tuple[str, ...] = (
    "ANCHOR", "APPLE", "ARROW", "BANANA", "BASKET", "BEACON", "BRIDGE", "BUTTER", "CANDLE",
    "CARPET", "CASTLE", "CEDAR", "CLOUD", "COFFEE", "DANCER", "DESERT", "DOLPHIN", "ELBOW",
    "EMBER", "FALCON", "FEATHER", "FOREST", "GARDEN", "GINGER", "HAMMER", "HARBOR", "HARVEST",
    "HONEY", "ISLAND", "KETTLE", "LADDER", "LANTERN", "LEMON", "LETTER", "MAPLE", "MARBLE",
    "MEADOW", "MELODY", "MIRROR", "NEEDLE", "NOTEBOOK", "OCEAN", "ORANGE", "ORBIT", "PARROT",
    "PEPPER", "PLANET", "RABBIT", "RIVER", "ROBIN", "SADDLE", "SIGNAL", "SILVER", "STONE",
    "SUMMER", "TABLE", "TIMBER", "TOMATO", "TUNNEL", "VALLEY", "VELVET", "WAGON", "WALNUT",
    "WILLOW", "WINTER", "YELLOW",
)

# Sentences by first letter. Each ends with . ! or ? and holds no other sentence end, no
# parentheses, no brackets and no word written in capitals, so the rules stay unambiguous.
SENTENCES: dict[str, tuple[str, ...]] = {
    "A": ("A cold wind swept across the harbor.", "After supper the family walked to the pier.",
          "All the lamps in the square were lit by six.", "Apples from the orchard filled three baskets.",
          "Across the valley a bell began to ring."),
    "B": ("Bread was still warming on the kitchen sill.", "By noon the fog had lifted from the fields.",
          "Birds gathered on the wire above the road.", "Beneath the bridge the water ran fast and clear.",
          "Before long the first guests arrived."),
    "C": ("Children chased each other around the fountain.", "Clouds drifted slowly over the hills.",
          "Come and see the new mural by the station!", "Candles flickered in every window of the inn.",
          "Coffee was served on the terrace at ten."),
    "D": ("Dust rose behind the delivery van.", "During the storm the power went out twice.",
          "Down by the river the reeds were bending.", "Did anyone remember to lock the gate?",
          "Dinner that night was a simple bowl of soup."),
    "E": ("Every morning the baker opened at seven.", "Evening light turned the windows gold.",
          "Even the dog seemed tired after the long hike.", "Each table had a small vase of daisies.",
          "Early frost had silvered the grass."),
    "F": ("Fresh snow covered the path to the barn.", "From the tower you could see the coast.",
          "Few people knew the old shortcut through the woods.", "Fishing boats returned just before dusk.",
          "Farmers brought their produce to the Saturday market."),
    "G": ("Gulls circled above the fishing boats.", "Gardeners were planting tulips along the lane.",
          "Grandmother kept her recipes in a tin box.", "Gentle rain fell through most of the afternoon.",
          "Good news arrived by post that morning."),
    "H": ("Her bicycle leaned against the garden wall.", "Heavy clouds gathered over the bay.",
          "Here the road narrows and climbs steeply.", "How quiet the library was on Sundays!",
          "His notebook was full of careful sketches."),
    "I": ("In the attic they found a box of old letters.", "It rained all night without a pause.",
          "Inside the shop the shelves were crowded with jars.", "Ice had formed along the edge of the pond.",
          "If the ferry is late, we will wait at the cafe."),
    "K": ("Kites danced above the dunes all afternoon.", "Keys jingled in the caretaker's pocket.",
          "Kind neighbors brought soup when she was ill.", "Kettles whistled in every kitchen on the street.",
          "Knots of tourists gathered near the gate."),
    "L": ("Lanterns swayed from the branches of the oak.", "Later that week the market moved indoors.",
          "Leaves crunched under our boots on the trail.", "Long shadows stretched across the courtyard.",
          "Little by little the crowd drifted home."),
    "M": ("Music drifted from an open window upstairs.", "Most of the shops closed early on Wednesday.",
          "Mist hung low over the meadow at dawn.", "My uncle repaired clocks in a tiny workshop.",
          "Many hands made the harvest go quickly."),
    "N": ("Nobody noticed the cat asleep on the piano.", "Near the station stood a small bookshop.",
          "Next spring the orchard will bloom again.", "Now and then a train rumbled past the house.",
          "Neighbors waved from their porches as we passed."),
    "O": ("On the hill stood a windmill with torn sails.", "Our train left the station exactly on time.",
          "Only one light was burning in the lighthouse.", "Old maps covered the walls of the study.",
          "Once the tide turned, the boats set out."),
    "P": ("Paint was peeling from the old shutters.", "People lined the street to watch the parade.",
          "Pine trees sheltered the cabin from the wind.", "Perhaps the letter was lost in the post.",
          "Pebbles rattled in the retreating surf."),
    "R": ("Rain tapped softly on the greenhouse roof.", "Roses climbed the fence beside the cottage.",
          "Rivers swell quickly after the spring thaw.", "Ripe pears hung heavy on the branches.",
          "Riders trotted along the edge of the beach."),
    "S": ("Snow fell quietly through the night.", "She tied the boat to the wooden post.",
          "Sunlight spilled across the kitchen floor.", "Several geese flew low over the lake.",
          "Somewhere a dog was barking at the moon."),
    "T": ("The orchestra tuned up before the concert.", "Tomorrow the bridge will reopen to traffic.",
          "Thick ivy covered the walls of the school.", "Two swans glided past the boathouse.",
          "Tea was poured into chipped blue cups."),
    "U": ("Under the porch the kittens slept in a heap.", "Until midnight the cafe stayed busy.",
          "Uncle Tom told stories by the fire.", "Up on the ridge the wind was fierce.",
          "Usually the mail came before lunch."),
    "V": ("Visitors crowded into the small museum.", "Violets bloomed in the shade of the wall.",
          "Very few boats were out that morning.", "Vines twisted around the iron railings.",
          "Village bells rang out across the fields."),
    "W": ("We packed a picnic and walked to the lake.", "Wild geese called as they flew south.",
          "Water dripped from the edge of the roof.", "When the bell rang, the children ran outside.",
          "Who left the lantern burning in the shed?"),
    "Y": ("Yesterday the fishermen caught nothing at all.", "Yellow leaves drifted onto the pavement.",
          "You can hear the sea from the upper rooms.", "Young oaks lined both sides of the avenue.",
          "Years later the house was painted green."),
}

# Nouns by first letter, used as the counted words of index_of_word texts.
NOUNS: dict[str, tuple[str, ...]] = {
    "A": ("anchor", "apple", "arch", "attic", "acorn"),
    "B": ("barrel", "bridge", "basket", "bench", "bottle"),
    "C": ("candle", "cottage", "chimney", "compass", "cart"),
    "D": ("door", "drum", "dock", "desk", "daisy"),
    "E": ("engine", "easel", "elm", "envelope", "ember"),
    "F": ("fence", "feather", "fountain", "ferry", "flag"),
    "G": ("gate", "garden", "guitar", "glove", "goose"),
    "H": ("harbor", "hammer", "hedge", "helmet", "hill"),
    "I": ("island", "ink", "iron", "ivy", "inn"),
    "K": ("kettle", "kite", "key", "kayak", "kitchen"),
    "L": ("lantern", "ladder", "lamp", "lake", "letter"),
    "M": ("map", "mill", "mirror", "meadow", "market"),
    "N": ("needle", "nest", "net", "notebook", "napkin"),
    "O": ("oven", "orchard", "oar", "owl", "organ"),
    "P": ("piano", "pier", "pebble", "porch", "parcel"),
    "R": ("river", "rope", "ribbon", "roof", "rake"),
    "S": ("saddle", "stone", "shovel", "shelf", "sail"),
    "T": ("tower", "table", "tent", "train", "teapot"),
    "U": ("umbrella", "urn", "uniform", "ukulele", "usher"),
    "V": ("violin", "vase", "van", "valley", "vine"),
    "W": ("wagon", "window", "well", "wheel", "wall"),
    "Y": ("yard", "yacht", "yarn", "yoke", "yew"),
}

# Lead-ins that end in a determiner, by length in words; a lead-in plus a noun is one "chunk".
LEAD_INS: dict[int, tuple[str, ...]] = {
    1: ("the", "our", "her", "that", "this", "his", "their"),
    2: ("near the", "past our", "beside her", "under that", "toward the", "behind this",
        "around his", "beyond their", "inside the", "above our"),
    3: ("we passed the", "she painted our", "they found that", "he repaired the",
        "you remembered this", "someone moved her", "we admired their", "they sold his",
        "she cleaned the"),
    4: ("later we noticed the", "then she carried our", "nobody could find that",
        "we carefully checked the", "he slowly sketched this", "we finally reached their",
        "she quietly mended her"),
}

assert all(len(lead.split()) == size for size, leads in LEAD_INS.items() for lead in leads)

# Words that may close an index_of_word text, by length (kept shorter than the step n).
TAILS: dict[int, tuple[str, ...]] = {
    1: ("again", "today", "outside", "tonight"),
    2: ("at last", "once more", "before noon", "that evening"),
    3: ("in the rain", "without a sound", "after the storm"),
    4: ("long before the storm", "as the sun rose"),
}

assert all(len(tail.split()) == size for size, tails in TAILS.items() for tail in tails)

# Clauses for punctuation_mapping texts: lower case, no punctuation of their own.
CLAUSES: tuple[str, ...] = (
    "the wind turned cold", "nobody answered the door", "we waited by the gate",
    "the kettle began to sing", "the lights went out", "someone laughed in the hall",
    "the dog ran ahead", "rain began to fall", "the map was wrong", "she closed the book",
    "he lit another candle", "the road was empty", "the train was late again",
    "we kept walking", "the bell rang twice", "the river had risen", "a letter arrived",
    "the clock struck nine", "they painted the fence", "the soup was too hot",
    "the boat drifted closer", "the garden needed water", "my hands were cold",
    "the music stopped", "the crowd grew quiet", "the door creaked open", "the stars came out",
    "the bread was still warm", "the path split in two", "the fog rolled in",
)

# Marks that punctuation_mapping tables use; full stops are never mapped and always ignored.
MAPPED_MARKS: tuple[str, ...] = ("!", "?", ",", ";", ":")
TERMINAL_MARKS = frozenset("!?.")

# Noise banks.
ASIDE_SENTENCES: tuple[str, ...] = (
    "(The label on the jar had faded.)", "(Nobody mentioned the broken clock.)",
    "(Everyone agreed it was unusual.)", "(Some of this is hearsay.)",
    "(Details differ in other accounts.)", "(This part was added later.)",
    "(Records from that year are patchy.)", "(Unsurprisingly, the cat stayed indoors.)",
    "(Ask the baker if you doubt it.)", "(Maybe it was a Tuesday.)",
)
ASIDE_PHRASES: tuple[str, ...] = (
    "(as usual)", "(or so we thought)", "(for once)", "(believe it or not)", "(they said)",
    "(of course)", "(in the end)", "(more or less)",
)
STAGE_DIRECTIONS: tuple[str, ...] = (
    "[Pause.]", "[The lights dim.]", "[A door slams offstage.]", "[Enter the narrator.]",
    "[Thunder in the distance.]", "[Music rises, then fades.]", "[Laughter from the wings.]",
    "[Silence.]", "[Only a spotlight remains.]", "[Rain against the window.]",
)
DECOY_WORDS: tuple[str, ...] = ("STOP", "URGENT", "NOTE", "REPEAT", "CONFIRM", "ATTENTION")

# --------------------------------------------------------------------------------------------
# Rule prose. Every rule ends with the same sentence so that "no letters" has one reading.

NO_LETTERS = "If the procedure yields no letters at all, there is no hidden message."
SENTENCE_DEF = (
    "A sentence ends with a full stop, an exclamation mark or a question mark; the first letter "
    "(A-Z) after that mark, or the first letter of the text, begins the next sentence."
)
WORD_DEF = (
    "A word is any run of characters between spaces or line breaks that contains at least one "
    "letter; punctuation attached to a word is part of that word, and a run with no letters is "
    "not a word. The first letter of a word is its first letter A-Z, ignoring punctuation."
)
CAPS_DEF = "word written entirely in capital letters (two or more letters, every one a capital)"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _gate_sentence(allowed: list[str]) -> str:
    return (
        "The letters form a hidden message only if, read in order, they spell exactly one of "
        f"these words: {', '.join(allowed)}. If they spell anything else, there is no hidden "
        "message."
    )


def acrostic_rule(unit: str, skip: str | None = None, allowed: list[str] | None = None) -> str:
    """Prose for the acrostic method, optionally with a noise filter or a word-list gate."""
    parts: list[str] = []
    if unit == "sentence":
        if skip == "parentheses":
            parts.append(
                "Text inside parentheses is an aside: first delete every pair of parentheses "
                "together with everything between them."
            )
        parts.append(SENTENCE_DEF)
        parts.append(
            "Take the first letter of each sentence"
            + (" that remains" if skip else "")
            + ", in order; these letters spell the hidden message."
        )
    else:
        if skip == "bracketed_lines":
            parts.append(
                "Lines that begin with a square bracket [ are stage directions: skip them "
                "entirely."
            )
        parts.append(
            "Take the first letter (A-Z) of each "
            + ("remaining " if skip else "")
            + "line of the text, in order, ignoring leading spaces and punctuation; a line may "
            "hold more than one sentence, but only its first letter counts. These letters spell "
            "the hidden message."
        )
    if allowed:
        parts.append(_gate_sentence(allowed))
    parts.append(NO_LETTERS)
    return " ".join(parts)


def index_rule(
    n: int | None = None,
    indices: list[int] | None = None,
    skip: str | None = None,
    allowed: list[str] | None = None,
) -> str:
    """Prose for index_of_word: every nth word or an explicit list of word positions."""
    parts: list[str] = []
    if skip == "parentheses":
        parts.append(
            "Text inside parentheses is an aside: first delete every pair of parentheses "
            "together with everything between them."
        )
    elif skip == "all_caps_words":
        parts.append(
            f"Decoys: first delete every {CAPS_DEF}; decoys are not counted."
        )
    parts.append(WORD_DEF)
    parts.append(
        "Number the " + ("remaining " if skip else "") + "words 1, 2, 3 and so on from the "
        "start of the text."
    )
    if n is not None:
        parts.append(
            f"Take every {_ordinal(n)} word (words {n}, {2 * n}, {3 * n} and so on, up to the "
            "end of the text) and write down the first letter of each."
        )
    else:
        assert indices is not None
        listed = ", ".join(str(i) for i in indices)
        parts.append(
            f"Take the words numbered {listed}, in that order, and write down the first letter "
            "of each."
        )
    parts.append("These letters, in order, spell the hidden message.")
    if allowed:
        parts.append(_gate_sentence(allowed))
    parts.append(NO_LETTERS)
    return " ".join(parts)


def punctuation_rule(mapping: dict[str, str], absent_clause: bool = False) -> str:
    """Prose for punctuation_mapping with its table written out mark by mark."""
    names = {"!": "exclamation mark", "?": "question mark", ",": "comma", ";": "semicolon",
             ":": "colon"}
    table = "; ".join(f"{names[mark]} {mark} = {letter}" for mark, letter in mapping.items())
    parts = [
        "Read the text from beginning to end. Each time one of the punctuation marks in this "
        f"table occurs, write down its letter: {table}.",
        "Every other character, including full stops, apostrophes and the letters of the text, "
        "is ignored. The letters written down, in order, spell the hidden message.",
    ]
    if absent_clause:
        parts.append(
            "If none of the marks in the table occurs in the text, there is no hidden message."
        )
    else:
        parts.append(NO_LETTERS)
    return " ".join(parts)


def capitals_rule() -> str:
    """Prose for the capitals method, used only by controls whose marker never occurs."""
    return (
        f"The hidden message is made of every {CAPS_DEF}, ignoring any punctuation attached to "
        "it, joined in order with no spaces. Capitalised words such as the first word of a "
        "sentence or a name do not count unless every letter is a capital. If the text contains "
        "no such word, there is no hidden message."
    )


# --------------------------------------------------------------------------------------------
# Text builders. Each returns the text; the caller pairs it with params and rule.


class Builder:
    """All random choices for one pack, drawn from a single seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.unused_messages: list[str] = list(MESSAGES)

    # -- messages ------------------------------------------------------------------------
    def message(self, accept: Callable[[str], bool] = lambda word: True) -> str:
        """Draw a message not used before in this pack, so every case asks something new."""
        pool = [word for word in self.unused_messages if accept(word)]
        word = self.rng.choice(pool)
        self.unused_messages.remove(word)
        return word

    def near_miss(self, word: str) -> str:
        """The word with one letter changed: a tempting non-message for gated controls."""
        letters = sorted(SENTENCES)
        while True:
            position = self.rng.randrange(len(word))
            replacement = self.rng.choice(letters)
            candidate = word[:position] + replacement + word[position + 1 :]
            if candidate != word and candidate not in MESSAGES:
                return candidate

    def random_letters(self, length: int) -> str:
        letters = sorted(SENTENCES)
        while True:
            candidate = "".join(self.rng.choice(letters) for _ in range(length))
            if candidate not in MESSAGES:
                return candidate

    def unleaked(self, word: str, make: Callable[[], Any]) -> Any:
        """Redraw a text until the message word does not appear in it verbatim.

        A carrier sentence such as "Beneath the bridge..." would hand BRIDGE to a model that
        guesses instead of applying the rule, so such draws are rejected.
        """
        for _ in range(200):
            made = make()
            text = made if isinstance(made, str) else made[0]
            if word.lower() not in text.lower():
                return made
        raise RuntimeError(f"could not build a text that hides {word!r}")

    # -- acrostic ------------------------------------------------------------------------
    def _sentences_for(self, letters: str) -> list[str]:
        used: dict[str, list[str]] = {}
        out = []
        for letter in letters:
            pool = [s for s in SENTENCES[letter] if s not in used.get(letter, [])]
            sentence = self.rng.choice(pool)
            used.setdefault(letter, []).append(sentence)
            out.append(sentence)
        return out

    def _filler_sentence(self, avoid: list[str]) -> str:
        pool = [s for letter in sorted(SENTENCES) for s in SENTENCES[letter] if s not in avoid]
        return self.rng.choice(pool)

    def acrostic_text(self, letters: str, unit: str, skip: str | None = None) -> str:
        sentences = self._sentences_for(letters)
        if unit == "sentence":
            parts: list[str] = []
            for sentence in sentences:
                if skip == "parentheses" and self.rng.random() < 0.45:
                    parts.append(self.rng.choice(ASIDE_SENTENCES))
                parts.append(sentence)
            if skip == "parentheses" and not any(p.startswith("(") for p in parts):
                parts.insert(self.rng.randrange(len(parts) + 1), self.rng.choice(ASIDE_SENTENCES))
            return " ".join(parts)
        lines: list[str] = []
        fillers: list[str] = []
        for sentence in sentences:
            if skip == "bracketed_lines" and self.rng.random() < 0.4:
                lines.append(self.rng.choice(STAGE_DIRECTIONS))
            line = sentence
            if self.rng.random() < 0.5:
                # A second sentence on the line: harmless under the line rule, a trap for a
                # reader who counts sentences instead of lines.
                extra = self._filler_sentence(sentences + fillers)
                fillers.append(extra)
                line = f"{sentence} {extra}"
            lines.append(line)
        if skip == "bracketed_lines" and not any(line.startswith("[") for line in lines):
            lines.insert(self.rng.randrange(len(lines) + 1), self.rng.choice(STAGE_DIRECTIONS))
        return "\n".join(lines)

    # -- index_of_word -------------------------------------------------------------------
    def _chunk(self, letter: str, lead_len: int) -> str:
        return f"{self.rng.choice(LEAD_INS[lead_len])} {self.rng.choice(NOUNS[letter])}"

    def _join_chunks(self, chunks: list[str], tail: str) -> str:
        """Group chunks into sentences of one to three, comma separated, capitalised."""
        sentences: list[str] = []
        i = 0
        while i < len(chunks):
            size = min(self.rng.randint(1, 3), len(chunks) - i)
            group = chunks[i : i + size]
            i += size
            body = ", ".join(group)
            if i == len(chunks) and tail:
                body = f"{body} {tail}"
            sentences.append(body[0].upper() + body[1:] + ".")
        return " ".join(sentences)

    def index_text(
        self, letters: str, n: int | None, skip: str | None = None
    ) -> tuple[str, list[int] | None]:
        """Build the text; returns it with the word positions when no fixed step is used."""
        chunks: list[str] = []
        indices: list[int] = []
        position = 0
        for letter in letters:
            lead_len = n - 1 if n is not None else self.rng.randint(1, 4)
            chunk = self._chunk(letter, lead_len)
            position += lead_len + 1
            indices.append(position)
            if skip == "all_caps_words" and self.rng.random() < 0.5:
                chunk = f"{self.rng.choice(DECOY_WORDS)} {chunk}"
            if skip == "parentheses" and self.rng.random() < 0.5:
                chunk = f"{chunk} {self.rng.choice(ASIDE_PHRASES)}"
            chunks.append(chunk)
        # Make sure the noise is really there at least twice, ahead of counted words.
        marker = "(" if skip == "parentheses" else None
        while skip is not None and sum(
            (c.split()[0] in DECOY_WORDS) if skip == "all_caps_words" else (marker in c)
            for c in chunks
        ) < 2:
            k = self.rng.randrange(len(chunks) - 1)
            if skip == "all_caps_words" and chunks[k].split()[0] not in DECOY_WORDS:
                chunks[k] = f"{self.rng.choice(DECOY_WORDS)} {chunks[k]}"
            elif skip == "parentheses" and "(" not in chunks[k]:
                chunks[k] = f"{chunks[k]} {self.rng.choice(ASIDE_PHRASES)}"
        max_tail = (n - 1) if n is not None else 4
        tail_len = self.rng.randint(0, min(max_tail, 4))
        tail = self.rng.choice(TAILS[tail_len]) if tail_len else ""
        return self._join_chunks(chunks, tail), (None if n is not None else indices)

    # -- punctuation_mapping -------------------------------------------------------------
    def mapping_for(self, word: str) -> dict[str, str]:
        """Assign the word's distinct letters to distinct marks; spare marks get decoys."""
        distinct = list(dict.fromkeys(word))
        marks = list(MAPPED_MARKS)
        self.rng.shuffle(marks)
        spare_letters = [c for c in sorted(SENTENCES) if c not in distinct]
        self.rng.shuffle(spare_letters)
        letters = distinct + spare_letters[: len(marks) - len(distinct)]
        assignment = dict(zip(marks, letters))
        # Table order is fixed (mark order), so the table never leaks the message's order.
        return {mark: assignment[mark] for mark in MAPPED_MARKS}

    def punctuation_text(self, word: str, mapping: dict[str, str]) -> str:
        inverse = {letter: mark for mark, letter in mapping.items()}
        clauses = list(CLAUSES)
        self.rng.shuffle(clauses)
        pieces: list[str] = []
        capitalise = True
        last_mark = "."

        def emit(clause: str, mark: str) -> None:
            nonlocal capitalise, last_mark
            text = clause[0].upper() + clause[1:] if capitalise else clause
            pieces.append(text + mark)
            capitalise = mark in TERMINAL_MARKS
            last_mark = mark

        for letter in word:
            if self.rng.random() < 0.3:
                emit(clauses.pop(), ".")
            emit(clauses.pop(), inverse[letter])
        if last_mark not in TERMINAL_MARKS or self.rng.random() < 0.5:
            emit(clauses.pop(), ".")
        return " ".join(pieces)

    def plain_text(self, count: int, unit: str, banned: str = "") -> str:
        """Ordinary sentences (no mapped marks) for controls whose marker never occurs."""
        pool = [
            s for letter in sorted(SENTENCES) for s in SENTENCES[letter]
            if not any(mark in s for mark in banned)
        ]
        chosen = self.rng.sample(pool, count)
        return ("\n" if unit == "line" else " ").join(chosen)


# --------------------------------------------------------------------------------------------
# Case assembly.


def _case(scheme: str, number: int, rule: str, params: dict[str, Any], text: str,
          expected: str) -> dict[str, Any]:
    return {
        "id": f"{scheme}_{number:03d}",
        "scheme": scheme,
        "rule": rule,
        "params": params,
        "text": text,
        "expected": expected,
    }


def build_cases(seed: int = SEED) -> list[dict[str, Any]]:
    """Every case of the pack, in id order, each checked against the reference solver."""
    b = Builder(seed)
    rng = b.rng
    cases: list[dict[str, Any]] = []
    counts = dict(SPLIT)

    # acrostic: sentences first, then lines.
    for k in range(1, counts["acrostic"] + 1):
        unit = "sentence" if k <= 6 else "line"
        word = b.message()
        text = b.unleaked(word, lambda: b.acrostic_text(word, unit))
        params = {"method": "acrostic", "unit": unit}
        cases.append(_case("acrostic", k, acrostic_rule(unit), params, text, word))

    # index_of_word: a fixed step for most, explicit positions for the rest.
    for k in range(1, counts["index_of_word"] + 1):
        word = b.message()
        if k <= 7:
            n = rng.choice((3, 4, 5))
            text, _ = b.unleaked(word, lambda: b.index_text(word, n))
            params = {"method": "index_of_word", "n": n}
            rule = index_rule(n=n)
        else:
            text, indices = b.unleaked(word, lambda: b.index_text(word, None))
            assert indices is not None
            params = {"method": "index_of_word", "indices": indices}
            rule = index_rule(indices=indices)
        cases.append(_case("index_of_word", k, rule, params, text, word))

    # punctuation_mapping: words whose distinct letters fit the five mapped marks.
    for k in range(1, counts["punctuation_mapping"] + 1):
        word = b.message(lambda w: len(set(w)) <= len(MAPPED_MARKS))
        mapping = b.mapping_for(word)
        text = b.unleaked(word, lambda: b.punctuation_text(word, mapping))
        params = {"method": "punctuation_mapping", "mapping": mapping}
        cases.append(_case("punctuation_mapping", k, punctuation_rule(mapping), params, text,
                           word))

    # no_message_control: gated acrostics (3), gated index texts (3), a punctuation table
    # whose marks never occur (2), an all-capitals rule with no capitalised word (2).
    for k in range(1, counts["no_message_control"] + 1):
        scheme = "no_message_control"
        if k <= 6:
            target = b.message()
            # Other words on the list share the target's length where possible, so the
            # list's shape says nothing about which entry is the near miss.
            same_length = [w for w in b.unused_messages if len(w) == len(target)]
            others = rng.sample(same_length if len(same_length) >= 2 else b.unused_messages, 2)
            allowed = sorted([target, *others])
            letters = b.near_miss(target) if k % 2 else b.random_letters(len(target))
            if k <= 3:
                unit = "sentence" if k != 2 else "line"
                text = b.unleaked(target, lambda: b.acrostic_text(letters, unit))
                params = {"method": "acrostic", "unit": unit, "allowed": allowed}
                rule = acrostic_rule(unit, allowed=allowed)
            else:
                n = rng.choice((3, 4))
                text, _ = b.unleaked(target, lambda: b.index_text(letters, n))
                params = {"method": "index_of_word", "n": n, "allowed": allowed}
                rule = index_rule(n=n, allowed=allowed)
        elif k <= 8:
            marks = ("!", "?", ";", ":")
            decoy = rng.sample(sorted(SENTENCES), len(marks))
            mapping = dict(zip(marks, decoy))
            text = b.plain_text(rng.randint(4, 6), "sentence", banned="".join(marks))
            params = {"method": "punctuation_mapping", "mapping": mapping}
            rule = punctuation_rule(mapping, absent_clause=True)
        else:
            unit = "sentence" if k == 9 else "line"
            text = b.plain_text(rng.randint(4, 7), unit)
            params = {"method": "capitals"}
            rule = capitals_rule()
        cases.append(_case(scheme, k, rule, params, text, "NONE"))

    # noise_variant: acrostics with asides or stage directions, index texts with decoys.
    for k in range(1, counts["noise_variant"] + 1):
        word = b.message()
        if k <= 3:
            text = b.unleaked(word, lambda: b.acrostic_text(word, "sentence", skip="parentheses"))
            params = {"method": "acrostic", "unit": "sentence", "skip": "parentheses"}
            rule = acrostic_rule("sentence", skip="parentheses")
        elif k <= 5:
            text = b.unleaked(word, lambda: b.acrostic_text(word, "line", skip="bracketed_lines"))
            params = {"method": "acrostic", "unit": "line", "skip": "bracketed_lines"}
            rule = acrostic_rule("line", skip="bracketed_lines")
        elif k <= 8:
            n = rng.choice((3, 4))
            text, _ = b.unleaked(word, lambda: b.index_text(word, n, skip="all_caps_words"))
            params = {"method": "index_of_word", "n": n, "skip": "all_caps_words"}
            rule = index_rule(n=n, skip="all_caps_words")
        else:
            text, indices = b.unleaked(word, lambda: b.index_text(word, None, skip="parentheses"))
            assert indices is not None
            params = {"method": "index_of_word", "indices": indices, "skip": "parentheses"}
            rule = index_rule(indices=indices, skip="parentheses")
        cases.append(_case("noise_variant", k, rule, params, text, word))

    _verify(cases)
    return cases


def _load_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_hidden_message_extraction_reference", PACK_DIR / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verify(cases: list[dict[str, Any]]) -> None:
    """Refuse to emit a case the reference solver disagrees with, or a noise case whose
    noise would not change a careless answer."""
    reference = _load_reference()
    for case in cases:
        got = reference.solve({k: v for k, v in case.items() if k != "expected"})
        if got != case["expected"]:
            raise AssertionError(f"{case['id']}: reference gives {got!r}, intended "
                                 f"{case['expected']!r}")
        if case["scheme"] == "noise_variant":
            careless = dict(case["params"])
            del careless["skip"]
            if reference.solve({"text": case["text"], "params": careless}) == case["expected"]:
                raise AssertionError(f"{case['id']}: the noise does not change the answer")


def render(case: dict[str, Any]) -> str:
    """The exact bytes of a committed case file."""
    return json.dumps(case, indent=2, ensure_ascii=False) + "\n"


def expected_files(seed: int = SEED) -> dict[str, str]:
    """File name to content for every case this generator produces."""
    return {f"{case['id']}.json": render(case) for case in build_cases(seed)}


def check(cases_dir: Path = CASES_DIR, seed: int = SEED) -> list[str]:
    """Differences between ``cases_dir`` and the generator's output; empty when in sync."""
    wanted = expected_files(seed)
    present = {p.name for p in cases_dir.glob("*.json")} if cases_dir.is_dir() else set()
    problems = [f"missing {name}" for name in sorted(set(wanted) - present)]
    problems += [f"unexpected {name}" for name in sorted(present - set(wanted))]
    for name in sorted(set(wanted) & present):
        if (cases_dir / name).read_text(encoding="utf-8") != wanted[name]:
            problems.append(f"differs {name}")
    return problems


def write(cases_dir: Path = CASES_DIR, seed: int = SEED) -> int:
    """(Re)write every case file and remove stale generated ones; returns the count."""
    wanted = expected_files(seed)
    cases_dir.mkdir(parents=True, exist_ok=True)
    for stale in sorted(p for p in cases_dir.glob("*.json") if p.name not in wanted):
        stale.unlink()
    for name, content in wanted.items():
        with open(cases_dir / name, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(content)
    return len(wanted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare the committed cases with the generator output; write nothing")
    parser.add_argument("--out", type=Path, default=CASES_DIR, help="cases directory")
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.out)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print(f"{len(problems)} case file(s) out of date; rerun {Path(__file__).name}",
                  file=sys.stderr)
            return 1
        print(f"{len(expected_files())} case files up to date")
        return 0
    print(f"wrote {write(args.out)} case files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
