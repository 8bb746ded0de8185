"""``evalrun validate``: check the packs' case files, golden grader examples and reference
solvers."""

from __future__ import annotations

import argparse

from evalrun._util.errors import EvalrunError
from evalrun.pack.loading import discover_packs, load_pack, resolve_pack


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("packs", nargs="*", metavar="PACK")
    parser.add_argument("--packs-dir", action="append", default=[], metavar="DIR")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    names = args.packs or sorted(discover_packs(args.packs_dir))
    if not names:
        raise EvalrunError("no packs found on the search path")
    failed = False
    for name in names:
        try:
            pack = load_pack(resolve_pack(name, args.packs_dir))
        except EvalrunError as exc:  # this pack only: the others are still checked
            print(f"{name}: FAIL -- cannot be loaded\n  {exc}")
            failed = True
            continue
        problems = [f"invalid case: {e}" for e in pack.case_errors]
        problems += pack.check_golden()
        reference_problems = pack.check_reference()
        problems += reference_problems
        golden = len(pack.golden())
        ref = ("no reference solver" if not pack.has_reference else
               f"reference FAILED on {len(reference_problems)} case(s)" if reference_problems else "reference ok")
        status = "FAIL" if problems else "ok"
        print(f"{pack.name}: {status} -- {len(pack.cases)} cases, {golden} golden examples, {ref}")
        for p in problems:
            print(f"  {p}")
        failed = failed or bool(problems)
    return 1 if failed else 0
