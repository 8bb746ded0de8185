"""What ``evalrun run`` shows while pytest grades: one progress bar counting results, in place
of pytest's character per item.

The main job's 2,100 items drew a 2,100-character line of dots that said nothing the stage's
bar and the closing lines do not (a low score is a result, not a failed test). Plain
``pytest`` keeps its dots: there the items are tests, and pytest's output is the user's.
"""

from __future__ import annotations

import sys
from typing import Any, Generator, TextIO

import pytest

from evalrun.plugins.pytest_plugin import GRADING_TOTAL, KIND, RESULT_KINDS
from evalrun.run.stages.generate import ProgressBar


class RunTerminal:
    """Registered by ``evalrun run``: no per-item progress character at pytest's default and
    quiet verbosities (a positive one, ``evalrun run ... -- -vvv`` over its ``-qq``, keeps
    pytest's per-item lines), and, with ``progress``,
    the grading stage's bar on ``stream``, drawn from the items' reports, so that it counts in
    the xdist controller too. Failures stay visible where they were: the closing lines, the
    error lines on stderr and, on request, pytest's ``-rf`` lines."""

    def __init__(self, progress: bool, stream: TextIO | None = None) -> None:
        self.progress = progress
        self.stream = stream or sys.stderr
        self.bar: ProgressBar | None = None
        self.total: int | None = None
        self.done = 0

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport,
                                 config: pytest.Config) -> Generator[None, Any, Any]:
        """pytest's status of the report without its one-character form: the category and the
        word (``FAILED`` in ``-rf``'s lines) stay; setup and teardown errors keep their ``E``."""
        status = yield
        if report.when != "call" or config.get_verbosity(pytest.Config.VERBOSITY_TEST_CASES) > 0:
            return status
        category, _, word = status
        return category, "", word

    def pytest_runtest_logstart(self) -> None:
        """The bar starts with the first item, so that its rate counts grading only."""
        if self.progress and self.bar is None:
            self.bar = ProgressBar("evalrun: grading", stream=self.stream, unit="results")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.bar is None or report.when != "call":
            return
        props: dict[str, Any] = dict(report.user_properties)
        if self.total is None and GRADING_TOTAL in props:
            self.total = int(props[GRADING_TOTAL])
        kind = props.get(KIND)
        # a case item that failed before saying its kind is a result too (a bug of evalrun's)
        if self.total is None or (kind is not None and kind not in RESULT_KINDS):
            return
        self.done += 1
        self.bar(min(self.done, self.total), self.total)

    def pytest_sessionfinish(self) -> None:
        """A bar that stopped short (an item that never reported) still ends its line."""
        if self.bar is not None and self.bar.tty and self.total is not None and 0 < self.done < self.total:
            self.stream.write("\n")
            self.stream.flush()
