"""``evalrun export``: the results of a database as CSV or JSON lines (one row per result),
with the aggregates beside them."""

from __future__ import annotations

import argparse

from evalrun.metrics.aggregates import metrics_path_beside
from evalrun.report.export import export_results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True)
    parser.add_argument("--format", required=True, help="csv or jsonl")
    parser.add_argument("--out", required=True)
    parser.add_argument("--run", help="only this run id")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    n = export_results(args.db, args.format, args.out, run_id=args.run)
    print(f"exported {n} results to {args.out} (aggregates: {metrics_path_beside(args.out)})")
    return 0
