"""``evalrun report``: render the Markdown and HTML report, metrics.json and the charts of a
results database."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalrun.report import build_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--run", help="only this run id")
    parser.add_argument("--packs-dir", action="append", default=[], metavar="DIR",
                        help="more folders holding packs (repeatable), where a pack's pack.toml may name "
                             "its report view; the shipped packs and $EVALRUN_PACKS are searched too")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    path = build_report(args.db, args.out, run_id=args.run, packs_dirs=args.packs_dir)
    print(f"report written: {path} (and report.html, metrics.json, charts) in {Path(args.out)}")
    return 0
