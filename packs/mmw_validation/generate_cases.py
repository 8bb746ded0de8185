#!/usr/bin/env python3
"""Deterministic generator for the mmw_validation cases (MarkMyWords, section III and appendix A-B).

Writes ``cases/*.jsonl`` (one case per line, ``json.dumps(case, ensure_ascii=False)``):

* V1 ``legal_research`` (50) and ``rfc_summary`` (50): the seed's two prompts, over topics and
  RFCs listed below (written for this pack; the seed does not publish its lists).
* V2 ``french_book_report`` (100): the seed's French prompt over the 100 books of the
  ``mmw_book_reports`` pack, with their published French titles.
* V3 ``paraphrase`` (100) and ``translate`` (100): MarkMyWords' paraphrase and translation
  prompts (English to French) over public-domain passages.
* V4 ``code`` (300, the seed's count): programming problems written for this pack
  (``programming_tasks.py``); each example output is computed by the problem's own solution.
* V5 ``summary`` (100): the seed's 3-sentence highlight prompt over public-domain passages, with
  one fixed worked example (a public-domain passage and highlights written for this pack).

Public-domain passages come from Debian packages, read through their own tools:

* ``r-cran-janeaustenr``: Jane Austen's six novels (``janeaustenr::austen_books()``);
* ``r-cran-tokenizers``: Herman Melville's *Moby-Dick* (``tokenizers::mobydick``, a Project
  Gutenberg text; chapters 1-135 are used, not the licence header);
* ``bible-kjv`` / ``bible-kjv-text``: the King James Version (the ``bible`` command).

Install them with ``apt-get install --no-install-recommends r-cran-janeaustenr
r-cran-tokenizers bible-kjv``. Passages are whole paragraphs (Austen, Melville) or runs of
verses from the start of a chapter (KJV) of 80-250 words (V5: 120-250 words and at least four
sentences), with line breaks joined, runs of spaces collapsed, and the ``_italic_`` underscores
of the Gutenberg texts removed; nothing else is changed. Every choice is drawn from one
``random.Random(SEED)`` over candidate lists in file order, so two runs write byte-identical
files. ``--check`` compares instead of writing and exits 1 on any difference.

Usage::

    python packs/mmw_validation/generate_cases.py          # (re)write cases/
    python packs/mmw_validation/generate_cases.py --check  # verify, write nothing
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACK_DIR = Path(__file__).resolve().parent
CASES_DIR = PACK_DIR / "cases"
BOOKS_FILE = PACK_DIR.parent / "mmw_book_reports" / "cases" / "book_reports.jsonl"
SEED = 7_291_000

# ---------------------------------------------------------------------------------------------
# Prompts. MarkMyWords appendix A-B gives V1, V2 and V5 word for word; the seed's slips ("Make sure
# is it", "Ecris", "detaillé") are corrected, and the French title is set in guillemets, as
# MarkMyWords quotes titles in its English book-report prompt. V3 uses MarkMyWords' own
# paraphrase and translation prompts (src/watermark_benchmark/utils/generation_prompts.py);
# the seed gives none. V4's wording is this pack's (the seed uses APPS problems).

LEGAL_PROMPT = (
    "Conduct legal research on {topic}. Please summarize relevant regulations by region or "
    "country and include citations. Make conclusions based on your research about key "
    "developments in this field. Based on the current trends, make your forecast about how "
    "{topic} will be regulated in the future."
)
RFC_PROMPT = (
    "Write a detailed explanation and description of RFC {number}: {title}. Make sure it is "
    "self contained so I do not need to read the RFC myself to fully understand it."
)
FRENCH_PROMPT = "Écris un résumé détaillé de « {title} », écrit par {author}."
PARAPHRASE_PROMPT = "Paraphrase the following text:\n[[START OF TEXT]]\n{text}\n[[END OF TEXT]]"
TRANSLATE_PROMPT = "Translate the following text to French:\n[[START OF TEXT]]\n{text}\n[[END OF TEXT]]"
CODE_PROMPT = (
    "Solve the following programming problem in Python 3. Your program must read the input from "
    "standard input and print the answer to standard output. Start by explaining your "
    "reasoning, then give the complete program in a single Python code block.\n\n"
    "Problem: {title}\n\n{statement}\n\nInput\n{input_spec}\n\nOutput\n{output_spec}\n\n"
    "Example input:\n{example_input}\n\nExample output:\n{example_output}"
)
SUMMARY_PROMPT = (
    "Extract a 3 sentence highlight from the following article. Here is one example for "
    "reference.\nExample:\n* Article: {example_article}\n* Highlights: {example_highlights}\n"
    "Current Task:\n* Article: {text}\n* Highlights:"
)

# The V5 worked example (the seed's XX and YY): the last paragraph of Pride and Prejudice,
# chapter 1 ("Mr. Bennet was so odd a mixture..."), read from the corpus at generation time, and
# three highlight sentences written for this pack.
SUMMARY_EXAMPLE_BOOK, SUMMARY_EXAMPLE_CHAPTER = "Pride & Prejudice", 1
SUMMARY_EXAMPLE_START = "Mr. Bennet was so odd a mixture"
SUMMARY_EXAMPLE_HIGHLIGHTS = (
    "Mr. Bennet is a mixture of quick wit, sarcastic humour, reserve and caprice that his wife "
    "has not understood in twenty-three years of marriage. Mrs. Bennet is a woman of mean "
    "understanding, little information and uncertain temper who fancies herself nervous when "
    "she is discontented. The business of her life is to get her daughters married, and its "
    "solace is visiting and news."
)

# ---------------------------------------------------------------------------------------------
# V1 lists (written for this pack).

LEGAL_TOPICS: tuple[tuple[str, str], ...] = (
    ("ai", "AI"),
    ("facial-recognition", "facial recognition technology"),
    ("personal-data-privacy", "personal data privacy"),
    ("cross-border-data-transfers", "cross-border transfers of personal data"),
    ("children-online-privacy", "children's online privacy"),
    ("biometric-data", "the collection of biometric data"),
    ("cryptocurrencies", "cryptocurrencies"),
    ("central-bank-digital-currencies", "central bank digital currencies"),
    ("open-banking", "open banking"),
    ("buy-now-pay-later", "buy-now-pay-later lending"),
    ("autonomous-vehicles", "autonomous vehicles"),
    ("commercial-drones", "commercial drones"),
    ("electric-scooters", "shared electric scooters"),
    ("ride-hailing", "ride-hailing platforms"),
    ("gig-economy", "gig economy work"),
    ("non-compete-agreements", "non-compete agreements"),
    ("remote-work", "cross-border remote work"),
    ("short-term-rentals", "short-term home rentals"),
    ("right-to-repair", "the right to repair"),
    ("net-neutrality", "net neutrality"),
    ("content-moderation", "online content moderation"),
    ("deepfakes", "deepfakes"),
    ("ai-generated-works-copyright", "copyright in AI-generated works"),
    ("web-scraping", "web scraping"),
    ("encryption", "end-to-end encryption"),
    ("ransomware-payments", "ransomware payments"),
    ("iot-security", "the security of consumer connected devices"),
    ("breach-notification", "data breach notification"),
    ("algorithmic-hiring", "algorithmic hiring tools"),
    ("predictive-policing", "predictive policing"),
    ("telemedicine", "telemedicine"),
    ("medical-device-software", "software as a medical device"),
    ("human-gene-editing", "human gene editing"),
    ("lab-grown-meat", "lab-grown meat"),
    ("gm-crops", "genetically modified crops"),
    ("pesticides", "pesticide use in agriculture"),
    ("antibiotics-in-livestock", "antibiotic use in livestock"),
    ("single-use-plastics", "single-use plastics"),
    ("electronic-waste", "electronic waste"),
    ("carbon-markets", "carbon emissions trading"),
    ("greenwashing", "greenwashing in advertising"),
    ("ev-charging", "electric vehicle charging infrastructure"),
    ("space-debris", "space debris"),
    ("space-resources", "the mining of space resources"),
    ("cannabis", "recreational cannabis"),
    ("e-cigarettes", "e-cigarettes"),
    ("sports-betting", "online sports betting"),
    ("loot-boxes", "loot boxes in video games"),
    ("influencer-marketing", "influencer marketing"),
    ("assisted-dying", "assisted dying"),
)

RFCS: tuple[tuple[int, str], ...] = (
    (768, "User Datagram Protocol"),
    (791, "Internet Protocol"),
    (792, "Internet Control Message Protocol"),
    (1034, "Domain names - concepts and facilities"),
    (1035, "Domain names - implementation and specification"),
    (1149, "A Standard for the Transmission of IP Datagrams on Avian Carriers"),
    (1918, "Address Allocation for Private Internets"),
    (2104, "HMAC: Keyed-Hashing for Message Authentication"),
    (2119, "Key words for use in RFCs to Indicate Requirement Levels"),
    (2131, "Dynamic Host Configuration Protocol"),
    (2328, "OSPF Version 2"),
    (2818, "HTTP Over TLS"),
    (3261, "SIP: Session Initiation Protocol"),
    (3339, "Date and Time on the Internet: Timestamps"),
    (3550, "RTP: A Transport Protocol for Real-Time Applications"),
    (3629, "UTF-8, a transformation format of ISO 10646"),
    (3986, "Uniform Resource Identifier (URI): Generic Syntax"),
    (4180, "Common Format and MIME Type for Comma-Separated Values (CSV) Files"),
    (4226, "HOTP: An HMAC-Based One-Time Password Algorithm"),
    (4271, "A Border Gateway Protocol 4 (BGP-4)"),
    (4291, "IP Version 6 Addressing Architecture"),
    (4648, "The Base16, Base32, and Base64 Data Encodings"),
    (5280, "Internet X.509 Public Key Infrastructure Certificate and Certificate Revocation List (CRL) Profile"),
    (5321, "Simple Mail Transfer Protocol"),
    (5322, "Internet Message Format"),
    (5869, "HMAC-based Extract-and-Expand Key Derivation Function (HKDF)"),
    (5905, "Network Time Protocol Version 4: Protocol and Algorithms Specification"),
    (6238, "TOTP: Time-Based One-Time Password Algorithm"),
    (6265, "HTTP State Management Mechanism"),
    (6455, "The WebSocket Protocol"),
    (6749, "The OAuth 2.0 Authorization Framework"),
    (6762, "Multicast DNS"),
    (6797, "HTTP Strict Transport Security (HSTS)"),
    (6962, "Certificate Transparency"),
    (7208, "Sender Policy Framework (SPF) for Authorizing Use of Domains in Email, Version 1"),
    (7519, "JSON Web Token (JWT)"),
    (7636, "Proof Key for Code Exchange by OAuth Public Clients"),
    (7748, "Elliptic Curves for Security"),
    (8032, "Edwards-Curve Digital Signature Algorithm (EdDSA)"),
    (8200, "Internet Protocol, Version 6 (IPv6) Specification"),
    (8259, "The JavaScript Object Notation (JSON) Data Interchange Format"),
    (8446, "The Transport Layer Security (TLS) Protocol Version 1.3"),
    (8484, "DNS Queries over HTTPS (DoH)"),
    (8555, "Automatic Certificate Management Environment (ACME)"),
    (8949, "Concise Binary Object Representation (CBOR)"),
    (9000, "QUIC: A UDP-Based Multiplexed and Secure Transport"),
    (9110, "HTTP Semantics"),
    (9114, "HTTP/3"),
    (9293, "Transmission Control Protocol (TCP)"),
    (9309, "Robots Exclusion Protocol"),
)

# ---------------------------------------------------------------------------------------------
# V2: the French titles of the mmw_book_reports books, keyed by that pack's case id, with the
# English title as a guard against the two lists drifting apart. Authors are written as French
# publishers write them (Homère, Léon Tolstoï, Fiodor Dostoïevski, ...).

FRENCH_BOOKS: tuple[tuple[str, str, str, str], ...] = (
    ("book-001", "Pride and Prejudice", "Orgueil et Préjugés", "Jane Austen"),
    ("book-002", "Persuasion", "Persuasion", "Jane Austen"),
    ("book-003", "Emma", "Emma", "Jane Austen"),
    ("book-004", "Don Quixote", "Don Quichotte", "Miguel de Cervantès"),
    ("book-005", "The Lord of the Rings", "Le Seigneur des anneaux", "J. R. R. Tolkien"),
    ("book-006", "The Hobbit", "Le Hobbit", "J. R. R. Tolkien"),
    ("book-007", "And Then There Were None", "Ils étaient dix", "Agatha Christie"),
    ("book-008", "Alice's Adventures in Wonderland", "Les Aventures d'Alice au pays des merveilles", "Lewis Carroll"),
    ("book-009", "The Catcher in the Rye", "L'Attrape-cœurs", "J. D. Salinger"),
    ("book-010", "In Search of Lost Time", "À la recherche du temps perdu", "Marcel Proust"),
    ("book-011", "Ulysses", "Ulysse", "James Joyce"),
    ("book-012", "One Hundred Years of Solitude", "Cent ans de solitude", "Gabriel García Márquez"),
    ("book-013", "Love in the Time of Cholera", "L'Amour aux temps du choléra", "Gabriel García Márquez"),
    ("book-014", "The Great Gatsby", "Gatsby le Magnifique", "F. Scott Fitzgerald"),
    ("book-015", "Tender Is the Night", "Tendre est la nuit", "F. Scott Fitzgerald"),
    ("book-016", "Moby-Dick", "Moby Dick", "Herman Melville"),
    ("book-017", "War and Peace", "Guerre et Paix", "Léon Tolstoï"),
    ("book-018", "The Call of the Wild", "L'Appel de la forêt", "Jack London"),
    ("book-019", "Hamlet", "Hamlet", "William Shakespeare"),
    ("book-020", "Twelfth Night", "La Nuit des rois", "William Shakespeare"),
    ("book-021", "Macbeth", "Macbeth", "William Shakespeare"),
    ("book-022", "Romeo and Juliet", "Roméo et Juliette", "William Shakespeare"),
    ("book-023", "The Tempest", "La Tempête", "William Shakespeare"),
    ("book-024", "King Lear", "Le Roi Lear", "William Shakespeare"),
    ("book-025", "The Odyssey", "L'Odyssée", "Homère"),
    ("book-026", "Madame Bovary", "Madame Bovary", "Gustave Flaubert"),
    ("book-027", "The Divine Comedy", "La Divine Comédie", "Dante Alighieri"),
    ("book-028", "The Brothers Karamazov", "Les Frères Karamazov", "Fiodor Dostoïevski"),
    ("book-029", "Crime and Punishment", "Crime et Châtiment", "Fiodor Dostoïevski"),
    ("book-030", "The Idiot", "L'Idiot", "Fiodor Dostoïevski"),
    ("book-031", "The Possessed", "Les Possédés", "Fiodor Dostoïevski"),
    ("book-032", "Wuthering Heights", "Les Hauts de Hurlevent", "Emily Brontë"),
    ("book-033", "One Flew Over the Cuckoo's Nest", "Vol au-dessus d'un nid de coucou", "Ken Kesey"),
    ("book-034", "The Adventures of Huckleberry Finn", "Les Aventures de Huckleberry Finn", "Mark Twain"),
    ("book-035", "Anna Karenina", "Anna Karénine", "Léon Tolstoï"),
    ("book-036", "The Iliad", "L'Iliade", "Homère"),
    ("book-037", "To the Lighthouse", "Vers le phare", "Virginia Woolf"),
    ("book-038", "Catch-22", "Catch 22", "Joseph Heller"),
    ("book-039", "Heart of Darkness", "Au cœur des ténèbres", "Joseph Conrad"),
    ("book-040", "The Sound and the Fury", "Le Bruit et la Fureur", "William Faulkner"),
    ("book-041", "Nineteen Eighty-Four", "1984", "George Orwell"),
    ("book-042", "Animal Farm", "La Ferme des animaux", "George Orwell"),
    ("book-043", "Great Expectations", "Les Grandes Espérances", "Charles Dickens"),
    ("book-044", "David Copperfield", "David Copperfield", "Charles Dickens"),
    ("book-045", "A Tale of Two Cities", "Le Conte de deux cités", "Charles Dickens"),
    ("book-046", "Oliver Twist", "Oliver Twist", "Charles Dickens"),
    ("book-047", "The Grapes of Wrath", "Les Raisins de la colère", "John Steinbeck"),
    ("book-048", "Of Mice and Men", "Des souris et des hommes", "John Steinbeck"),
    ("book-049", "Absalom, Absalom!", "Absalon, Absalon !", "William Faulkner"),
    ("book-050", "Invisible Man", "Homme invisible, pour qui chantes-tu ?", "Ralph Ellison"),
    ("book-051", "To Kill a Mockingbird", "Ne tirez pas sur l'oiseau moqueur", "Harper Lee"),
    ("book-052", "The Trial", "Le Procès", "Franz Kafka"),
    ("book-053", "The Metamorphosis", "La Métamorphose", "Franz Kafka"),
    ("book-054", "The Castle", "Le Château", "Franz Kafka"),
    ("book-055", "The Red and the Black", "Le Rouge et le Noir", "Stendhal"),
    ("book-056", "The Charterhouse of Parma", "La Chartreuse de Parme", "Stendhal"),
    ("book-057", "Middlemarch", "Middlemarch", "George Eliot"),
    ("book-058", "Gulliver's Travels", "Les Voyages de Gulliver", "Jonathan Swift"),
    ("book-059", "Beloved", "Beloved", "Toni Morrison"),
    ("book-060", "Mrs. Dalloway", "Mrs Dalloway", "Virginia Woolf"),
    ("book-061", "The Waves", "Les Vagues", "Virginia Woolf"),
    ("book-062", "The Stranger", "L'Étranger", "Albert Camus"),
    ("book-063", "The Plague", "La Peste", "Albert Camus"),
    ("book-064", "The Myth of Sisyphus", "Le Mythe de Sisyphe", "Albert Camus"),
    ("book-065", "Jane Eyre", "Jane Eyre", "Charlotte Brontë"),
    ("book-066", "Villette", "Villette", "Charlotte Brontë"),
    ("book-067", "The Aeneid", "L'Énéide", "Virgile"),
    ("book-068", "The Sun Also Rises", "Le soleil se lève aussi", "Ernest Hemingway"),
    ("book-069", "The Old Man and the Sea", "Le Vieil Homme et la Mer", "Ernest Hemingway"),
    ("book-070", "A Farewell to Arms", "L'Adieu aux armes", "Ernest Hemingway"),
    ("book-071", "Candide", "Candide", "Voltaire"),
    ("book-072", "Zadig", "Zadig", "Voltaire"),
    ("book-073", "Micromégas", "Micromégas", "Voltaire"),
    ("book-074", "Les Misérables", "Les Misérables", "Victor Hugo"),
    ("book-075", "Frankenstein", "Frankenstein", "Mary Shelley"),
    ("book-076", "Antigone", "Antigone", "Sophocle"),
    ("book-077", "Electra", "Électre", "Sophocle"),
    ("book-078", "Lord of the Flies", "Sa Majesté des mouches", "William Golding"),
    ("book-079", "Brave New World", "Le Meilleur des mondes", "Aldous Huxley"),
    ("book-080", "Journey to the End of the Night", "Voyage au bout de la nuit", "Louis-Ferdinand Céline"),
    ("book-081", "A Sentimental Education", "L'Éducation sentimentale", "Gustave Flaubert"),
    ("book-082", "The Handmaid's Tale", "La Servante écarlate", "Margaret Atwood"),
    ("book-083", "Charlotte's Web", "La Toile de Charlotte", "E. B. White"),
    ("book-084", "Gargantua and Pantagruel", "Gargantua et Pantagruel", "François Rabelais"),
    ("book-085", "Faust", "Faust", "Johann Wolfgang von Goethe"),
    ("book-086", "Robinson Crusoe", "Robinson Crusoé", "Daniel Defoe"),
    ("book-087", "A Clockwork Orange", "L'Orange mécanique", "Anthony Burgess"),
    ("book-088", "The Master and Margarita", "Le Maître et Marguerite", "Mikhaïl Boulgakov"),
    ("book-089", "Father Goriot", "Le Père Goriot", "Honoré de Balzac"),
    ("book-090", "Cousin Bette", "La Cousine Bette", "Honoré de Balzac"),
    ("book-091", "The Human Comedy", "La Comédie humaine", "Honoré de Balzac"),
    ("book-092", "The Little Prince", "Le Petit Prince", "Antoine de Saint-Exupéry"),
    ("book-093", "The Count of Monte Cristo", "Le Comte de Monte-Cristo", "Alexandre Dumas"),
    ("book-094", "The Lion, the Witch and the Wardrobe", "Le Lion, la Sorcière blanche et l'Armoire magique", "C. S. Lewis"),
    ("book-095", "Twenty Thousand Leagues Under the Sea", "Vingt Mille Lieues sous les mers", "Jules Verne"),
    ("book-096", "The Wind-Up Bird Chronicle", "Chroniques de l'oiseau à ressort", "Haruki Murakami"),
    ("book-097", "Fahrenheit 451", "Fahrenheit 451", "Ray Bradbury"),
    ("book-098", "Harry Potter and the Philosopher's Stone", "Harry Potter à l'école des sorciers", "J. K. Rowling"),
    ("book-099", "Dune", "Dune", "Frank Herbert"),
    ("book-100", "The Three-Body Problem", "Le Problème à trois corps", "Liu Cixin"),
)

# ---------------------------------------------------------------------------------------------
# Public-domain passages

MIN_WORDS, MAX_WORDS = 80, 250  # V3
SUMMARY_MIN_WORDS, SUMMARY_MIN_SENTENCES = 120, 4  # V5 (same maximum)

AUSTEN_TITLES = {
    "Sense & Sensibility": "Sense and Sensibility",
    "Pride & Prejudice": "Pride and Prejudice",
    "Mansfield Park": "Mansfield Park",
    "Emma": "Emma",
    "Northanger Abbey": "Northanger Abbey",
    "Persuasion": "Persuasion",
}

# Narrative chapters of the KJV from which passages start (verse 1 onwards).
KJV_CHAPTERS: tuple[tuple[str, int], ...] = (
    *(("Genesis", c) for c in range(1, 51)),
    *(("Exodus", c) for c in range(1, 21)),
    *(("Joshua", c) for c in range(1, 11)),
    *(("Judges", c) for c in range(1, 22)),
    *(("Ruth", c) for c in range(1, 5)),
    *(("1 Samuel", c) for c in range(1, 32)),
    *(("2 Samuel", c) for c in range(1, 25)),
    *(("1 Kings", c) for c in range(1, 23)),
    *(("Esther", c) for c in range(1, 11)),
    *(("Daniel", c) for c in range(1, 7)),
    *(("Jonah", c) for c in range(1, 5)),
    *(("Matthew", c) for c in range(1, 29)),
    *(("Mark", c) for c in range(1, 17)),
    *(("Luke", c) for c in range(1, 25)),
    *(("John", c) for c in range(1, 22)),
    *(("Acts", c) for c in range(1, 29)),
)

#: Passages per set and source (each set: 50 Austen, 25 Melville, 25 KJV).
PER_SET = (("janeaustenr", 50), ("mobydick", 25), ("kjv", 25))


@dataclass(frozen=True)
class Passage:
    text: str
    source: str  # work and place, human-readable
    package: str  # Debian package and version it was read from
    corpus: str  # janeaustenr | mobydick | kjv


ENDS_SENTENCE = re.compile(r"[.!?][\"')]?$")


def words(text: str) -> int:
    return len(text.split())


def sentences(text: str) -> int:
    return len(re.findall(r"[.!?][\"')]?(?=\s|$)", text))


def clean(lines: list[str]) -> str:
    text = " ".join(line.strip() for line in lines)
    text = re.sub(r"_([^_]+)_", r"\1", text).replace("_", "")
    return re.sub(r"\s+", " ", text).strip()


def debian_version(package: str) -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True,
                         text=True, check=True)
    return f"{package} {out.stdout.strip()}"


def rscript(code: str) -> str:
    return subprocess.run(["Rscript", "-e", code], capture_output=True, text=True, check=True,
                          encoding="utf-8").stdout


def roman_to_int(token: str) -> int:
    if token.isdigit():
        return int(token)
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
    total = 0
    for i, ch in enumerate(token):
        v = values[ch]
        total += -v if i + 1 < len(token) and values[token[i + 1]] > v else v
    return total


def paragraphs_by_chapter(lines: list[str], chapter_re: re.Pattern[str], end_re: re.Pattern[str],
                          volume_re: re.Pattern[str] | None = None):
    """Yield (volume, chapter, paragraph number, paragraph lines) for text inside chapters."""
    volume, chapter, para, current = None, None, 0, []

    def flush():
        nonlocal current, para
        if current and chapter is not None:
            para += 1
            yield volume, chapter, para, current
        current = []

    for line in lines:
        stripped = line.strip()
        if end_re.match(stripped):
            yield from flush()
            return
        if volume_re is not None and (m := volume_re.match(stripped)):
            yield from flush()
            volume, chapter = roman_to_int(m.group(1)), None
            continue
        if m := chapter_re.match(stripped):
            yield from flush()
            chapter, para = roman_to_int(m.group(1)), 0
            continue
        if not stripped:
            yield from flush()
        else:
            current.append(line)
    yield from flush()


def austen_paragraphs() -> list[tuple[tuple[str, int | None, int, int], str]]:
    """Every narrative paragraph of the six novels: ((book, volume, chapter, n), text)."""
    raw = rscript('library(janeaustenr); b <- austen_books(); '
                  'write.csv(data.frame(book=as.character(b$book), text=b$text), stdout(), row.names=FALSE)')
    by_book: dict[str, list[str]] = {}
    for row in csv.DictReader(io.StringIO(raw)):
        by_book.setdefault(row["book"], []).append(row["text"])
    chapter_re = re.compile(r"^(?:CHAPTER|Chapter) ([0-9]+|[IVXLC]+)\.?$")
    end_re = re.compile(r"^(THE END|FINIS|A NOTE ON THE TEXT)$")
    out = []
    for book in AUSTEN_TITLES:  # fixed order
        volume_re = re.compile(r"^VOLUME ([IVX]+)$") if book == "Emma" else None
        for volume, chapter, n, lines in paragraphs_by_chapter(by_book[book], chapter_re, end_re, volume_re):
            out.append(((book, volume, chapter, n), clean(lines)))
    return out


def austen_source(key: tuple[str, int | None, int, int]) -> str:
    book, volume, chapter, n = key
    where = f"volume {volume}, chapter {chapter}" if volume else f"chapter {chapter}"
    return f"Jane Austen, {AUSTEN_TITLES[book]}, {where}, paragraph {n}"


def moby_paragraphs() -> list[tuple[tuple[int, int], str]]:
    raw = rscript('library(tokenizers); data(mobydick); writeLines(mobydick)')
    chapter_re = re.compile(r"^CHAPTER ([0-9]+)\. .*$")
    end_re = re.compile(r"^(Epilogue|End of Project Gutenberg.*)$")
    return [((chapter, n), clean(lines))
            for _, chapter, n, lines in paragraphs_by_chapter(raw.splitlines(), chapter_re, end_re)]


def kjv_chapter(book: str, chapter: int) -> list[str]:
    # The bible command reads "1 Samuel 1" as "1 S..." (Song of Solomon): write "1Samuel 1".
    out = subprocess.run(["bible", "-l10000", f"{book.replace(' ', '')} {chapter}:1-999"], capture_output=True,
                         text=True, check=True).stdout
    headers = [line.strip() for line in out.splitlines() if line.strip() and not line.startswith(" ")]
    assert headers == [f"{book} {chapter}"], (book, chapter, headers)
    verses = []
    for line in out.splitlines():
        if m := re.match(r"^\s+(\d+) (.*)$", line):
            assert int(m.group(1)) == len(verses) + 1, (book, chapter, line)
            verses.append(m.group(2).strip())
    return verses


def eligible(text: str, *, summary: bool) -> bool:
    n = words(text)
    if not MIN_WORDS <= n <= MAX_WORDS:
        return False
    if text.startswith(('"', "'")) or "[" in text or "*" in text:
        return False  # dialogue openings, footnote marks and editorial brackets
    if not ENDS_SENTENCE.search(text):
        return False  # a paragraph that leads into a letter or a quotation
    if summary:
        return n >= SUMMARY_MIN_WORDS and sentences(text) >= SUMMARY_MIN_SENTENCES
    return True


def passages(rng: random.Random) -> tuple[dict[str, list[Passage]], Passage]:
    """The V3 paraphrase, V3 translate and V5 summary passages, and the V5 example."""
    austen_pkg = debian_version("r-cran-janeaustenr")
    moby_pkg = debian_version("r-cran-tokenizers")
    kjv_pkg = debian_version("bible-kjv-text")

    austen = austen_paragraphs()
    example = None
    pools: dict[str, list[Passage]] = {"janeaustenr": [], "mobydick": [], "kjv": []}
    for key, text in austen:
        book, _, chapter, _ = key
        if (book, chapter) == (SUMMARY_EXAMPLE_BOOK, SUMMARY_EXAMPLE_CHAPTER) and text.startswith(SUMMARY_EXAMPLE_START):
            example = Passage(text, austen_source(key), austen_pkg, "janeaustenr")
        elif eligible(text, summary=False):
            pools["janeaustenr"].append(Passage(text, austen_source(key), austen_pkg, "janeaustenr"))
    assert example is not None, "V5 example paragraph not found"
    for (chapter, n), text in moby_paragraphs():
        if eligible(text, summary=False):
            pools["mobydick"].append(Passage(text, f"Herman Melville, Moby-Dick, chapter {chapter}, paragraph {n}",
                                             moby_pkg, "mobydick"))
    for book, chapter in KJV_CHAPTERS:
        verses = kjv_chapter(book, chapter)
        taken: list[str] = []
        for verse in verses:
            if words(" ".join(taken + [verse])) > MAX_WORDS:
                break
            taken.append(verse)
        while taken and not ENDS_SENTENCE.search(taken[-1]):
            taken.pop()  # end on a full sentence, not on "...saying,"
        text = clean(taken)
        if eligible(text, summary=False):
            last = len(taken)
            pools["kjv"].append(Passage(text, f"King James Version, {book} {chapter}:1-{last}", kjv_pkg, "kjv"))

    chosen: dict[str, list[Passage]] = {"summary": [], "paraphrase": [], "translate": []}
    for corpus, count in PER_SET:
        pool = list(pools[corpus])
        rng.shuffle(pool)
        # V5 first: it needs the longer passages; the remaining ones go to V3.
        summary = [p for p in pool if eligible(p.text, summary=True)][:count]
        if len(summary) < count:
            raise SystemExit(f"{corpus}: only {len(summary)} passages fit V5")
        rest = [p for p in pool if p not in summary]
        if len(rest) < 2 * count:
            raise SystemExit(f"{corpus}: only {len(rest)} passages left for V3")
        chosen["summary"] += summary
        chosen["paraphrase"] += rest[:count]
        chosen["translate"] += rest[count:2 * count]
    return chosen, example


# ---------------------------------------------------------------------------------------------
# Cases


def load_sibling(name: str):
    spec = importlib.util.spec_from_file_location(f"mmw_validation_{name}", PACK_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def v1_cases() -> dict[str, list[dict[str, Any]]]:
    legal = [{"id": f"v1-legal-{slug}", "set": "V1", "task": "legal_research", "topic": topic,
              "prompt": LEGAL_PROMPT.format(topic=topic)} for slug, topic in LEGAL_TOPICS]
    rfc = [{"id": f"v1-rfc-{number}", "set": "V1", "task": "rfc_summary", "rfc_number": number,
            "rfc_title": title, "prompt": RFC_PROMPT.format(number=number, title=title)}
           for number, title in RFCS]
    return {"v1_legal_research.jsonl": legal, "v1_rfc_summary.jsonl": rfc}


def v2_cases() -> dict[str, list[dict[str, Any]]]:
    english = [json.loads(line) for line in BOOKS_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert [(b["id"], b["title"]) for b in english] == [(i, t) for i, t, _, _ in FRENCH_BOOKS], \
        "FRENCH_BOOKS is out of step with mmw_book_reports"
    return {"v2_french_book_report.jsonl": [
        {"id": f"v2-{book_id}", "set": "V2", "task": "french_book_report", "book_id": book_id,
         "title": title, "author": author, "prompt": FRENCH_PROMPT.format(title=title, author=author)}
        for book_id, _, title, author in FRENCH_BOOKS]}


def passage_case(set_: str, task: str, n: int, p: Passage, prompt: str) -> dict[str, Any]:
    return {"id": f"{set_.lower()}-{task}-{n:03d}", "set": set_, "task": task, "source_text": p.text,
            "source": p.source, "source_package": p.package, "prompt": prompt}


def v3_v5_cases(rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    chosen, example = passages(rng)
    return {
        "v3_paraphrase.jsonl": [passage_case("V3", "paraphrase", i, p, PARAPHRASE_PROMPT.format(text=p.text))
                                for i, p in enumerate(chosen["paraphrase"], 1)],
        "v3_translate.jsonl": [passage_case("V3", "translate", i, p, TRANSLATE_PROMPT.format(text=p.text))
                               for i, p in enumerate(chosen["translate"], 1)],
        "v5_summary.jsonl": [
            {**passage_case("V5", "summary", i, p, SUMMARY_PROMPT.format(
                example_article=example.text, example_highlights=SUMMARY_EXAMPLE_HIGHLIGHTS, text=p.text)),
             "example_source": example.source}
            for i, p in enumerate(chosen["summary"], 1)],
    }


def v4_cases() -> dict[str, list[dict[str, Any]]]:
    tasks = load_sibling("programming_tasks").TASKS
    cases = []
    for task in tasks:
        example_output = task.solve(task.example_input)
        # A solution returns its printed output; normalise the trailing newline.
        example_output = example_output.rstrip("\n")
        cases.append({
            "id": f"v4-code-{task.slug}", "set": "V4", "task": "code", "title": task.title,
            "statement": task.statement, "input_spec": task.input_spec, "output_spec": task.output_spec,
            "example_input": task.example_input.rstrip("\n"), "example_output": example_output,
            "prompt": CODE_PROMPT.format(title=task.title, statement=task.statement,
                                         input_spec=task.input_spec, output_spec=task.output_spec,
                                         example_input=task.example_input.rstrip("\n"),
                                         example_output=example_output),
        })
    return {"v4_code.jsonl": cases}


def build() -> dict[str, str]:
    rng = random.Random(SEED)
    files: dict[str, list[dict[str, Any]]] = {}
    files.update(v1_cases())
    files.update(v2_cases())
    files.update(v3_v5_cases(rng))
    files.update(v4_cases())
    return {name: "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
            for name, cases in sorted(files.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="compare with cases/, write nothing")
    args = parser.parse_args(argv)
    files = build()
    if args.check:
        existing = {p.name for p in CASES_DIR.glob("*.jsonl")}
        bad = sorted(existing ^ set(files))
        bad += [n for n in sorted(files) if n in existing and (CASES_DIR / n).read_text(encoding="utf-8") != files[n]]
        for name in bad:
            print(f"differs: cases/{name}", file=sys.stderr)
        return 1 if bad else 0
    CASES_DIR.mkdir(exist_ok=True)
    for stale in CASES_DIR.glob("*.jsonl"):
        if stale.name not in files:
            stale.unlink()
    for name, text in files.items():
        (CASES_DIR / name).write_text(text, encoding="utf-8")
    print(f"wrote {sum(t.count(chr(10)) for t in files.values())} cases in {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
