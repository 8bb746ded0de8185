"""User-facing errors: each names the file, field or option that is wrong."""

from __future__ import annotations


class EvalrunError(Exception):
    """An error caused by user input; the CLI prints it as one line and exits 2."""


class SpecError(EvalrunError):
    """A malformed or unknown ``--model``/``--watermark``/``--attack`` spec."""


class PackError(EvalrunError):
    """A pack that cannot be loaded at all (missing pack.toml, broken grader.py, ...)."""


class CaseError(EvalrunError):
    """One case file (or one line of a .jsonl file) that is invalid.

    Only this case is dropped; the pack's other cases still run.
    """

    def __init__(self, path: str, line: int | None, json_path: str, message: str) -> None:
        self.path = path
        self.line = line
        self.json_path = json_path
        self.message = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {json_path}: {message}")


def first_line(exc: BaseException) -> str:
    """A library's exception as one line: its message's first non-blank line (transformers'
    and jsonschema's run to a dozen), or its type's name when it has none."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
