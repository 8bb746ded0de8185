"""pytest plugin: packs become test items; a generation phase fills the store first.

Every ``pack.toml`` that pytest walks into (or that ``evalrun run`` points it at) becomes a
collector yielding one item per (case, model, watermark, attack, repetition). After
collection and ``-k`` selection, all model calls of the selected items are made once --
batched and concurrent inside each provider -- and stored; each item then grades its stored
output. Under pytest-xdist the first worker to take the store's lock generates for everyone
and the others find the outputs stored, so no call is made twice and no row is duplicated.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import signal
import sqlite3
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pytest

from evalrun._util.display import show_controls
from evalrun._util.errors import CaseError, EvalrunError, PackError
from evalrun._util.provenance import collect as collect_provenance
from evalrun._util.scrub import scrub
from evalrun._util.specs import is_none
from evalrun.metrics.aggregates import case_means, compute, graded, metrics_path_beside, write_metrics_json
from evalrun.metrics.judgements import with_judgements
from evalrun.model.generation import Provider
from evalrun.model.providers import ModelSpec, check_model, check_watermark_support, make_provider
from evalrun.pack.grade import Grade
from evalrun.pack.loading import NO_SOLVER, Pack, load_pack
from evalrun.plugins.item_protocol import lean_allowed, run_lean
from evalrun.run.executors import make_executor
from evalrun.run.options import (
    OPTIONS,
    RunOptions,
    add_pytest_options,
    resolve,
    run_options,
)
from evalrun.run.pipeline import is_gradable, run_stages
from evalrun.run.plan import Item, make_items
from evalrun.run.stages.grade import grade_into
from evalrun.store.commit_batch import CommitBatch
from evalrun.store.database import ATTACK_ERROR, GRADER_ERROR, GradeRecord, Store
from evalrun.watermark.naming import short_names
from evalrun.watermark.verdict import DETECTED, NOT_DETECTED

#: the pack's reference solver, the default model under plain pytest
REFERENCE = ModelSpec("reference")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: where results go when no --out / --evalrun-db / [tool.evalrun] db is given: the same file
#: name as `evalrun run`'s default (there relative to the working directory, here to the rootdir)
DEFAULT_DB = "results.sqlite"
STATE_KEY = pytest.StashKey["EvalrunState"]()
#: the signal that stopped the session, by name (``SIGTERM``); absent for Ctrl-C
STOP_SIGNAL_KEY = pytest.StashKey[str]()
#: stored rows read in one query ahead of grading (EvalrunState.stored_row)
ROWS_AHEAD = 256


@dataclass
class EvalrunState:
    """Per-session plugin state (kept on the config so in-process pytest runs don't mix)."""

    options: RunOptions
    db: Path
    run_id: str
    argv: list[str]
    packs_dirs: list[str]
    progress: bool = True
    #: how the user named the store: ``--out`` under ``evalrun run``, else ``--evalrun-db``
    db_option: str = "--evalrun-db"
    is_worker: bool = False
    #: the process that ends the run (the xdist controller): a live one means still running
    controller_pid: int = field(default_factory=os.getpid)
    #: (kind of item, pack, nodeid, failure text) of every finished item, for the summary
    outcomes: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: whether this process told the run how many results grading makes (:data:`GRADING_TOTAL`)
    total_announced: bool = False
    _store: Store | None = None
    #: grades on their way to the store: each committed at once, unless --commit-ms groups
    #: them (grading is redone by every run, so a kill then loses nothing that costs a model
    #: call); flushed when the session ends, interrupted or not
    _grades: CommitBatch[GradeRecord] | None = None
    packs: dict[Path, Pack] = field(default_factory=dict)
    #: whether case items take the lean protocol (:mod:`evalrun.plugins.item_protocol`);
    #: decided at the first item, once the session's plugins are all registered
    lean: bool | None = None
    #: the case items' keys in run order (their position), and stored rows read ahead of
    #: grading: one query per ROWS_AHEAD items instead of one per item
    order: list[str] = field(default_factory=list)
    position: dict[str, int] = field(default_factory=dict)
    ahead: dict[str, Any] = field(default_factory=dict)

    def stored_row(self, item_key: str) -> Any:
        """The item's stored result row (None if there is none). Rows are complete once the
        generation, transform and judge stages are over, and grading changes only an item's
        own row, after reading it: a row read ahead is the row as it would be read now."""
        row = self.ahead.pop(item_key, None)
        if row is not None:
            return row
        at = self.position.get(item_key)
        if at is None:
            return self.store().result_by_key(item_key)
        self.ahead = self.store().results_by_keys(self.order[at:at + ROWS_AHEAD])
        return self.ahead.pop(item_key, None)

    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.db, what=self.db_option, background_checkpoints=True)
        return self._store

    def grades(self) -> CommitBatch[GradeRecord]:
        if self._grades is None:
            self._grades = CommitBatch(self.store().record_grades, budget_ms=self.options.commit_ms)
        return self._grades

    def flush(self) -> None:
        if self._grades is not None:
            self._grades.flush()

    def close(self) -> None:
        if self._store is not None:
            self.flush()
            self._store.close()
            self._store = None


# -- options ------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser.getgroup("evalrun", "evalrun: run packs against models"))


def _tool_config(config: pytest.Config) -> tuple[dict[str, Any], str]:
    """``[tool.evalrun]`` of the rootdir's pyproject.toml (if any) and where it is."""
    path = Path(config.rootpath) / "pyproject.toml"
    where = f"{path} [tool.evalrun]"
    if not path.is_file():
        return {}, where
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise pytest.UsageError(f"{path}: invalid TOML: {exc}") from None
    section = data.get("tool", {}).get("evalrun", {})
    if not isinstance(section, dict):
        raise pytest.UsageError(f"{where} must be a table")
    return section, where


def _build_state(config: pytest.Config) -> EvalrunState:
    try:
        tool, where = _tool_config(config)
        cli = {o.name: getattr(config.option, o.dest, None) for o in OPTIONS if o.pytest}
        values = resolve(cli, tool, tool_path=where, flag=lambda o: o.pytest_flag)
        return _state_from(config, values)
    except EvalrunError as exc:
        raise pytest.UsageError(str(exc)) from None


def _state_from(config: pytest.Config, values: dict[str, Any]) -> EvalrunState:
    options = run_options(values, default_models=("reference",))
    for model in options.models:
        check_model(model)
        check_watermark_support(model, options.watermarks, elsewhere=True)
    workerinput = getattr(config, "workerinput", None)
    db = Path(values["db"])
    if not db.is_absolute():
        db = Path(config.rootpath) / db
    run_id = (workerinput or {}).get("evalrun_run_id") or values["run_id"] or uuid.uuid4().hex
    argv = (workerinput or {}).get("evalrun_argv") or (
        json.loads(values["argv"]) if values["argv"] else ["pytest", *config.invocation_params.args])
    return EvalrunState(
        options=options, db=db, run_id=run_id, argv=[str(a) for a in argv],
        packs_dirs=list(values["packs_dirs"] or []), progress=not values["no_progress"],
        db_option="--out" if values["argv"] else "--evalrun-db",  # the option the user typed
        is_worker=workerinput is not None,
        controller_pid=(workerinput or {}).get("evalrun_pid") or os.getpid(),
    )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    state = config.stash[STATE_KEY] = _build_state(config)
    for folder in state.packs_dirs:
        path = Path(folder)
        if not path.is_dir():
            raise pytest.UsageError(f"--evalrun-packs-dir {folder}: no such directory")
        # plain pytest collects every pack of the folder; `evalrun run` hands over the packs it
        # named (--pack) and uses --packs-dir only to find them
        if state.db_option != "--out" and str(path.resolve()) not in config.args:
            config.args.append(str(path.resolve()))
    config.pluginmanager.register(_Tally(state), "evalrun-tally")
    config.pluginmanager.register(_FailureHook(config), "evalrun-failure")
    _stop_on_sigterm(config)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(config), "evalrun-xdist")


def _stop_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM (a scheduler's stop, ``kill``) ends the session as Ctrl-C does, through pytest's
    KeyboardInterrupt path, so the run is recorded ``interrupted`` and names the signal; the
    previous handler comes back at the end. The controller's main thread only."""
    if hasattr(config, "workerinput") or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def stop(signum: int, frame: Any) -> None:
        config.stash[STOP_SIGNAL_KEY] = signal.Signals(signum).name
        raise KeyboardInterrupt

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    signal.signal(signal.SIGTERM, stop)
    config.add_cleanup(restore)


class _XdistHooks:
    """Hands the controller's run id and argv to every xdist worker."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        state = self.config.stash[STATE_KEY]
        node.workerinput["evalrun_run_id"] = state.run_id
        node.workerinput["evalrun_argv"] = state.argv
        node.workerinput["evalrun_pid"] = state.controller_pid


def get_state(config: pytest.Config) -> EvalrunState:
    return config.stash[STATE_KEY]


# -- collection ---------------------------------------------------------------------------
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name == "pack.toml":
        return PackFile.from_parent(parent, path=file_path)
    return None


class PackFile(pytest.File):
    """A pack directory, entered through its pack.toml."""

    #: pack.toml relative to the rootdir, as pytest's reports locate its items (the first
    #: item works it out)
    relpath: str | None = None

    def collect(self) -> Iterator[pytest.Item]:
        state = get_state(self.config)
        try:
            pack = load_pack(self.path.parent)
        except PackError as exc:  # an error of this pack only: the other packs still run
            yield BrokenPackItem.from_parent(self, name="pack-error", problem=str(exc))
            return
        state.packs[self.path.parent] = pack
        self.extra_keyword_matches.add(pack.name)
        for error in pack.case_errors:
            where = Path(error.path).name + (f":{error.line}" if error.line is not None else "")
            yield CaseErrorItem.from_parent(self, name=f"case-error[{where}]", error=error)
        if (pack.path / "golden.jsonl").is_file():
            yield GoldenItem.from_parent(self, name="golden", pack=pack)
        models = list(state.options.models)
        if REFERENCE in models and not pack.has_reference:
            models.remove(REFERENCE)
            yield NoReferenceItem.from_parent(self, name="no-reference", pack=pack)
        if not models:
            return
        try:
            for item in make_items(pack, state.options, models=models):
                node = CaseItem.from_parent(self, name=item.name, item=item)
                group = pack.group_of(item.case.data)
                if group:
                    node.extra_keyword_matches.add(group)
                yield node
        except CaseError as exc:  # e.g. a prompt template naming a field a case lacks: this pack only
            yield BrokenPackItem.from_parent(self, name="pack-error", problem=str(exc))
        except EvalrunError as exc:  # e.g. a bad cache secret: the whole run stops, and says why
            sink = summary_sink(self.config)
            if sink is not None and sink.usage_error is None:
                sink.usage_error = str(exc)
            raise


class CaseFailure(Exception):
    def __init__(self, grade: Grade, output: str, pass_score: float) -> None:
        super().__init__(grade.reason)
        self.grade, self.output, self.pass_score = grade, output, pass_score


class GenerationFailure(Exception):
    """The model call for this item finally failed; the error is stored with the row."""


class GraderFailure(Exception):
    """The item could not be graded: its grader failed (GRADER_ERROR) or its attack did
    (ATTACK_ERROR); the message is stored with the result."""


#: ``user_properties`` key telling the run summary what an item was and how it ended; set in
#: the process that ran it, so the summary is right under xdist too
KIND = "evalrun"
#: ``user_properties`` key of the first result each process grades: how many results the
#: session's grading makes, for ``evalrun run``'s grading bar (the xdist controller collects none)
GRADING_TOTAL = "evalrun_results"
#: how a graded result ended, by whether its pack has a pass score: a pack with pass score 0
#: (a detection pack: a low score is a result) cannot have items below it
PASS_KINDS = {True: "case", False: "no_pass_score"}
#: the kinds of a case item's outcome: what ``evalrun run``'s grading bar counts as results
RESULT_KINDS = frozenset({*PASS_KINDS.values(), "below_pass", "generation_error", "grader_error", "attack_error"})


class CaseItem(pytest.Item):
    """Grades one stored output; passes when the grade reaches the pack's pass score."""

    def __init__(self, *, item: Item, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.item = item

    def runtest(self) -> None:
        state = get_state(self.config)
        if not state.total_announced:
            state.total_announced = True
            self.user_properties.append((GRADING_TOTAL, len(state.order)))
        store = state.store()
        row = state.stored_row(self.item.item_key)
        if not is_gradable(row):
            self.user_properties.append((KIND, "generation_error"))
            if row is None:
                raise GenerationFailure("no stored output for this item: the generation phase did not reach it")
            raise GenerationFailure(f"generation failed: {row['error'] or 'no output'}")
        pack = self.item.pack
        graded = grade_into(state.grades(), pack, store, row, key=state.options.resolved_key(),
                            case=self.item.case.data, timeout=state.options.grader_timeout)
        if graded.grade is None:
            kind = "attack_error" if graded.record.label == ATTACK_ERROR else "grader_error"
            self.user_properties.append((KIND, kind))
            raise GraderFailure(graded.error)
        grade = graded.grade
        below = grade.score < pack.pass_score
        self.user_properties.extend([("score", grade.score), ("label", grade.label), ("pack", pack.name),
                                     (KIND, "below_pass" if below else PASS_KINDS[pack.pass_score > 0])])
        if below:
            raise CaseFailure(grade, graded.text, pack.pass_score)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        exc = excinfo.value
        if isinstance(exc, CaseFailure):
            out = exc.output if len(exc.output) <= 600 else exc.output[:600] + "…"
            return show_controls(f"{exc.grade.label} (score {exc.grade.score:g} < pass score {exc.pass_score:g}): "
                                 f"{exc.grade.reason}\n--- output ---\n{out}")
        if isinstance(exc, (GenerationFailure, GraderFailure, EvalrunError)):
            return show_controls(str(exc))
        # anything else is a bug of evalrun's: short traceback without argument values, and
        # the watermark key blanked in case a message repeats it
        text = str(excinfo.getrepr(style="short", funcargs=False, showlocals=False))
        return show_controls(scrub(text, get_state(self.config).options.resolved_key()))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # line 0, as pytest's own non-Python items: a skip marker reports the item's location
        return self.path, 0, f"{self.item.pack.name}::{self.name}"

    @cached_property
    def location(self) -> tuple[str, int | None, str]:
        """pytest's value, the relative path worked out once per pack rather than per item."""
        parent = self.parent
        if not isinstance(parent, PackFile):
            return pytest.Item.location.func(self)  # type: ignore[attr-defined]
        if parent.relpath is None:
            parent.relpath = pytest.Item.location.func(self)[0]  # type: ignore[attr-defined]
        _, line, name = self.reportinfo()
        return parent.relpath, line, name


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """Case items run the lean protocol where it is exact (see item_protocol), which is
    about half of pytest's per-item cost; None hands the item to pytest."""
    if not isinstance(item, CaseItem):
        return None
    state = get_state(item.config)
    if state.lean is None:
        state.lean = lean_allowed(item.config, __name__)
    return True if state.lean and run_lean(item, nextitem) else None


class CaseErrorItem(pytest.Item):
    """A case file that failed to load: fails with file, line and JSON path."""

    def __init__(self, *, error: CaseError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        self.user_properties.append((KIND, "case_error"))
        raise self.error

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return show_controls(f"invalid case: {self.error}")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return Path(self.error.path), self.error.line, self.name


class BrokenPackItem(pytest.Item):
    """A pack that cannot be loaded (its pack.toml, schema or grader): fails with the reason,
    while the other packs of the session run."""

    def __init__(self, *, problem: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problem = problem

    def runtest(self) -> None:
        self.user_properties.append((KIND, "pack_error"))
        self.user_properties.append(("pack", self.path.parent.name))
        raise PackError(self.problem)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return show_controls(self.problem)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.path.parent.name}::pack-error"


class GoldenItem(pytest.Item):
    """The pack's pinned grader examples (golden.jsonl) must all still hold."""

    def __init__(self, *, pack: Pack, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pack = pack

    def runtest(self) -> None:
        problems = self.pack.check_golden()
        self.user_properties.extend([(KIND, "golden_failed" if problems else "golden"), ("pack", self.pack.name)])
        if problems:
            raise AssertionError("\n".join(problems))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return show_controls(f"golden examples of pack {self.pack.name} disagree with grader.py:\n{excinfo.value}")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.pack.path / "golden.jsonl", None, f"{self.pack.name}::golden"


#: why a pack's items are skipped under the reference model (plain pytest's default model)
NO_REFERENCE = f"{NO_SOLVER}; run it with a model: --evalrun-model SPEC"


class NoReferenceItem(pytest.Item):
    """Says, instead of passing silently, that a pack cannot be run without a model."""

    def __init__(self, *, pack: Pack, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pack = pack

    def runtest(self) -> None:
        self.user_properties.extend([(KIND, "no_reference"), ("pack", self.pack.name)])
        pytest.skip(f"pack {self.pack.name}: {NO_REFERENCE}")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.pack.path, None, f"{self.pack.name}::no-reference"


# -- generation phase ---------------------------------------------------------------------
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly:
        return
    items = [node.item for node in session.items if isinstance(node, CaseItem)]
    if not items:
        return
    state = get_state(config)
    state.order = [item.item_key for item in items]
    state.position = {key: i for i, key in enumerate(state.order)}
    created = not state.db.exists()
    try:
        store = state.store()
    except EvalrunError as exc:
        raise usage_error(config, str(exc)) from None
    provenance = {**collect_provenance(state.argv), "pid": state.controller_pid}
    store.start_run(state.run_id, provenance, state.options.as_json())
    try:
        _generate(config, state, store, items)
    except pytest.UsageError:
        try:
            empty = store.discard_run(state.run_id)
        except sqlite3.Error:  # a full disk: the run is recorded as failed at the session's end
            empty = False
        if empty and created:  # refused before storing anything: leave no store behind
            state.close()
            for path in (state.db, *(state.db.with_name(state.db.name + s) for s in ("-wal", "-shm"))):
                path.unlink(missing_ok=True)
        raise


def summary_sink(config: pytest.Config) -> SummarySink | None:
    """The sink ``evalrun run`` registered (None under plain pytest)."""
    return next((p for p in config.pluginmanager.get_plugins() if isinstance(p, SummarySink)), None)


def usage_error(config: pytest.Config, message: str) -> pytest.UsageError:
    """The error that stops a session before its items run. Under ``evalrun run`` the command
    says it (``evalrun: error: ...``, like its other refusals) and pytest prints nothing;
    under plain pytest, pytest prints it (``ERROR: ...``)."""
    sink = summary_sink(config)
    if sink is not None:
        sink.usage_error = message
        return pytest.UsageError()
    return pytest.UsageError(message)


def generation_lock(db: Path) -> Path:
    """The lock one process of a store holds while it generates (xdist siblings wait on it):
    in the temporary folder, keyed by the store's path, so none is left beside the store."""
    folder = Path(tempfile.gettempdir()) / f"evalrun-{os.getuid()}-locks"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / f"{hashlib.sha256(str(db.resolve()).encode()).hexdigest()[:32]}.lock"


def _generate(config: pytest.Config, state: EvalrunState, store: Store, items: list[Item]) -> None:
    """The stages before grading, for the session's items, under the store's generation lock."""
    options = state.options
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    show = state.progress and not state.is_worker and reporter is not None

    def factory(model: ModelSpec) -> Provider:
        try:
            return make_provider(model, base_url=options.base_url, concurrency=options.concurrency,
                                 vocab_size=options.vocab_size)
        except EvalrunError as exc:
            raise usage_error(config, str(exc)) from None

    # One process generates at a time; xdist siblings wait, then find everything stored.
    with open(generation_lock(state.db), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with make_executor(options.executor, ray_address=options.ray_address,
                               workers=options.executor_workers,
                               provider_options={"base_url": options.base_url,
                                                 "concurrency": options.concurrency,
                                                 "vocab_size": options.vocab_size}) as executor:
                summary = run_stages(items, store, state.run_id, options, factory, executor=executor,
                                     show_progress=show)
        except EvalrunError as exc:  # e.g. a provider refusing the run; stored results stay
            raise usage_error(config, str(exc)) from None
        except sqlite3.Error as exc:  # e.g. a full disk: one line, and the run records that it failed
            message = (f"{state.db}: cannot store results ({exc}; is the disk full?); what was stored before "
                       "is kept, and running the same command again resumes")
            config.stash[FAILURE_KEY] = message
            raise usage_error(config, message) from None
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    if reporter is not None and not state.is_worker:
        for line in summary.lines(state.db, state.run_id):
            reporter.write_line(line)


#: why a session failed, from pytest's internal-error hook (the last line of its traceback)
FAILURE_KEY = pytest.StashKey[str]()


class _FailureHook:
    """Keeps why a session failed (an internal error's last line, or the first collection
    error), so the run records it."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_internalerror(self, excrepr: Any, excinfo: Any) -> None:
        message = " ".join(str(excinfo.value).split())[:500]
        self.config.stash[FAILURE_KEY] = f"{excinfo.typename}: {message}" if message else excinfo.typename

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and FAILURE_KEY not in self.config.stash:
            last = (str(report.longrepr).strip().splitlines() or ["(no message)"])[-1]
            self.config.stash[FAILURE_KEY] = f"collecting {report.nodeid or 'the packs'} failed: {last[:500]}"


def _ending(session: pytest.Session, state: EvalrunState, store: Store, exitstatus: int) -> tuple[str, str | None]:
    """(status, reason) of the run: ``finished`` only when every selected item reached the end
    of grading (the controller under xdist checks the items its workers linked to the run)."""
    failure = session.config.stash.get(FAILURE_KEY, None)
    keys = state.order or [r[0] for r in store.conn.execute(
        "SELECT r.item_key FROM run_items i JOIN results r ON r.result_id = i.result_id WHERE i.run_id = ?",
        (state.run_id,))]
    missing = store.unfinished(keys) if keys else 0
    progress = f"{len(set(keys)) - missing} of {len(set(keys))} selected items reached the end of grading"
    broken = sorted({pack for kind, pack, _, _ in state.outcomes if kind == "pack_error"})
    if broken:
        return "failed", f"pack(s) {', '.join(broken)} could not be loaded; {progress}"
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        if failure:  # pytest stops a session after collection errors as if interrupted
            return "failed", f"{failure}; {progress}"
        stopped_by = session.config.stash.get(STOP_SIGNAL_KEY, None)
        return "interrupted", f"stopped ({'by ' + stopped_by if stopped_by else 'Ctrl-C or a signal'}): {progress}"
    if failure or exitstatus in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        return "failed", f"{failure or 'pytest ended with exit status ' + str(int(exitstatus))}; {progress}"
    if missing:
        return "failed", progress
    return "finished", None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(STATE_KEY, None)
    if state is None:
        return
    try:
        state.flush()
    except Exception as exc:  # e.g. a full disk: the run failed, and says why below
        session.config.stash[FAILURE_KEY] = f"storing grades failed: {type(exc).__name__}: {exc}"
    sink = summary_sink(session.config)
    if sink is not None and not state.is_worker and not state.order:  # nothing of the run was stored
        sink.problems = unrunnable(state)
    if not state.is_worker and (state._store is not None or state.db.exists()):
        try:
            store = state.store()
        except EvalrunError:  # reported where it was first opened
            return
        if state.run_id in store.run_ids():
            status, reason = _ending(session, state, store, exitstatus)
            try:
                store.finish_run(state.run_id, status=status, reason=reason)
            except sqlite3.Error as exc:  # the store reads it as interrupted: say what it was
                reason = f"{reason}; the store could not record this ({exc}) and lists the run as interrupted"
            if status == "failed" and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            sink = summary_sink(session.config)
            if sink is not None:  # `evalrun run` says it after pytest's output
                sink.ending = (status, reason)
                sink.stop_signal = session.config.stash.get(STOP_SIGNAL_KEY, None)
            elif status != "finished":
                print(f"evalrun: run {state.run_id} {status}: {reason}", file=sys.stderr)


def pytest_unconfigure(config: pytest.Config) -> None:
    # closed last, after the summary read it: the last connection to close tidies the WAL
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        state.close()


class _Tally:
    """Records how each of evalrun's items ended, as reports arrive (in the controller under
    xdist), for the closing summary."""

    def __init__(self, state: EvalrunState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        props = dict(report.user_properties)
        kind = props.get(KIND)
        if kind is not None:
            text = report.longreprtext if report.failed else ""
            self.state.outcomes.append((str(kind), str(props.get("pack", "")), report.nodeid, text))


#: outcomes that leave a pack with nothing to run, and what ``evalrun run`` says of each
_UNRUNNABLE = {"pack_error": "{text}", "case_error": "{text}"}


def unrunnable(state: EvalrunState) -> list[str]:
    """One line per reason a selected pack produced nothing (a pack that cannot be loaded, a
    case that failed its checks; a reference run of a pack without a solver is refused before
    pytest starts)."""
    return [_UNRUNNABLE[kind].format(text=" ".join(text.split()))
            for kind, _, _, text in state.outcomes if kind in _UNRUNNABLE]


class SummarySink:
    """Registered by ``evalrun run``: takes the run's closing line, which the command prints
    after pytest has finished so that it is the last thing a user sees."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        #: one line per distinct error of the run's results, for stderr
        self.error_lines: list[str] = []
        #: the run's mean score, ungraded results counting 0 (what --fail-under compares)
        self.mean: float | None = None
        #: how the run ended, (status, reason), even when the store could not record it
        self.ending: tuple[str, str | None] | None = None
        #: why the session stopped before its items ran (said by ``evalrun run``)
        self.usage_error: str | None = None
        #: the signal that stopped the session (``SIGTERM``), None otherwise
        self.stop_signal: str | None = None
        #: why the packs produced nothing to run (said by ``evalrun run``, which then fails)
        self.problems: list[str] = []
        #: ``evalrun run --report DIR`` writes the report after pytest: no hint to write one
        self.report_follows = False


#: distinct error messages shown on stderr at the end of a run (the report has them all)
MAX_ERROR_LINES = 10
#: the case a grader error names (:func:`evalrun.run.stages.grade.grader_error`)
_CASE_SUFFIX = re.compile(r" \(case [^()]*\)$")


def false_positive_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per detector, how many unwatermarked outputs it fired on: the summary's labels of an
    unwatermarked group are the union over every detector of its pack and model."""
    counts: dict[tuple[str, str, str], list[int]] = {}
    for r in rows:
        if r["watermark"] != "none" or r["attack"] != "none" or not r.get("metadata_json"):
            continue
        for spec, evidence in (json.loads(r["metadata_json"]).get("detections") or {}).items():
            tally = counts.setdefault((r["pack"], r["model"], spec), [0, 0])
            tally[0] += bool(evidence.get("detected"))
            tally[1] += 1
    names = short_names(spec for _, _, spec in counts)
    return [f"evalrun: {pack} {model}: unwatermarked outputs detected under {names[spec]}: {fired} of {n} "
            "(false positives)" for (pack, model, spec), (fired, n) in sorted(counts.items())]


def error_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per distinct error message of ``rows`` (generation, attack or grader), with
    how many results it ended, most frequent first: a failure that repeats per item is said
    once. The case a grader error names is left out of the message, so that equal failures
    of different cases count together."""
    counts: dict[str, int] = {}
    for r in rows:
        if r["error"] is None:
            continue
        kind = {GRADER_ERROR: "grader", ATTACK_ERROR: "attack"}.get(r["label"], "generation")
        message = f"{kind} error: {_CASE_SUFFIX.sub('', str(r['error']))}"
        counts[message] = counts.get(message, 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = [f"evalrun: {n} result(s): {message}" for message, n in ordered[:MAX_ERROR_LINES]]
    if len(ordered) > MAX_ERROR_LINES:
        lines.append(f"evalrun: ... and {len(ordered) - MAX_ERROR_LINES} more distinct error message(s); the"
                     " report lists every failed result")
    return lines


def zero_scores_text(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """How many graded results scored 0 and how many of them are right: an unwatermarked text
    NOT_DETECTED is a correct negative, which a bare count of zeros would read as a failure
    (None for a run without detection labels)."""
    scored = [r for r in rows if graded(r)]
    if not any(r["label"] in (DETECTED, NOT_DETECTED) for r in scored):
        return None
    zero = sum(float(r["score"]) == 0.0 for r in scored)
    if not zero:
        return "scored 0: none"
    negatives = sum(r["label"] == NOT_DETECTED and is_none(r["watermark"]) for r in scored)
    missed = sum(r["label"] == NOT_DETECTED and not is_none(r["watermark"]) for r in scored)
    if negatives == zero:
        return f"scored 0: {zero}, all correct negatives (unwatermarked, not detected)"
    parts = [f"{negatives} correct negatives (unwatermarked, not detected)"]
    if missed:
        parts.append(f"{missed} missed watermarks")
    return f"scored 0: {zero}, of them {' and '.join(parts)}"


def pass_score_text(outcomes: Sequence[tuple[str, str, str, str]]) -> str:
    """Items below the pass score among the results that have one: a pack with pass score 0
    (every detection pack) has none to fall below, and says so instead of counting 0."""
    kinds = {kind: 0 for kind in ("below_pass", PASS_KINDS[True])}
    unscored: set[str] = set()
    for kind, pack, _, _ in outcomes:
        if kind in kinds:
            kinds[kind] += 1
        elif kind == PASS_KINDS[False]:
            unscored.add(pack)
    below = kinds["below_pass"]
    with_one = below + kinds[PASS_KINDS[True]]
    if not unscored:
        return f"items below the pass score: {below} of {with_one} (see the report)"
    packs = ", ".join(sorted(unscored))
    why = f"{packs} {'has' if len(unscored) == 1 else 'have'} pass score 0"
    if not with_one:
        return f"items below the pass score: none possible ({why})"
    return f"items below the pass score: {below} of the {with_one} results that have one (see the report; {why})"


def _closing_lines(state: EvalrunState, graded: int, cases: int, labels: dict[str, int],
                   gen_errors: int, grader_errors: int, zeros: str | None = None) -> list[str]:
    """What the run came to, in evalrun's terms: graded results, what their zeros mean
    (``zeros``: :func:`zero_scores_text`), items below the pass score among those that have one
    (not "failed tests"), errors by kind, golden examples and invalid case files apart."""
    lines = []
    broken = [text for kind, _, _, text in state.outcomes if kind == "pack_error"]
    if broken:
        lines.append(f"evalrun: {len(broken)} pack(s) could not be loaded and were not run:")
        lines += [f"  {text.strip()}" for text in broken]
    invalid = [text for kind, _, _, text in state.outcomes if kind == "case_error"]
    if invalid:
        lines.append(f"evalrun: {len(invalid)} case file(s) failed their schema and were not run:")
        lines += [f"  {text.strip()}" for text in invalid]
    golden = {pack: kind for kind, pack, _, _ in state.outcomes if kind.startswith("golden")}
    if golden:
        bad = sorted(p for p, k in golden.items() if k == "golden_failed")
        lines.append(f"evalrun: golden examples: {len(golden) - len(bad)} of {len(golden)} pack(s) agree with"
                     f" their grader" + (f"; disagreeing: {', '.join(bad)}" if bad else ""))
    shown = " ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "no labels"
    errors = (f"errors: {gen_errors} generation, {grader_errors} grader/attack" if gen_errors or grader_errors
              else "errors: none")
    said = [f"evalrun: {graded} results graded ({cases} cases): {shown}", *([zeros] if zeros else []),
            pass_score_text(state.outcomes), errors]
    lines.append("; ".join(said))
    return lines


def _run_rows(store: Store, run_id: str) -> list[Any]:
    return with_judgements(store, store.results(run_id=run_id))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or state.is_worker:
        return
    for kind, pack, _, _ in state.outcomes:  # skipped packs say why, without -rs
        if kind == "no_reference":
            terminalreporter.write_line(f"evalrun: pack {pack} skipped: {NO_REFERENCE}")
    if not state.db.exists():
        return
    try:
        store = state.store()
    except EvalrunError:
        return
    if state.run_id not in store.run_ids():
        return
    rows = _run_rows(store, state.run_id)
    if not rows:
        return
    from tabulate import tabulate


    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["pack"], r["model"], r["watermark"], r["attack"]), []).append(r)
    table = []
    names = short_names(w for _, _, w, _ in groups)  # the full specs are in the store and the report
    totals: dict[str, int] = {}
    gen_errors = grader_errors = 0
    # every case's mean, keyed (group..., case_id): the groups' in sorted order are the run's
    run_means: dict[tuple[str, ...], float] = {}
    for (pack, model, watermark, attack), members in sorted(groups.items()):
        counts: dict[str, int] = {}
        for r in members:
            if graded(r):
                counts[r["label"]] = counts.get(r["label"], 0) + 1
                totals[r["label"]] = totals.get(r["label"], 0) + 1
            elif r["label"] in (GRADER_ERROR, ATTACK_ERROR):
                grader_errors += 1
            elif r["error"] is not None:
                gen_errors += 1
        errors = sum(r["error"] is not None for r in members)
        means = case_means(members)
        run_means.update(means)
        mean = sum(means.values()) / len(means)
        table.append([pack, model, names[watermark], attack, len(members), f"{mean:.3f}",
                      " ".join(f"{k}={v}" for k, v in sorted(counts.items())), errors])
    graded_n = sum(totals.values())
    cases = len({(r["pack"], r["case_id"]) for r in rows if graded(r)})
    run_mean = sum(run_means.values()) / len(run_means)
    metrics = write_metrics_json(compute(rows), metrics_path_beside(state.db))
    terminalreporter.write_sep("=", "evalrun summary")
    terminalreporter.write_line(tabulate(table, headers=["pack", "model", "watermark", "attack", "results",
                                                         "mean score", "labels", "errors"]))
    terminalreporter.write_line(f"results database: {state.db}  run: {state.run_id}")
    sink = summary_sink(config)
    if sink is None or not sink.report_follows:  # `evalrun run --report DIR` names the report it writes
        terminalreporter.write_line(f"report: evalrun report --db {state.db} --out reports/")
    terminalreporter.write_line(f"metrics: {metrics}")
    closing = false_positive_lines(rows) + _closing_lines(state, graded_n, cases, totals, gen_errors, grader_errors,
                                                          zero_scores_text(rows))
    errors_seen = error_lines(rows)
    if sink is not None:
        sink.lines.extend(closing)
        sink.error_lines.extend(errors_seen)
        sink.mean = run_mean
    else:
        for line in closing:
            terminalreporter.write_line(line)
        for line in errors_seen:
            print(line, file=sys.stderr)
