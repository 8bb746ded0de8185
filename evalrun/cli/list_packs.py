"""``evalrun list``: the packs on the search path, one row each."""

from __future__ import annotations

import argparse
from collections import Counter

from tabulate import tabulate

from evalrun._util.errors import EvalrunError
from evalrun.pack.loading import discover_packs, load_pack


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--packs-dir", action="append", default=[], metavar="DIR")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    """The packs that load, then those that do not with their reason: one broken pack on the
    search path does not hide the others. Exit 0 when every pack loads, 1 otherwise."""
    rows, broken = [], []
    for name, path in sorted(discover_packs(args.packs_dir).items()):
        try:
            pack = load_pack(path)
        except EvalrunError as exc:
            broken.append([name, str(exc)])
            continue
        groups = Counter(pack.group_of(c.data) for c in pack.cases) if pack.group_field else Counter()
        rows.append([pack.name, pack.version, len(pack.cases),
                     ", ".join(f"{g} {n}" for g, n in sorted(groups.items())) or "-",
                     "yes" if pack.has_reference else "no", len(pack.case_errors), str(path)])
    print(tabulate(rows, headers=["pack", "version", "cases", "families / schemes", "reference",
                                  "invalid cases", "path"]))
    if broken:
        print(f"\n{len(broken)} pack(s) cannot be loaded:")
        print(tabulate(broken, headers=["pack", "problem"]))
    return 1 if broken else 0
