"""``evalrun judge``: ask a judge model about stored results (the judge stage, by itself)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalrun._util.errors import EvalrunError
from evalrun.judges import get_judge
from evalrun.model.providers import check_model, make_provider, model_argument
from evalrun.run.stages.generate import ProgressBar
from evalrun.run.stages.judge import run_judges, subjects
from evalrun.store.database import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True)
    parser.add_argument("--judge", required=True, metavar="SPEC", type=model_argument, help="the judge model (any --model spec)")
    parser.add_argument("--method", required=True, help="judging method (registered judges: rating, ...)")
    parser.add_argument("--run", help="only the results this run covered")
    parser.add_argument("--retry-unparsed", action="store_true", help="ask again where the answer did not parse")
    parser.add_argument("--base-url", help="OpenAI-compatible server of the judge (default: $OPENAI_BASE_URL)")
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent judge requests (default 32)")
    parser.add_argument("--baseline", metavar="SPEC",
                        help="pairwise/simple: the watermark each result is compared with (default none: "
                             "the unwatermarked result of the same case, model, attack and repetition)")
    parser.add_argument("--both-orders", action="store_true",
                        help="pairwise/simple: ask every pair in both orders (measures position bias) "
                             "instead of the one a seeded coin picks")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    judge = get_judge(args.method).configured(baseline=args.baseline, both_orders=args.both_orders)
    check_model(args.judge)
    if args.concurrency < 1:
        raise EvalrunError(f"--concurrency {args.concurrency}: must be at least 1")
    if not Path(args.db).exists():
        raise EvalrunError(f"--db {args.db}: no such database")
    with Store(args.db, what="--db") as store:
        if args.run is not None and args.run not in store.run_ids():
            raise EvalrunError(f"--run {args.run}: not in {args.db}; runs: {', '.join(store.run_ids())}")
        selection = subjects(store, args.run)
        summary = run_judges(
            store, judge, args.judge,
            lambda spec: make_provider(spec, base_url=args.base_url, concurrency=args.concurrency),
            run_id=args.run, selection=selection, retry_unparsed=args.retry_unparsed,
            progress=ProgressBar("evalrun: judging", stream=sys.stderr))
    print(f"judged {len(selection)} results with {args.method} by {args.judge}: {summary.asked} asked, "
          f"{summary.cached} already answered, {summary.errors} failed calls, {summary.unparsed} unparsed answers")
    return 0
