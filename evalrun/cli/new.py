"""``evalrun new pack NAME``: a minimal pack that validates and runs, to start a new one from.

It writes ``pack.toml`` (a description, a prompt template and a built-in grader), one example
case and a README.md stub into ``--dir`` (default ``packs/``), and prints the commands to try
it. Nothing is overwritten: an existing folder is refused in one line.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from evalrun._util.errors import EvalrunError
from evalrun._util.files import write_text
from evalrun.pack.builtin_graders import GRADERS

#: pack names become parts of module names and pytest ids: lower-case words
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")

#: grader -> (prompt template, the example case's fields besides its id)
EXAMPLES: dict[str, tuple[str, dict[str, object]]] = {
    "contains": ("Write one sentence about {topic} that uses the word '{word}'.",
                 {"topic": "the sea", "word": "harbour", "target": "harbour"}),
    "exact": ("Answer with the capital of {country} and nothing else.", {"country": "France", "target": "Paris"}),
    "regex": ("Give today's date for {city} as YYYY-MM-DD.", {"city": "Oslo", "pattern": r"\d{4}-\d{2}-\d{2}"}),
    "number": ("What is {a} + {b}? Answer with the number.", {"a": 17, "b": 25, "target": 42}),
    "json": ("Describe {animal} as a JSON object with keys name and legs.",
             {"animal": "a spider", "schema": {"type": "object", "required": ["name", "legs"],
                                               "properties": {"legs": {"type": "integer"}}}}),
    "detection": ("Write a short story about {topic}.", {"topic": "a lighthouse keeper"}),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_subparsers(dest="what", required=True, metavar="WHAT")
    pack = what.add_parser("pack", help="write a minimal pack: pack.toml, one example case, README.md")
    pack.add_argument("name", metavar="NAME", help="the pack's name: lower-case letters, digits, underscores")
    pack.add_argument("--grader", default="contains", choices=sorted(EXAMPLES),
                      help="the built-in grader (default contains); see docs/packs.md")
    pack.add_argument("--dir", default="packs", metavar="DIR", help="folder the pack goes in (default packs/)")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    if not NAME.fullmatch(args.name):
        raise EvalrunError(f"evalrun new pack {args.name!r}: a pack name is lower-case letters, digits and "
                           "underscores, starting with a letter (at most 64)")
    GRADERS.get(args.grader)  # registered, as the loader will check
    folder = Path(args.dir) / args.name
    if folder.exists():
        raise EvalrunError(f"--dir {args.dir}: {folder} already exists; choose another NAME or --dir")
    template, fields = EXAMPLES[args.grader]
    detection = args.grader == "detection"
    lines = [f'name = "{args.name}"', 'version = "0.1"',
             f'description = "What {args.name} measures, in a sentence or two."',
             f"prompt_template = {json.dumps(template)}", f'grader = "{args.grader}"']
    if detection:
        lines += ["detection_threshold = 0.02", "pass_score = 0.0"]
    write_text(folder / "pack.toml", "\n".join(lines) + "\n", what="--dir")
    write_text(folder / "cases" / "example-1.json", json.dumps({"id": "example-1", **fields}, indent=1) + "\n",
               what="--dir")
    write_text(folder / "README.md", f"# {args.name}\n\nWhat this pack measures, where its cases come from, and "
               f"how to read its scores.\n\nGrader: `{args.grader}` (docs/packs.md, \"Built-in graders\"). Add a "
               "case by dropping a JSON file into `cases/`.\n", what="--dir")
    dirs = f" --packs-dir {args.dir}" if Path(args.dir) != Path("packs") else " --packs-dir packs"
    model = ("--model embedded --watermark kgw:gamma=0.5,delta=2 --key \"$(evalrun key new)\"" if detection
             else "--model reference" if GRADERS.get(args.grader).solve is not None
             else "--model replay:outputs.jsonl  # {\"pack\", \"case_id\", \"output\"} per line")
    print(f"wrote {folder}/: pack.toml, cases/example-1.json, README.md")
    print("try it:")
    print(f"  evalrun validate{dirs} --pack {args.name}")
    print(f"  evalrun run{dirs} --pack {args.name} {model}")
    print(f"  pytest {folder} -k {args.name}")
    return 0
