"""``evalrun export``: the results of a database as CSV or JSON lines (one row per result),
with the aggregates beside them."""

from __future__ import annotations

import argparse

from evalrun.report.export import export_metrics_path, export_results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True)
    parser.add_argument("--format", required=True, help="csv or jsonl")
    parser.add_argument("--out", required=True)
    parser.add_argument("--run", help="only this run id")
    parser.add_argument("--raw-csv", action="store_true",
                        help="write CSV cells as stored: by default a cell starting with =, +, -, @, tab or carriage "
                             "return gets a leading ' so that a spreadsheet shows it instead of running it as a "
                             "formula (turn that off for programs reading the file)")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    n = export_results(args.db, args.format, args.out, run_id=args.run, formulas_guarded=not args.raw_csv)
    print(f"exported {n} results to {args.out} (aggregates: {export_metrics_path(args.out)})")
    return 0
