"""Build the owners' data of the WaterDrum demo (``evalrun unlearning demo``) from public-domain
text that Debian packages, and write it inside the package so the demo never downloads.

Sources (both public domain; the Debian packages' own licences are noted in the output's
``SOURCES.md``):

* the King James Bible, Debian ``bible-kjv`` / ``bible-kjv-text`` (read with its ``bible``
  command, verse by verse);
* *Moby-Dick* (Herman Melville, 1851; the Project Gutenberg e-text #2701), shipped as the
  ``mobydick`` data set of Debian's ``r-cran-tokenizers`` (read with ``Rscript``).

Twelve owners, alternately a KJV book and a run of Moby-Dick chapters, so that any first
``n`` owners mix both styles. Each data point is one passage of 50 to 90 words: for the Bible
the first verses of a chapter joined, for Moby-Dick a paragraph (or its first sentences).
The first 12 words of every passage (its query prompt in the demo) are unique across the
whole file. Neither text is Jane Austen's, on which the embedded model was pretrained: as in
WaterDrum, whose arXiv abstracts postdate the base model, the owners' data must be
new to the model that is fine-tuned on it.

Usage (from the repository root; needs ``apt-get install --no-install-recommends bible-kjv
r-cran-tokenizers``)::

    python scripts/build_unlearning_data.py      # writes evalrun/assets/unlearning/owners.jsonl

It also writes the ``waterdrum`` pack's shipped cases (``packs/waterdrum/cases/owners.jsonl``:
one query per passage, owner 0 forgotten) with :func:`evalrun.unlearning.data.case_of`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "evalrun" / "assets" / "unlearning"
PACK_CASES = REPO / "packs" / "waterdrum" / "cases" / "owners.jsonl"
#: the shipped pack's forget set (the demo's too): one owner, as WaterDrum forgets one category
FORGET_OWNERS = (0,)
POINTS_PER_OWNER = 24
MIN_WORDS, MAX_WORDS = 50, 90
PROMPT_WORDS = 12

#: (owner name, source kind, what to read): KJV book abbreviations as the ``bible`` command
#: takes them, Moby-Dick chapter ranges (inclusive)
OWNERS = [
    ("KJV Genesis", "kjv", ("Gen", 50)),
    ("Moby-Dick ch. 1-20", "mobydick", (1, 20)),
    ("KJV Psalms", "kjv", ("Ps", 150)),
    ("Moby-Dick ch. 21-40", "mobydick", (21, 40)),
    ("KJV Isaiah", "kjv", ("Isa", 66)),
    ("Moby-Dick ch. 41-58", "mobydick", (41, 58)),
    ("KJV Matthew", "kjv", ("Mt", 28)),
    ("Moby-Dick ch. 59-80", "mobydick", (59, 80)),
    ("KJV Acts", "kjv", ("Acts", 28)),
    ("Moby-Dick ch. 81-100", "mobydick", (81, 100)),
    ("KJV Job", "kjv", ("Job", 42)),
    ("Moby-Dick ch. 101-135", "mobydick", (101, 135)),
]

SOURCES_MD = """# Sources of `owners.jsonl` (the WaterDrum demo's data owners)

Written by `scripts/build_unlearning_data.py`; rebuild with that script (needs Debian
`bible-kjv` and `r-cran-tokenizers`). Twelve owners, 24 passages each (50-90 words).

| owners | text | status | taken from (Debian package, its licence) |
| --- | --- | --- | --- |
| 0, 2, 4, 6, 8, 10 | King James Version of the Bible (1611): Genesis, Psalms, Isaiah, Matthew, Acts, Job; the first verses of chapters | public domain (Debian's copyright file: "the copyright for the King James Version text of the Bible is expired") | `bible-kjv-text` 4.38 via the `bible` command of `bible-kjv` (program: unrestricted use / GPL-2+) |
| 1, 3, 5, 7, 9, 11 | Herman Melville, *Moby-Dick; or, The Whale* (1851), Project Gutenberg e-text #2701; paragraphs of chapter ranges | public domain | the `mobydick` data set of `r-cran-tokenizers` 0.3.0 (package MIT, (c) 2016-2018 Lincoln Mullen et al.) |

The passages are unchanged except for whitespace normalisation and clipping at a sentence
end. Neither text is the embedded model's pretraining text (Jane Austen), so, as with the
arXiv abstracts of WaterDrum, the owners' data are new to the fine-tuned model.
"""

_VERSE = re.compile(r"^\S+?\d+:\d+\s+(.*)$")


def words(text: str) -> list[str]:
    return text.split()


def clip(text: str) -> str | None:
    """The passage cut to at most MAX_WORDS words at a sentence end where possible; None when
    shorter than MIN_WORDS."""
    w = words(text)
    if len(w) < MIN_WORDS:
        return None
    if len(w) <= MAX_WORDS:
        return " ".join(w)
    cut = " ".join(w[:MAX_WORDS])
    end = max(cut.rfind(". "), cut.rfind("; "), cut.rfind("? "), cut.rfind("! "))
    if end > 0 and len(words(cut[:end + 1])) >= MIN_WORDS:
        return cut[:end + 1]
    return cut


def kjv_passages(book: str, chapters: int) -> list[tuple[str, str]]:
    """(where, passage) per chapter: the chapter's first verses joined (``bible`` command)."""
    out = []
    for ch in range(1, chapters + 1):
        res = subprocess.run(["bible", "-f", f"{book}{ch}:1-40"], capture_output=True, text=True,
                             check=True)
        verses = [m.group(1).strip() for line in res.stdout.splitlines()
                  if (m := _VERSE.match(line.strip()))]
        text = ""
        for v in verses:
            text = f"{text} {v}".strip()
            if len(words(text)) >= MIN_WORDS:
                break
        passage = clip(text)
        if passage:
            out.append((f"{book} {ch}", passage))
    return out


def mobydick_text(work: Path) -> str:
    dest = work / "mobydick.txt"
    script = f'library(tokenizers); data(mobydick); writeLines(mobydick, "{dest}")'
    subprocess.run(["Rscript", "-e", script], check=True, capture_output=True, text=True)
    return dest.read_text(encoding="utf-8")


def mobydick_passages(text: str, first: int, last: int) -> list[tuple[str, str]]:
    """(where, passage) for the paragraphs of chapters ``first..last``."""
    parts = re.split(r"\n(CHAPTER (\d+)\.[^\n]*)\n", text)
    out = []
    # parts: [front, heading, number, body, heading, number, body, ...]
    for i in range(1, len(parts) - 2, 3):
        number = int(parts[i + 1])
        if not first <= number <= last:
            continue
        body = parts[i + 2].split("Epilogue")[0]
        for k, para in enumerate(re.split(r"\n\s*\n", body)):
            para = " ".join(para.split())
            if para.startswith('"') or para.isupper():
                continue
            passage = clip(para)
            if passage:
                out.append((f"Moby-Dick ch. {number} para. {k + 1}", passage))
    return out


def spread(items: list, n: int) -> list:
    """``n`` items evenly spread over ``items`` (all when there are fewer)."""
    if len(items) <= n:
        return list(items)
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def write_cases(records: list[dict], path: Path) -> None:
    """The waterdrum pack's cases of ``records``."""
    import sys

    sys.path.insert(0, str(REPO))
    from evalrun.unlearning.data import case_of

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(case_of(rec, FORGET_OWNERS), ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--points", type=int, default=POINTS_PER_OWNER, help="data points per owner")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        moby = mobydick_text(Path(tmp))
    seen: set[str] = set()
    records = []
    for owner, (name, kind, what) in enumerate(OWNERS):
        found = kjv_passages(*what) if kind == "kjv" else mobydick_passages(moby, *what)
        unique = []
        for where, passage in found:
            head = " ".join(words(passage)[:PROMPT_WORDS]).lower()
            if head in seen:
                continue
            seen.add(head)
            unique.append((where, passage))
        chosen = spread(unique, args.points)
        if len(chosen) < args.points:
            raise SystemExit(f"owner {owner} ({name}): only {len(chosen)} passages")
        for index, (where, passage) in enumerate(chosen):
            records.append({"id": f"o{owner:02d}-{index:03d}", "owner": owner, "owner_name": name,
                            "source": where, "text": passage})
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "owners.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    write_cases(records, PACK_CASES if args.out == DEFAULT_OUT else args.out / "cases.jsonl")
    (args.out / "SOURCES.md").write_text(SOURCES_MD, encoding="utf-8")
    print(f"wrote {len(records)} data points of {len(OWNERS)} owners to {path} "
          f"({path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
