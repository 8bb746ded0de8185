"""``evalrun validate``: check the packs' case files, golden grader examples and reference
solvers: everything that would otherwise fail at run time (pack.toml's keys, types and ranges,
case ids and duplicates, the fields the prompt template and a built-in grader read).

Packs are named as for ``evalrun run`` (``--pack NAME``, repeatable) or positionally; none:
every pack on the search path."""

from __future__ import annotations

import argparse

from evalrun._util.errors import EvalrunError
from evalrun.pack.loading import discover_packs, load_pack, resolve_pack


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("packs", nargs="*", metavar="PACK", help="pack name or directory (as --pack)")
    parser.add_argument("--pack", action="append", default=[], metavar="PACK", dest="pack_options",
                        help="pack name (see `evalrun list`) or directory; repeatable (default: every pack)")
    parser.add_argument("--packs-dir", action="append", default=[], metavar="DIR")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    names = [*args.packs, *args.pack_options] or sorted(discover_packs(args.packs_dir))
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
