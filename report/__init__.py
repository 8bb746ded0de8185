"""Rendering of a results store: tables, matplotlib charts, report.md and report.html."""

from evalrun.report.build import build_report

__all__ = ["build_report"]
