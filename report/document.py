"""A tiny document model rendered twice: to Markdown and to a self-contained HTML page.

Building the report once as data and rendering it twice keeps the two formats in step and
puts all escaping in one place: every string that reaches HTML goes through
:func:`html.escape`, and every string that reaches Markdown goes through :func:`md_escape`
(which also neutralises raw HTML, so a Markdown viewer cannot run a model's ``<script>``).
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Sequence, Union

from tabulate import tabulate

from evalrun._util.display import show_controls
from evalrun.watermark.naming import short_names


@dataclass
class Paragraph:
    text: str


@dataclass
class Table:
    """A table of pre-formatted string cells. ``id`` is the HTML anchor and test handle."""

    id: str
    headers: Sequence[str]
    rows: list[list[str]]
    caption: str = ""
    #: column indices holding free text (model output, reasons): wrapped, not truncated, in HTML
    text_columns: tuple[int, ...] = ()
    #: column indices holding watermark specs, shown by their short names (the full spec in
    #: HTML's tooltip); None: the columns headed ``watermark``. Provenance tables pass ``()``.
    spec_columns: tuple[int, ...] | None = None

    def specs_at(self) -> tuple[int, ...]:
        if self.spec_columns is not None:
            return self.spec_columns
        return tuple(i for i, h in enumerate(self.headers) if h == "watermark")


#: the header of a column holding the 95% interval of the column before it: report.html shows
#: the interval under its value, in one cell, so that wide benchmark tables fit a screen
INTERVAL_SUFFIX = ": 95% CI"


@dataclass
class Figure:
    """A PNG chart written to the output directory."""

    filename: str
    alt: str
    caption: str = ""


@dataclass
class Example:
    """One labelled record, e.g. a failure case: a title and (field, value) pairs."""

    title: str
    fields: list[tuple[str, str]]
    #: fields whose value is long text to show pre-formatted in HTML
    text_fields: tuple[str, ...] = ()


@dataclass
class Formats:
    """Blocks that differ by format: report.md stays short enough to read and diff (a compact
    per-case table), while the self-contained report.html keeps every detail (the evidence)."""

    markdown: list["Block"]
    html: list["Block"]


Block = Union[Paragraph, Table, Figure, Example, Formats]


@dataclass
class Section:
    title: str
    id: str
    level: int = 2
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    intro: list[str]
    sections: list[Section]


def _tables(blocks: Sequence[Block]) -> list[Table]:
    out: list[Table] = []
    for block in blocks:
        if isinstance(block, Table):
            out.append(block)
        elif isinstance(block, Formats):
            out += _tables([*block.markdown, *block.html])
    return out


def spec_names(doc: Document) -> dict[str, str]:
    """Every watermark spec the document's tables show, with the name a reader sees: one
    mapping for the whole document, so a spec reads alike in every table."""
    specs = [row[i] for sec in doc.sections for t in _tables(sec.blocks) for row in t.rows
             for i in t.specs_at() if i < len(row)]
    return short_names(specs)


def _shown(table: Table, names: dict[str, str]) -> list[list[str]]:
    """The table's rows with its spec columns' cells replaced by their short names."""
    at = set(table.specs_at())
    return [[names.get(c, c) if i in at else c for i, c in enumerate(row)] for row in table.rows]


# -- Markdown ------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*\[\]|])")


def md_escape(text: str) -> str:
    """One-line Markdown text: HTML-escaped, Markdown specials backslash-escaped, newlines as ⏎."""
    text = html.escape(show_controls(str(text)), quote=False)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return " ⏎ ".join(part.strip() for part in text.split("\n")) if "\n" in text else text


def md_unescape(text: str) -> str:
    """Inverse of :func:`md_escape` for one-line text (used by tests reading report.md)."""
    return html.unescape(re.sub(r"\\([\\`*\[\]|])", r"\1", text))


def render_markdown(doc: Document) -> str:
    parts = [f"# {md_escape(doc.title)}", ""]
    parts += [md_escape(p) + "\n" for p in doc.intro]
    parts.append("## Contents\n")
    for sec in doc.sections:
        indent = "  " * (sec.level - 2)
        parts.append(f"{indent}- [{md_escape(sec.title)}](#{sec.id})")
    parts.append("")
    names = spec_names(doc)
    for sec in doc.sections:
        parts.append(f'<a id="{sec.id}"></a>\n')
        parts.append(f"{'#' * sec.level} {md_escape(sec.title)}\n")
        for block in sec.blocks:
            parts.append(_md_block(block, names))
    return _fill("report.md", title=md_escape(doc.title), body="\n".join(parts).rstrip() + "\n")


#: a longer Markdown table is written without padding its cells to the column's width: in a
#: long table one long cell (a false positive's reason naming a full spec) would pad every row
PADDED_ROWS = 50


def _unpadded(table: Table, rows: list[list[str]]) -> str:
    """A pipe table, every cell as long as its text (Markdown does not need aligned columns)."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    out = [line([md_escape(h) for h in table.headers]), "|" + "|".join(":---" for _ in table.headers) + "|"]
    out += [line([md_escape(c) for c in row]) for row in rows]
    return "\n".join(out)


def _md_block(block: Block, names: dict[str, str]) -> str:
    if isinstance(block, Paragraph):
        return md_escape(block.text) + "\n"
    if isinstance(block, Table):
        caption = f"*{md_escape(block.caption)}*\n\n" if block.caption else ""
        if not block.rows:
            return caption + "(no rows)\n"
        rows = _shown(block, names)
        if len(rows) > PADDED_ROWS:
            return caption + _unpadded(block, rows) + "\n"
        body = tabulate(
            [[md_escape(c) for c in row] for row in rows],
            headers=[md_escape(h) for h in block.headers],
            tablefmt="pipe",
            disable_numparse=True,
        )
        return caption + body + "\n"
    if isinstance(block, Figure):
        caption = f"\n*{md_escape(block.caption)}*" if block.caption else ""
        return f"![{md_escape(block.alt)}]({block.filename}){caption}\n"
    if isinstance(block, Example):
        lines = [f"**{md_escape(block.title)}**", ""]
        lines += [f"- **{md_escape(k)}:** {md_escape(v)}" for k, v in block.fields]
        return "\n".join(lines) + "\n"
    if isinstance(block, Formats):
        return "\n".join(_md_block(b, names) for b in block.markdown)
    raise TypeError(f"unknown block {block!r}")


# -- HTML ----------------------------------------------------------------------------------

def _e(text: object) -> str:
    return html.escape(show_controls(str(text)), quote=True)


def render_html(doc: Document, asset_dir: Path) -> str:
    """The whole page as one string; figures are read from ``asset_dir`` and inlined."""
    toc = ["<nav><h2>Contents</h2><ul>"]
    for sec in doc.sections:
        cls = f' class="toc{sec.level}"'
        toc.append(f'<li{cls}><a href="#{_e(sec.id)}">{_e(sec.title)}</a></li>')
    toc.append("</ul></nav>")
    body = [f"<p>{_e(p)}</p>" for p in doc.intro] + ["\n".join(toc)]
    names = spec_names(doc)
    for sec in doc.sections:
        body.append(f'<section id="{_e(sec.id)}">')
        body.append(f"<h{sec.level}>{_e(sec.title)}</h{sec.level}>")
        for block in sec.blocks:
            body.append(_html_block(block, asset_dir, names))
        body.append("</section>")
    css = resources.files("evalrun.report").joinpath("templates/report.css").read_text("utf-8")
    return _fill("report.html", title=_e(doc.title), css=css, body="\n".join(body))


def _html_table(table: Table, names: dict[str, str]) -> str:
    """A table whose spec cells show short names (the full spec as tooltip) and whose interval
    columns sit under their values."""
    merged = {i for i, h in enumerate(table.headers) if i and h == table.headers[i - 1] + INTERVAL_SUFFIX}
    specs = set(table.specs_at())
    out = [f'<div class="scroll"><table id="{_e(table.id)}">']
    if table.caption:
        out.append(f"<caption>{_e(table.caption)}</caption>")
    out.append("<thead><tr>" + "".join(
        f"<th>{_e(h)}" + ('<br><span class="ci">(95% CI)</span>' if i + 1 in merged else "") + "</th>"
        for i, h in enumerate(table.headers) if i not in merged) + "</tr></thead>")
    out.append("<tbody>")
    for row in table.rows:
        cells = []
        for i, cell in enumerate(row):
            if i in merged:
                continue
            if i in specs and names.get(cell, cell) != cell:
                text = f'<span title="{_e(cell)}">{_e(names[cell])}</span>'
            else:
                text = _e(cell)
            if i + 1 in merged and i + 1 < len(row):
                text += f'<br><span class="ci">{_e(row[i + 1])}</span>'
            cls = "text" if i in table.text_columns else "spec" if i in specs else ""
            cells.append(f'<td class="{cls}">{text}</td>' if cls else f"<td>{text}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _html_block(block: Block, asset_dir: Path, names: dict[str, str]) -> str:
    if isinstance(block, Paragraph):
        return f"<p>{_e(block.text)}</p>"
    if isinstance(block, Table):
        return _html_table(block, names)
    if isinstance(block, Figure):
        data = base64.b64encode((asset_dir / block.filename).read_bytes()).decode("ascii")
        caption = f"<figcaption>{_e(block.caption)}</figcaption>" if block.caption else ""
        return (f'<figure id="fig-{_e(Path(block.filename).stem)}">'
                f'<img alt="{_e(block.alt)}" src="data:image/png;base64,{data}">'
                f"{caption}</figure>")
    if isinstance(block, Example):
        out = [f'<div class="example"><h4>{_e(block.title)}</h4><dl>']
        for key, value in block.fields:
            val = f"<pre>{_e(value)}</pre>" if key in block.text_fields else _e(value)
            out.append(f"<dt>{_e(key)}</dt><dd>{val}</dd>")
        out.append("</dl></div>")
        return "\n".join(out)
    if isinstance(block, Formats):
        return "\n".join(_html_block(b, asset_dir, names) for b in block.html)
    raise TypeError(f"unknown block {block!r}")


def _fill(template: str, **values: str) -> str:
    text = resources.files("evalrun.report").joinpath(f"templates/{template}").read_text("utf-8")
    return Template(text).substitute(values)
