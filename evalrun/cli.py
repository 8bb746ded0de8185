"""The ``evalrun`` command. ``run`` is a thin wrapper over pytest with the evalrun plugin;
the other commands read or re-grade a results database, or inspect packs."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Sequence

from evalrun import __version__
from evalrun.allocator import tune_allocator
from evalrun.errors import EvalrunError

EXIT_USAGE = 2
#: `evalrun run` only runs pack items, which neither assert nor print nor log: pytest's
#: assertion rewriting (of the whole evalrun distribution), output capture and unrelated
#: plugins cost ~1 ms per item and several seconds of start-up (benchmarks/bench_harness.py).
LEAN_PYTEST = ["--assert=plain", "--capture=no", "-p", "no:cacheprovider", "-p", "no:logging",
               "-p", "no:warnings", "-p", "no:faulthandler", "-p", "no:hypothesispytest",
               "-p", "no:benchmark", "-p", "no:anyio"]


def _add_run_options(p: argparse.ArgumentParser, *, with_model: bool = True) -> None:
    p.add_argument("--pack", action="append", required=True, metavar="PACK",
                   help="pack name (see `evalrun list`) or directory; repeatable")
    if with_model:
        p.add_argument("--model", action="append", metavar="SPEC",
                       help="model spec, repeatable: embedded (default), reference, openai:<name>, "
                            "hf:<path>, vllm:<path>, replay:<file.jsonl>")
    p.add_argument("--watermark", action="append", metavar="SPEC", help="watermark spec, repeatable (default none)")
    p.add_argument("--attack", action="append", metavar="SPEC", help="attack spec, repeatable (default none)")
    p.add_argument("--key", help="secret watermark key (default: $EVALRUN_WATERMARK_KEY); never stored")
    p.add_argument("--n", type=int, default=1, help="repetitions per case (default 1)")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: the pack's)")
    p.add_argument("--max-tokens", type=int, help="max new tokens (default: the pack's)")
    p.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    p.add_argument("--out", default="results.sqlite", help="results database (default results.sqlite)")
    p.add_argument("--base-url", help="OpenAI-compatible server (default: $OPENAI_BASE_URL)")
    p.add_argument("--concurrency", type=int, default=32, help="concurrent API requests per model (default 32; lowered automatically on HTTP 429)")
    p.add_argument("--packs-dir", action="append", default=[], metavar="DIR", help="extra pack directory")
    p.add_argument("--select", "-k", metavar="EXPR", help="pytest -k expression selecting items")
    p.add_argument("--workers", type=int, default=0, help="pytest-xdist worker processes for grading")
    p.add_argument("--fail-under", type=float, metavar="SCORE",
                   help="exit 1 when the run's mean score is below SCORE (default: exit 0 whatever the scores)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("pytest_args", nargs="*", help="arguments after -- go to pytest")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalrun", description=__doc__, allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"evalrun {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", allow_abbrev=False, help="run packs against models and store every result")
    _add_run_options(run)

    grade = sub.add_parser("grade", allow_abbrev=False, help="grade outputs produced elsewhere (replay file) against a pack")
    _add_run_options(grade, with_model=False)
    grade.add_argument("--outputs", required=True, metavar="FILE.jsonl",
                       help="one JSON object per line: case_id, output (and pack when several)")

    report = sub.add_parser("report", allow_abbrev=False, help="render Markdown + HTML report and charts from a database")
    report.add_argument("--db", required=True)
    report.add_argument("--out", required=True, help="output directory")
    report.add_argument("--run", help="only this run id")

    export = sub.add_parser("export", allow_abbrev=False, help="export results as CSV or JSONL (one row per result)")
    export.add_argument("--db", required=True)
    export.add_argument("--format", required=True, help="csv or jsonl")
    export.add_argument("--out", required=True)
    export.add_argument("--run", help="only this run id")

    regrade = sub.add_parser("regrade", allow_abbrev=False, help="re-run current graders on stored outputs (no model calls)")
    regrade.add_argument("--db", required=True)
    regrade.add_argument("--run", help="only this run id")
    regrade.add_argument("--packs-dir", action="append", default=[], metavar="DIR")
    regrade.add_argument("--key", help="watermark key for scheme graders (default: $EVALRUN_WATERMARK_KEY)")

    validate = sub.add_parser("validate", allow_abbrev=False, help="check case files, golden grader examples and reference solvers")
    validate.add_argument("packs", nargs="*", metavar="PACK")
    validate.add_argument("--packs-dir", action="append", default=[], metavar="DIR")

    lst = sub.add_parser("list", allow_abbrev=False, help="list packs on the search path")
    lst.add_argument("--packs-dir", action="append", default=[], metavar="DIR")

    sub.add_parser("detect", allow_abbrev=False, help="detect a watermark in a text or token ids (see `evalrun detect -h`)",
                   add_help=False)
    return parser


def _pytest_args(args: argparse.Namespace, models: list[str], run_id: str,
                 user_argv: list[str] | None = None) -> list[str]:
    from evalrun.pack import resolve_pack

    pack_dirs = [str(resolve_pack(p, args.packs_dir)) for p in args.pack]
    # Low scores are results, not errors: show the summary table, not one block per item
    # (`-- --tb=short -rf` brings those back; the report has the failure analysis).
    # -qq: the closing line is evalrun's summary, not pytest's "N failed" (-v brings it back)
    out = [*dict.fromkeys(pack_dirs), "-qq", "--tb=no", "-rN", *LEAN_PYTEST,
           "--evalrun-db", str(Path(args.out).resolve()),
           "--evalrun-run-id", run_id, "--evalrun-n", str(args.n), "--evalrun-seed", str(args.seed),
           "--evalrun-concurrency", str(args.concurrency)]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        out += ["-p", "evalrun.plugins.pytest_plugin"]
    for m in models:
        out += ["--evalrun-model", m]
    for w in args.watermark or []:
        out += ["--evalrun-watermark", w]
    for a in args.attack or []:
        out += ["--evalrun-attack", a]
    out += ["--evalrun-argv", json.dumps(["evalrun", *sys.argv[1:]] if user_argv is None else user_argv)]
    if args.temperature is not None:
        out += ["--evalrun-temperature", str(args.temperature)]
    if args.max_tokens is not None:
        out += ["--evalrun-max-tokens", str(args.max_tokens)]
    if args.base_url:
        out += ["--evalrun-base-url", args.base_url]
    if args.select:
        out += ["-k", args.select]
    if args.workers:
        out += ["-n", str(args.workers)]
    if args.no_progress:
        out += ["--evalrun-no-progress"]
    return out + list(args.pytest_args)


def _check_run_args(args: argparse.Namespace, models: list[str]) -> None:
    """Fail fast, before pytest starts, on anything the user can fix."""
    from evalrun.attacks import parse_attack
    from evalrun.pack import resolve_pack
    from evalrun.plan import RunOptions, check_options
    from evalrun.plugins.providers import check_model, check_watermark_support
    from evalrun.store import check_store_path
    from evalrun.watermark import parse_watermark

    for p in args.pack:
        resolve_pack(p, args.packs_dir)
    for m in models:
        check_model(m)
        check_watermark_support(m, args.watermark or [])
    for w in args.watermark or []:
        parse_watermark(w)
    for a in args.attack or []:
        parse_attack(a)
    check_options(RunOptions(models=tuple(models), watermarks=tuple(args.watermark or ["none"]), n=args.n,
                             temperature=args.temperature, max_tokens=args.max_tokens, key=args.key))
    if args.workers < 0:
        raise EvalrunError(f"--workers {args.workers}: must be >= 0")
    if args.concurrency < 1:
        raise EvalrunError(f"--concurrency {args.concurrency}: must be >= 1")
    if args.fail_under is not None and not 0.0 <= args.fail_under <= 1.0:
        raise EvalrunError(f"--fail-under {args.fail_under}: must be a score in [0, 1]")
    check_store_path(args.out, what="--out", write=True)  # last: nothing is created before it


def cmd_run(args: argparse.Namespace, models: list[str], user_argv: list[str] | None = None) -> int:
    import pytest

    _check_run_args(args, models)
    from evalrun.plan import KEY_ENV

    run_id = uuid.uuid4().hex
    if args.key:  # handed over in-process, never on a command line that `ps` could show
        os.environ[KEY_ENV] = args.key
    from evalrun.plugins.pytest_plugin import SummarySink

    sink = SummarySink()
    code = int(pytest.main(_pytest_args(args, models, run_id, user_argv), plugins=[sink]))
    for line in sink.lines:  # after everything pytest printed
        print(line)
    # 0: all passed, 1: some items below the pass score -- both are a completed run.
    if code not in (0, 1):
        if code == 4:  # pytest usage error: the plugin already printed the one-line reason
            return EXIT_USAGE
        if code == 5:
            print("evalrun: error: no items selected (check --pack and --select)", file=sys.stderr)
        return code
    if args.fail_under is not None and (sink.mean is None or sink.mean < args.fail_under):
        shown = "n/a" if sink.mean is None else f"{sink.mean:.4f}"
        print(f"evalrun: mean score {shown} is below --fail-under {args.fail_under}", file=sys.stderr)
        return 1
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from evalrun.pack import discover_packs, load_pack, resolve_pack

    names = args.packs or sorted(discover_packs(args.packs_dir))
    if not names:
        raise EvalrunError("no packs found on the search path")
    failed = False
    for name in names:
        pack = load_pack(resolve_pack(name, args.packs_dir))
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


def cmd_list(args: argparse.Namespace) -> int:
    from collections import Counter

    from tabulate import tabulate

    from evalrun.pack import discover_packs, load_pack

    rows = []
    for name, path in sorted(discover_packs(args.packs_dir).items()):
        pack = load_pack(path)
        groups = Counter(pack.group_of(c.data) for c in pack.cases) if pack.group_field else Counter()
        rows.append([pack.name, pack.version, len(pack.cases),
                     ", ".join(f"{g} {n}" for g, n in sorted(groups.items())) or "-",
                     "yes" if pack.has_reference else "no", len(pack.case_errors), str(path)])
    print(tabulate(rows, headers=["pack", "version", "cases", "families / schemes", "reference",
                                  "invalid cases", "path"]))
    return 0


def cmd_regrade(args: argparse.Namespace) -> int:
    from evalrun.plan import KEY_ENV
    from evalrun.regrade import regrade

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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    tune_allocator()
    if argv and argv[0] == "detect":
        from evalrun.detect import detect_main

        return detect_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args, args.model or ["embedded"], ["evalrun", *argv])
        if args.command == "grade":
            return cmd_run(args, [f"replay:{Path(args.outputs).resolve()}"], ["evalrun", *argv])
        if args.command == "report":
            from evalrun.report import build_report

            path = build_report(args.db, args.out, run_id=args.run)
            print(f"report written: {path} (and report.html, charts) in {Path(args.out)}")
            return 0
        if args.command == "export":
            from evalrun.export import export_results

            n = export_results(args.db, args.format, args.out, run_id=args.run)
            print(f"exported {n} results to {args.out}")
            return 0
        if args.command == "regrade":
            return cmd_regrade(args)
        if args.command == "validate":
            return cmd_validate(args)
        if args.command == "list":
            return cmd_list(args)
    except EvalrunError as exc:
        print(f"evalrun: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
