"""``evalrun run``: a thin wrapper over pytest with the evalrun plugin, which runs the packs'
items and stores every result. ``evalrun grade`` (:mod:`evalrun.cli.grade`) is the same run
with a replay file as the model."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from evalrun._util.display import show_controls
from evalrun._util.errors import EvalrunError
from evalrun.cli.common import add_run_options, project_config
from evalrun.cli.main import EXIT_USAGE
from evalrun.model.providers import check_model, check_watermark_support
from evalrun.pack.loading import NO_SOLVER, load_pack, resolve_pack
from evalrun.plugins.pytest_plugin import SummarySink
from evalrun.plugins.run_terminal import RunTerminal
from evalrun.run.executors import EXECUTORS
from evalrun.run.options import BY_NAME, pytest_args_for, resolve, run_options
from evalrun.store.database import Store, check_store_path, run_status
from evalrun.watermark.key_strength import warn_if_weak
from evalrun.watermark.registry import KEY_ENV

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_options(parser)


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    return run_packs(args, user_argv)


def _pytest_args(args: argparse.Namespace, values: dict, run_id: str, user_argv: list[str]) -> list[str]:
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
    cli = {name: getattr(args, name, None) for name in BY_NAME}
    if models is not None:  # `grade`: the replay file is the model
        cli["models"] = models
    values = resolve(cli, project_config())
    # a named pack that cannot be loaded is one line now, before any store exists
    packs = [load_pack(resolve_pack(p, values["packs_dirs"] or [])) for p in args.pack]
    options = run_options(values, default_models=("embedded",))
    values["models"] = [str(m) for m in options.models]
    values["model_args"] = None  # merged into each model's spec
    values["watermarks"] = list(options.watermarks)  # a replay file's own, when none is given
    for m in options.models:
        check_model(m)
        note = check_watermark_support(m, options.watermarks, elsewhere=True)
        if note:
            print(f"evalrun: {note}", file=sys.stderr)
    if any(m.name == "reference" for m in options.models):
        for pack in packs:
            if not pack.has_reference:
                raise EvalrunError(f"--model reference: pack {pack.name} has {NO_SOLVER}; name another model "
                                   "with --model, e.g. a replay file (replay:outputs.jsonl)")
    report = values["report"]
    if report and Path(report).exists() and not Path(report).is_dir():
        raise EvalrunError(f"--report {report}: exists and is not a directory")
    check_store_path(values["db"], what="--out", write=True)
    db = Path(values["db"])
    if db.is_file():
        with db.open("rb") as fh:
            version = fh.read(100)[60:64]
        if version.strip(b"\0"):  # a store already (schema version > 0): damaged pages are one line now
            Store(db, readonly=True, what="--out").close()
    return values


#: exit status of a run that failed (an internal error, a full disk, items that never reached
#: grading) and of one stopped by Ctrl-C or a signal (128 + SIGINT, as shells report it)
EXIT_FAILED = 3
EXIT_INTERRUPTED = 130
#: 128 + SIGTERM: a run stopped by SIGTERM (a scheduler, ``kill``), recorded interrupted
EXIT_TERMINATED = 143


def run_ending(db: str | Path, run_id: str) -> tuple[str, str | None] | None:
    """(status, reason) the store recorded for ``run_id``, or None when it holds no such run."""
    if not Path(db).is_file():
        return None
    try:
        store = Store(db, readonly=True)
    except EvalrunError:
        return None
    try:
        run = next((r for r in store.runs() if r["run_id"] == run_id), None)
        if run is None:
            return None
        reason = run["reason"] if "reason" in run.keys() else None
        return run_status(dict(run)), reason
    finally:
        store.close()


def _usage(message: str, raise_usage: bool) -> int:
    """A usage error found once pytest ran: one line and exit 2, or raised for the Python API."""
    if raise_usage:
        raise EvalrunError(message)
    print(f"evalrun: error: {show_controls(message)}", file=sys.stderr)
    return EXIT_USAGE


def run_packs(args: argparse.Namespace, user_argv: list[str], models: list[str] | None = None, *,
              run_id: str | None = None, raise_usage: bool = False) -> int:
    """Run the packs of ``args`` under pytest (``models``: instead of the command line's) as
    run ``run_id`` (default: a new one); ``raise_usage``: usage errors found inside pytest are
    raised as :class:`EvalrunError` instead of printed (exit 2)."""
    values = _run_values(args, models)
    before = os.environ.get(KEY_ENV)
    if values["key"]:  # handed over in-process, never on a command line that `ps` could show
        os.environ[KEY_ENV] = values["key"]
    try:
        return _run_session(args, values, user_argv, run_id or uuid.uuid4().hex, raise_usage)
    finally:  # the caller's environment as it was (an in-process caller runs on: a notebook, a test)
        if before is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = before


def _run_session(args: argparse.Namespace, values: dict, user_argv: list[str], run_id: str, raise_usage: bool) -> int:
    """The pytest session of :func:`run_packs`, its closing lines, report and exit status."""
    warn_if_weak(os.environ.get(KEY_ENV), from_option=bool(values["key"]))
    sink = SummarySink()
    sink.report_follows = bool(values["report"])
    terminal = RunTerminal(progress=not values["no_progress"])
    code = int(pytest.main(_pytest_args(args, values, run_id, user_argv), plugins=[sink, terminal]))
    for line in sink.lines:  # after everything pytest printed
        print(show_controls(line))
    for line in sink.error_lines:
        print(show_controls(line), file=sys.stderr)
    if code == pytest.ExitCode.INTERRUPTED and sink.usage_error:  # collection stopped on one of evalrun's errors
        return _usage(sink.usage_error, raise_usage)
    if sink.problems:  # the selected packs produced nothing to run: say why, never exit 0
        for problem in sink.problems[:-1]:
            print(f"evalrun: error: {show_controls(problem)}", file=sys.stderr)
        return _usage(sink.problems[-1], raise_usage)
    ending = sink.ending or run_ending(values["db"], run_id)
    if ending is not None and ending[0] != "finished":
        status, reason = ending
        print(f"evalrun: {'error: ' if status == 'failed' else ''}run {run_id} {status}: {show_controls(str(reason))}",
              file=sys.stderr)
        if status == "failed":
            return EXIT_FAILED
        return EXIT_TERMINATED if sink.stop_signal == "SIGTERM" else EXIT_INTERRUPTED
    if values["report"] and code in (0, 1):
        # evalrun.report loads matplotlib (~1 s): only for a run that asks for a report
        from evalrun.report import build_report

        # a pack named by its path is found by its folder: its pack.toml may choose a report view
        folders = [str(resolve_pack(p, values["packs_dirs"] or []).parent) for p in (args.pack or [])]
        path = build_report(values["db"], values["report"], run_id=run_id,
                            packs_dirs=[*(values["packs_dirs"] or []), *dict.fromkeys(folders)])
        print(f"evalrun: report: {path} (and report.html, metrics.json, charts in {Path(values['report'])})")
    # 0: all passed, 1: some items below the pass score -- both are a completed run.
    if code not in (0, 1):
        if code == 4:  # a usage error: one line, said here (or by pytest when it found it itself)
            if sink.usage_error:
                return _usage(sink.usage_error, raise_usage)
            return EXIT_USAGE
        if code == 5:
            if raise_usage:
                raise EvalrunError("no items selected (check pack, cases and select)")
            print("evalrun: error: no items selected (check --pack, --cases and --select)", file=sys.stderr)
        return code
    fail_under = values["fail_under"]
    if fail_under is not None and (sink.mean is None or sink.mean < fail_under):
        shown = "n/a" if sink.mean is None else f"{sink.mean:.4f}"
        print(f"evalrun: mean score {shown} is below --fail-under {fail_under}", file=sys.stderr)
        return 1
    return 0
