#!/usr/bin/env python3
"""Render an ``evalrun report`` HTML page in headless Chromium and check it.

Checks, on the file as written and on the DOM Chromium produced after loading it:

* self-contained: no ``<script>``, ``<link>``, ``<iframe>``, ``<object>``, ``<embed>`` or
  ``<base>`` elements, no ``on*`` event-handler attributes, every image a ``data:image/png``
  URI, no ``http(s):`` reference anywhere in an attribute;
* nothing ran: the rendered DOM has the same elements, attributes, text and title as the file
  (a script that ran, e.g. an escaped-badly ``<img onerror=...>``, would have changed it);
* the tables are there: every table of the file is in the rendered DOM with the same number
  of body rows, and each ``--require-table ID`` exists and has at least one row.

Exit status 0 when every check passes, 1 when one fails, 2 when Chromium cannot be run.

    python scripts/check_report_html.py report/report.html --require-table provenance \\
        --screenshot /tmp/report.png
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

FORBIDDEN_TAGS = {"script", "link", "iframe", "object", "embed", "base", "frame", "frameset"}
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@dataclass
class PageFacts:
    """What the checks need to know about one HTML document."""

    elements: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    tables: dict[str, int] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)
    title: str = ""
    problems: list[str] = field(default_factory=list)
    images: int = 0


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.facts = PageFacts()
        self._table: list[str | None] = []
        self._in_tbody = 0
        self._in_title = False
        self._skip_text = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        f = self.facts
        names = tuple(sorted(name for name, _ in attrs))
        f.elements.append((tag, names))
        if tag in FORBIDDEN_TAGS:
            f.problems.append(f"<{tag}> element present")
        for name, value in attrs:
            if name.startswith("on"):
                f.problems.append(f"event-handler attribute {name}= on <{tag}>")
            low = (value or "").strip().lower()
            if low.startswith(("http:", "https:", "//", "javascript:")):
                f.problems.append(f"external or script reference {name}={value[:60]!r} on <{tag}>")
        if tag == "img":
            f.images += 1
            src = dict(attrs).get("src") or ""
            if not src.startswith("data:image/png;base64,"):
                f.problems.append(f"<img> not embedded as a PNG data URI: {src[:60]!r}")
        if tag == "table":
            tid = dict(attrs).get("id")
            self._table.append(tid)
            if tid:
                f.tables.setdefault(tid, 0)
        elif tag == "tbody":
            self._in_tbody += 1
        elif tag == "tr" and self._in_tbody and self._table and self._table[-1]:
            f.tables[self._table[-1]] += 1
        elif tag == "title":
            self._in_title = True
        if tag in ("style", "script"):
            self._skip_text += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._table:
            self._table.pop()
        elif tag == "tbody":
            self._in_tbody = max(0, self._in_tbody - 1)
        elif tag == "title":
            self._in_title = False
        if tag in ("style", "script"):
            self._skip_text = max(0, self._skip_text - 1)

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.facts.title += data
        if self._skip_text:
            return
        words = data.split()
        if words:
            self.facts.text.append(" ".join(words))


def page_facts(markup: str) -> PageFacts:
    parser = _Collector()
    parser.feed(markup)
    parser.close()
    return parser.facts


def find_chromium(explicit: str | None = None) -> str | None:
    if explicit:
        return explicit if shutil.which(explicit) or Path(explicit).exists() else None
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _chromium_args(binary: str, profile: str) -> list[str]:
    args = [binary, "--headless", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to start as root with the sandbox
    return args


def render_dom(binary: str, page: Path, timeout: float = 90.0) -> str:
    """The DOM Chromium serialises after loading ``page`` (scripts, if any, had 3 s to run)."""
    with tempfile.TemporaryDirectory(prefix="evalrun-chromium-") as profile:
        proc = subprocess.run(
            _chromium_args(binary, profile) + ["--virtual-time-budget=3000", "--dump-dom",
                                               page.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or "<html" not in proc.stdout:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return proc.stdout


def screenshot(binary: str, page: Path, out: Path, timeout: float = 90.0) -> None:
    with tempfile.TemporaryDirectory(prefix="evalrun-chromium-") as profile:
        subprocess.run(
            _chromium_args(binary, profile) + [f"--screenshot={out.resolve()}",
                                               "--window-size=1280,2400", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, check=True)


def check(page: Path, rendered: str, require: list[str]) -> list[str]:
    """All problems found (empty when the page passes)."""
    source = page_facts(page.read_text(encoding="utf-8"))
    dom = page_facts(rendered)
    problems = [f"file: {p}" for p in source.problems]
    problems += [f"rendered DOM: {p}" for p in dom.problems]
    if not source.tables:
        problems.append("file: no tables with an id")
    for tid, rows in source.tables.items():
        if tid not in dom.tables:
            problems.append(f"rendered DOM: table #{tid} missing")
        elif dom.tables[tid] != rows:
            problems.append(f"rendered DOM: table #{tid} has {dom.tables[tid]} rows, file has {rows}")
    for tid in require:
        if dom.tables.get(tid, 0) == 0:
            problems.append(f"rendered DOM: required table #{tid} missing or empty")
    if dom.title != source.title:
        problems.append(f"rendered DOM differs: title {dom.title!r}, file {source.title!r}")
    if dom.elements != source.elements:
        diff = next((i for i, (a, b) in enumerate(zip(dom.elements, source.elements)) if a != b),
                    min(len(dom.elements), len(source.elements)))
        got = dom.elements[diff] if diff < len(dom.elements) else None
        want = source.elements[diff] if diff < len(source.elements) else None
        problems.append(f"rendered DOM differs from the file at element {diff}: "
                        f"{got} vs {want} (something changed the page)")
    if dom.text != source.text:
        diff = next((i for i, (a, b) in enumerate(zip(dom.text, source.text)) if a != b),
                    min(len(dom.text), len(source.text)))
        problems.append(f"rendered DOM text differs from the file at text node {diff}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("html", type=Path, help="report.html to check")
    ap.add_argument("--require-table", action="append", default=[], metavar="ID",
                    help="table id that must exist with at least one row (repeatable)")
    ap.add_argument("--screenshot", type=Path, help="also save a PNG screenshot here")
    ap.add_argument("--chromium", help="Chromium binary (default: found on PATH)")
    args = ap.parse_args(argv)
    if not args.html.is_file():
        print(f"{args.html}: no such file", file=sys.stderr)
        return 2
    binary = find_chromium(args.chromium)
    if binary is None:
        print("no chromium binary found (apt-get install chromium)", file=sys.stderr)
        return 2
    try:
        rendered = render_dom(binary, args.html)
        if args.screenshot:
            screenshot(binary, args.html, args.screenshot)
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        print(f"could not render {args.html}: {exc}", file=sys.stderr)
        return 2
    problems = check(args.html, rendered, args.require_table)
    facts = page_facts(rendered)
    if problems:
        for p in problems:
            print(f"FAIL {p}")
        return 1
    print(f"OK {args.html}: {len(facts.tables)} tables, {facts.images} embedded images, "
          "no script, rendered DOM identical to the file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
