"""The report's benchmark summary and tamper-resistance plots, for the viewer's charts page.

The numbers are the report's own (:mod:`evalrun.report.benchmark` over the store's
:mod:`evalrun.metrics` records); only the drawing differs: inline SVG whose points link to
their attack's results. Reading every result is the report's cost, so the page's data is
computed once per store state (:func:`~evalrun.view.queries.store_state`) and selection.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from evalrun.metrics.aggregates import compute
from evalrun.report import benchmark
from evalrun.report.data import is_detection_view, load
from evalrun.view.queries import store_state


class ChartData:
    """(summary table, [(tamper panel, attack -> results link)], note) per run selection."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._cache: dict[tuple[Any, ...], tuple[Any, list[tuple[Any, dict[str, str]]], str]] = {}

    def get(self, run_id: str | None) -> tuple[Any, list[tuple[Any, dict[str, str]]], str]:
        key = (run_id, *store_state(self.db))
        with self._lock:
            if key not in self._cache:
                self._cache = {key: self._compute(run_id)}
            return self._cache[key]

    def _compute(self, run_id: str | None) -> tuple[Any, list[tuple[Any, dict[str, str]]], str]:
        data = load(self.db, run_id)
        detection = {pack: items for pack, items in data.packs.items() if is_detection_view(data.view(pack))}
        if not detection:
            return None, [], "The store holds no watermark-detection results (MarkMyWords' packs): no benchmark charts."
        recs = benchmark.Records(compute(r.row for r in data.results))
        packs = [benchmark.pack_data(name, items) for name, items in detection.items()]
        panels = []
        for tamper in benchmark.tampers(packs, recs):
            links = {name: "/?" + urlencode({"pack": tamper.pack, "model": tamper.model, "watermark": tamper.watermark,
                                             "attack": name})
                     for name in [*tamper.panel.points, *tamper.panel.excluded]}
            panels.append((tamper.panel, links))
        note = ("The report's numbers (metrics.json records) for " + (f"run {run_id}" if run_id else "every run")
                + "; " + "; ".join(benchmark.quality_note(p) for p in packs))
        if not panels:
            note += " No tamper-resistance plot: it needs a quality judge (e.g. --judge perplexity:embedded) and attacks."
        return benchmark.summary_table(packs, recs), panels, note
