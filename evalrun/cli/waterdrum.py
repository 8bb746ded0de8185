"""``evalrun watermark-data`` and ``evalrun unlearning`` (WaterDrum): parsed and run by
:mod:`evalrun.unlearning.cli`; the CLI hands it the demo's report renderer, since the core does
not import :mod:`evalrun.report`."""

from __future__ import annotations

from typing import Sequence

from evalrun.report.unlearning import write_compare_report, write_report
from evalrun.unlearning.cli import main as unlearning_main


def main(argv: Sequence[str]) -> int:
    """``argv``: the arguments after ``evalrun``, the command name first."""
    return unlearning_main(argv, write_report=write_report, write_compare_report=write_compare_report)
