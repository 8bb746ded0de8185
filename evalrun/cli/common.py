"""Helpers that several ``evalrun`` commands share: the run options, ``[tool.evalrun]`` of
./pyproject.toml and the ``--json`` file of the analysis commands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from evalrun._util.errors import EvalrunError
from evalrun._util.files import write_text
from evalrun.run.options import OPTIONS, add_cli_options

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: the run options `evalrun tune` shares with `evalrun run` (declared in evalrun.run.options)
TUNE_RUN_OPTIONS = ("models", "key", "n", "temperature", "max_tokens", "seed", "db", "base_url", "concurrency",
                    "packs_dirs", "cases")


def add_run_options(p: argparse.ArgumentParser, *, with_model: bool = True) -> None:
    """The options of `evalrun run` (without the model options: those of `evalrun grade`)."""
    p.add_argument("--pack", action="append", required=True, metavar="PACK",
                   help="pack name (see `evalrun list`) or directory; repeatable")
    add_cli_options(p, skip=() if with_model else ("models", "model_args"))
    p.add_argument("pytest_args", nargs="*", help="arguments after -- go to pytest")


def add_some_run_options(p: argparse.ArgumentParser, names: Sequence[str]) -> None:
    """Only the run options ``names`` (option names of :data:`evalrun.run.options.OPTIONS`)."""
    add_cli_options(p, skip=tuple(o.name for o in OPTIONS if o.name not in names))


def project_config() -> dict:
    """``[tool.evalrun]`` of ./pyproject.toml: the same defaults plain pytest reads there."""
    path = Path("pyproject.toml")
    if not path.is_file():
        return {}
    try:
        section = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("evalrun", {})
    except tomllib.TOMLDecodeError as exc:
        raise EvalrunError(f"{path.resolve()}: invalid TOML: {exc}") from None
    if not isinstance(section, dict):
        raise EvalrunError(f"{path.resolve()} [tool.evalrun] must be a table")
    return section


def write_json(path: str | None, value: object) -> None:
    """The ``--json PATH`` file of an analysis command (nothing without ``--json``)."""
    if path:
        write_text(path, json.dumps(value, indent=1, sort_keys=True) + "\n", what="--json")
