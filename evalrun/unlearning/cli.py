"""``evalrun watermark-data`` and ``evalrun unlearning demo`` (registered from
:mod:`evalrun.cli.main`, parsed here so the core CLI stays small)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from evalrun._util.errors import EvalrunError
from evalrun.model.providers import model_argument
from evalrun.unlearning.compare import run_compare
from evalrun.unlearning.data import load_owners, watermark_data
from evalrun.unlearning.demo import DEFAULT_ALGORITHMS, run_demo
from evalrun.unlearning.finetune import ALGORITHMS, DISTINCT
from evalrun.unlearning.owner_watermarks import TABLE4
from evalrun.watermark.key_strength import warn_if_weak
from evalrun.watermark.registry import KEY_ENV

COMMANDS = ("watermark-data", "unlearning")


def _secret(args: argparse.Namespace) -> str | None:
    secret = args.key or os.environ.get(KEY_ENV) or None
    warn_if_weak(secret, from_option=bool(args.key))
    return secret


def watermark_data_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evalrun watermark-data", allow_abbrev=False,
                                description="Watermark each owner's data with Waterfall under "
                                "the owner's key (WaterDrum P1), or with another scheme adapted to "
                                "many owners (WaterDrum Table 4: kgw, synthid, exp); resumable.")
    p.add_argument("--watermark", default="waterfall:kappa=2", metavar="SPEC",
                   help="spec of a scheme adapted to many owners: waterfall (default "
                   "waterfall:kappa=2), kgw, synthid or exp (EXP-edit: exp:randomness=fixed,score=edit)")
    p.add_argument("--owners", required=True, metavar="FILE.jsonl",
                   help="one JSON object per line: id, owner (integer), text")
    p.add_argument("--model", required=True, metavar="SPEC", type=model_argument, help="a model with logits: embedded, hf:<dir>, ...")
    p.add_argument("--out", required=True, metavar="FILE.jsonl", help="watermarked records (appended; resumable)")
    p.add_argument("--mode", default="paraphrase", choices=("paraphrase", "continue"),
                   help="paraphrase the text (Waterfall's operator; needs an instruction model) or "
                   "continue its first 12 words (for the embedded model); default paraphrase")
    p.add_argument("--max-tokens", type=int, default=128, help="new tokens per record (default 128)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--key", help="secret from which owner ids are derived (default: "
                   "$EVALRUN_WATERMARK_KEY; none: the owner index is the Waterfall id); never stored")
    return p


def unlearning_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evalrun unlearning", allow_abbrev=False,
                                description="WaterDrum unlearning experiments.")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    demo = sub.add_parser("demo", allow_abbrev=False, help="the whole experiment offline on the embedded model")
    demo.add_argument("--out", required=True, metavar="DIR", help="data, models, store and report go here (resumable)")
    demo.add_argument("--quick", action="store_true", help="4 owners x 12 passages, 2 outputs per query "
                      "(about 10 minutes on 2 CPU cores)")
    demo.add_argument("--similarity", default="none", metavar="SETTING",
                      help="WaterDrum D4's data-similarity setting: none (default), exact (a copy "
                      "of each forget passage in the retain set) or semantic (an offline WordNet "
                      "paraphrase of each); exact and semantic train one more retrained model")
    demo.add_argument("--d4", action="store_true", help="the same as --similarity exact")
    demo.add_argument("--algorithms", default=",".join(DEFAULT_ALGORITHMS), metavar="A,B,...",
                      help="unlearning algorithms applied to the original model, placed on Fig. 4: "
                      f"{', '.join(ALGORITHMS)} (default {','.join(DEFAULT_ALGORITHMS)})")
    demo.add_argument("--seed", type=int, default=0, help="seed of sampling, shuffling and initialisation (default 0)")
    demo.add_argument("--threads", type=int, help="torch threads (default 1: the tiny model gains "
                      "nothing from a second thread on a shared 2-core machine)")
    demo.add_argument("--key", help="secret from which owner ids are derived (default: $EVALRUN_WATERMARK_KEY)")
    cmp_ = sub.add_parser("compare", allow_abbrev=False, help="WaterDrum's Tables 2, 3 and 4 and Fig. 4: "
                          "D1 and D2 of WaterDrum and the baseline metrics in each data-similarity setting, "
                          "of WaterDrum with other watermarks, and the unlearning algorithms")
    cmp_.add_argument("--out", required=True, metavar="DIR", help="data, models, store and report go here (resumable)")
    cmp_.add_argument("--quick", action="store_true", help="4 owners x 12 passages, 2 outputs per query "
                      "(about 12 minutes on 2 shared CPU cores, Table 4 and Fig. 4 included); without "
                      "it 11 owners x 24 passages, 3 outputs per query (the 12th owner's passages are "
                      "the MIA holdout)")
    cmp_.add_argument("--watermarks", default=",".join(TABLE4), metavar="A,B,...",
                      help="Table 4's watermark methods adapted to many owners, run in the no-duplicate "
                      f"setting (default {','.join(TABLE4)}: Waterfall, KGW, SynthID-Text, EXP-edit)")
    cmp_.add_argument("--algorithms", default=",".join(DISTINCT), metavar="A,B,...",
                      help="Fig. 4's unlearning algorithms applied to the no-duplicate original "
                      f"(default {','.join(DISTINCT)})")
    cmp_.add_argument("--seed", type=int, default=0, help="seed of sampling, shuffling and initialisation (default 0)")
    cmp_.add_argument("--threads", type=int, help="torch threads (default 1)")
    cmp_.add_argument("--key", help="secret from which owner ids are derived (default: $EVALRUN_WATERMARK_KEY)")
    return p


def cmd_watermark_data(argv: Sequence[str]) -> int:
    args = watermark_data_parser().parse_args(argv)
    if args.max_tokens < 1:
        raise EvalrunError(f"--max-tokens {args.max_tokens}: must be at least 1")
    records = load_owners(args.owners)

    def progress(done: int, total: int) -> None:
        if done == total or done % 16 == 0:
            print(f"evalrun watermark-data: {done}/{total}", file=sys.stderr)

    lines = watermark_data(records, model=args.model, watermark=args.watermark, out=args.out,
                           secret=_secret(args), mode=args.mode, max_tokens=args.max_tokens,
                           temperature=args.temperature, seed=args.seed, progress=progress)
    q = [line["verification_score"] for line in lines]
    sim = [line["similarity"] for line in lines]
    print(json.dumps({"records": len(lines), "out": args.out,
                      "mean_verification_score": sum(q) / len(q),
                      "mean_similarity": sum(sim) / len(sim)}))
    return 0


def _log(line: str) -> None:
    print(line, file=sys.stderr)


def _demo(args: argparse.Namespace, reports: Mapping[str, Callable[..., dict[str, Any]]]) -> dict[str, Any]:
    return run_demo(Path(args.out), quick=args.quick, secret=_secret(args), d4=args.d4,
                    similarity=args.similarity, algorithms=[a for a in args.algorithms.split(",") if a],
                    seed=args.seed, threads=args.threads, log=_log,
                    write_report=reports["demo"])


def _compare(args: argparse.Namespace, reports: Mapping[str, Callable[..., dict[str, Any]]]) -> dict[str, Any]:
    return run_compare(Path(args.out), quick=args.quick, secret=_secret(args), seed=args.seed,
                       threads=args.threads, watermarks=[w for w in args.watermarks.split(",") if w],
                       algorithms=[a for a in args.algorithms.split(",") if a], log=_log,
                       write_report=reports["compare"])


#: ``evalrun unlearning ACTION``: the function that runs it
ACTIONS: dict[str, Callable[[argparse.Namespace, Mapping[str, Callable[..., dict[str, Any]]]], dict[str, Any]]] = {
    "demo": _demo, "compare": _compare}


def cmd_unlearning(argv: Sequence[str], reports: Mapping[str, Callable[..., dict[str, Any]]]) -> int:
    args = unlearning_parser().parse_args(argv)
    print(json.dumps(ACTIONS[args.action](args, reports), indent=1))
    return 0


def main(argv: Sequence[str], *, write_report: Callable[..., dict[str, Any]],
         write_compare_report: Callable[..., dict[str, Any]] | None = None) -> int:
    """``argv`` starts with the command name (one of :data:`COMMANDS`); ``write_report`` and
    ``write_compare_report`` render the demo's and the comparison's reports
    (:mod:`evalrun.report.unlearning`, passed in by the CLI)."""
    reports = {"demo": write_report}
    if write_compare_report is not None:
        reports["compare"] = write_compare_report
    try:
        if argv[0] == "watermark-data":
            return cmd_watermark_data(argv[1:])
        return cmd_unlearning(argv[1:], reports)
    except EvalrunError as exc:
        print(f"evalrun: error: {exc}", file=sys.stderr)
        return 2
