"""``evalrun regrade``: re-run the current graders on stored outputs (no model calls)."""

from __future__ import annotations

import argparse
import os
import sys

from evalrun.run.regrade import regrade
from evalrun.watermark.key_strength import warn_if_weak
from evalrun.watermark.registry import KEY_ENV


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True)
    parser.add_argument("--run", help="only this run id")
    parser.add_argument("--packs-dir", action="append", default=[], metavar="DIR")
    parser.add_argument("--key", help="watermark key for scheme graders (default: $EVALRUN_WATERMARK_KEY)")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    warn_if_weak(args.key or os.environ.get(KEY_ENV), from_option=bool(args.key))
    summary = regrade(args.db, run_id=args.run, packs_dirs=args.packs_dir,
                      key=args.key or os.environ.get(KEY_ENV))
    for name, why in summary.missing_packs.items():
        print(f"evalrun: pack {name} not regraded: {why}", file=sys.stderr)
    for pack, case_id, model, old, new in summary.changes[:50]:
        print(f"changed: {pack}/{case_id} [{model}]: {old} -> {new}")
    for error in summary.grader_errors[:50]:
        print(f"grader error: {error}")
    print(f"regraded {summary.regraded} results, {summary.changed} changed, "
          f"{len(summary.grader_errors)} grader errors, {summary.skipped_errors} without output skipped")
    return 0
