"""``evalrun.run``: an evaluation run from Python, through the very path ``evalrun run`` takes
(its options, checks, pytest session, store and cache keys), so a run started here resumes
from the command line and the other way round."""

from __future__ import annotations

import argparse
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from evalrun._util.errors import EvalrunError
from evalrun.api.store import Store
from evalrun.api.table import Table
from evalrun.cli.common import add_run_options, project_config
from evalrun.cli.run import run_ending, run_packs
from evalrun.report import build_report
from evalrun.run.options import BY_NAME, OPTIONS, resolve

#: keyword -> run option, where the keyword is the command line's flag rather than the option's
#: field name (``model="embedded"`` is ``--model embedded``; ``out`` is ``--out``)
KEYWORDS = {"model": "models", "watermark": "watermarks", "attack": "attacks", "judge": "judges",
            "out": "db", "packs_dir": "packs_dirs", "model_arg": "model_args"}


class _Parser(argparse.ArgumentParser):
    """``evalrun run``'s parser, raising its complaints instead of exiting the interpreter."""

    def error(self, message: str) -> Any:  # argparse's hook: never returns
        raise EvalrunError(f"evalrun.run: {message}")


def _parser() -> _Parser:
    parser = _Parser(prog="evalrun.run", allow_abbrev=False)
    add_run_options(parser)
    return parser


def keywords() -> list[str]:
    """The keyword arguments :func:`run` takes besides ``pack`` and ``key``."""
    flags = {o.name: o.cli_flag[2:].replace("-", "_") for o in OPTIONS if o.cli and not o.hidden}
    return sorted(v for k, v in flags.items() if k != "key")


def command_line(pack: str | Sequence[str], options: dict[str, Any]) -> list[str]:
    """The ``evalrun run`` arguments of a call (every value as the command line spells it)."""
    argv: list[str] = []
    for name in [pack] if isinstance(pack, (str, Path)) else list(pack):
        argv += ["--pack", str(name)]
    for keyword, value in options.items():
        option = BY_NAME.get(KEYWORDS.get(keyword, keyword))
        if option is None or not option.cli or option.hidden or option.name == "key":
            raise EvalrunError(f"evalrun.run: unknown option {keyword!r}; expected one of "
                               f"{', '.join(keywords())}")
        if value is None or value is False:
            continue
        if option.kind is bool:
            argv.append(option.cli_flag)
            continue
        values = [value] if isinstance(value, (str, Path, int, float)) or not option.many else list(value)
        if not option.many and not isinstance(value, (str, Path, int, float)):
            raise EvalrunError(f"evalrun.run: {keyword}={value!r}: expected one value, not a {type(value).__name__}")
        for v in values:
            argv += [option.cli_flag, str(v)]
    return argv


@dataclass(frozen=True)
class Run:
    """A finished (or interrupted) run: its store, id and ending, and its numbers."""

    db: Path
    run_id: str
    #: ``finished``, ``interrupted`` or ``failed`` (``reason`` says why for the last two)
    status: str
    reason: str | None
    #: what ``evalrun run`` would have exited with (0: finished, 1: --fail-under not met, ...)
    exit_code: int

    def results(self, **filters: Any) -> Table:
        """This run's results (``evalrun export``'s columns); filters as :meth:`Store.results`."""
        return Store(self.db).results(run=self.run_id, **filters)

    def metrics(self) -> Table:
        """This run's ``metrics.json`` records."""
        return Store(self.db).metrics(run=self.run_id)

    def report(self, out: str | Path) -> Path:
        """Write this run's report (report.md, report.html, charts, metrics.json) into ``out``;
        returns the path of report.md."""
        return Path(build_report(self.db, out, run_id=self.run_id))


def run(pack: str | Sequence[str], *, key: str | None = None, **options: Any) -> Run:
    """Run ``pack`` (a name, a folder, or several) with the options of ``evalrun run`` as
    keywords: ``model``, ``watermark``, ``attack``, ``judge`` (each a spec or a list of them),
    ``out`` (the store, default ``results.sqlite``), ``max_tokens``, ``attack_suite``,
    ``report``, ... ``key`` is the watermark key (default ``$EVALRUN_WATERMARK_KEY``), handed to
    the run in memory and never stored. Bad options raise :class:`EvalrunError` with the
    command line's one-line message; a run cut short returns with ``status`` ``interrupted``
    and resumes when called again."""
    argv = command_line(pack, options)
    args = _parser().parse_args(argv)
    args.key = key
    run_id = uuid.uuid4().hex
    code = run_packs(args, ["evalrun.run", *argv], run_id=run_id, raise_usage=True)  # the key: in memory only
    db = Path(resolve({name: getattr(args, name, None) for name in BY_NAME}, project_config())["db"])
    ending = run_ending(db, run_id)
    status, reason = ending if ending is not None else ("failed", f"exit status {code}")
    return Run(db=db, run_id=run_id, status=status, reason=reason, exit_code=code)
