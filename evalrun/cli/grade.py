"""``evalrun grade``: grade outputs produced elsewhere against a pack: ``evalrun run`` with a
replay file (``--outputs``) as the model."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalrun.cli.common import add_run_options
from evalrun.cli.run import run_packs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_options(parser, with_model=False)
    parser.add_argument("--outputs", required=True, metavar="FILE.jsonl",
                        help="one JSON object per line: case_id, output (and pack when several)")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    return run_packs(args, user_argv, [f"replay:{Path(args.outputs).resolve()}"])
