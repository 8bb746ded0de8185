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


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    path = build_report(args.db, args.out, run_id=args.run)
    print(f"report written: {path} (and report.html, metrics.json, charts) in {Path(args.out)}")
    return 0
