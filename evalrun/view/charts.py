"""The report's benchmark sections, for the viewer's charts page.

The numbers and charts are the report's own (:func:`evalrun.report.benchmark.sections` over
the store's :mod:`evalrun.metrics` records: tables, and PNG charts kept in memory and served by
the viewer); the tamper-resistance plots are drawn again as inline SVG whose points name their
attack on hover and link to its results. Reading every result is the report's cost, so the
page's data is computed once per store state (:func:`~evalrun.view.queries.store_state`) and
selection.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from evalrun.metrics.aggregates import compute
from evalrun.report import benchmark
from evalrun.report.data import is_detection_view, load
from evalrun.view.queries import store_state


@dataclass
class Charts:
    """One selection's charts page: the interactive tamper plots, the report's sections and
    the PNG charts they show (file name -> bytes)."""

    panels: list[tuple[Any, dict[str, str]]] = field(default_factory=list)
    sections: list[Any] = field(default_factory=list)
    images: dict[str, bytes] = field(default_factory=dict)
    note: str = ""


class ChartData:
    """:class:`Charts` per run selection, cached per store state."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._cache: dict[tuple[Any, ...], Charts] = {}

    def get(self, run_id: str | None) -> Charts:
        key = (run_id, *store_state(self.db))
        with self._lock:
            if key not in self._cache:
                self._cache = {key: self._compute(run_id)}
            return self._cache[key]

    def ready(self, run_id: str | None) -> bool:
        """Whether the page of ``run_id`` is computed for the store as it is now (without
        waiting for a computation under way)."""
        key = (run_id, *store_state(self.db))
        return key in self._cache

    def image(self, name: str) -> bytes | None:
        """A PNG chart of a page computed before (None when there is none of that name)."""
        with self._lock:
            return next((c.images[name] for c in self._cache.values() if name in c.images), None)

    def _compute(self, run_id: str | None) -> Charts:
        data = load(self.db, run_id)
        detection = {pack: items for pack, items in data.packs.items() if is_detection_view(data.view(pack))}
        if not detection:
            return Charts(note="The store holds no watermark-detection results (MarkMyWords' packs): no benchmark "
                               "charts.")
        records = compute(r.row for r in data.results)
        recs = benchmark.Records(records)
        packs = [benchmark.pack_data(name, items) for name, items in detection.items()]
        with tempfile.TemporaryDirectory(prefix="evalrun-view-charts-") as tmp:
            sections = benchmark.sections(detection, records, Path(tmp))
            images = {f.name: f.read_bytes() for f in Path(tmp).glob("*.png")}
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
        return Charts(panels=panels, sections=sections, images=images, note=note)
