"""What a reader at a given screen width would find broken in a page's layout, read from the
rendered DOM of headless Chromium (:class:`evalrun.testing.browser.Browser`).

Three faults, each named with the element it concerns:

* a table wider than the box that holds it (the reader scrolls sideways, and a caption inside
  the table is cut at the box's edge);
* any element reaching past the page's width (the whole page scrolls sideways);
* a table row far taller than its tallest content (a squeezed column stacking one word per
  line, or an empty row stretched by a neighbour).
"""

from __future__ import annotations

from typing import Protocol

#: evaluated in the page; returns a list of problems (empty: the layout holds)
CHECK = r"""(() => {
  const width = document.documentElement.clientWidth;
  const found = [];
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : e.className ? '.' + String(e.className).split(' ')[0] : '');
  for (const t of document.querySelectorAll('table')) {
    const box = t.parentElement;
    if (t.scrollWidth > box.clientWidth + 1)
      found.push(`${name(t)} is ${t.scrollWidth} px wide in a ${box.clientWidth} px box`);
    for (const row of t.rows) {
      const height = row.getBoundingClientRect().height;
      let tallest = 0;
      for (const cell of row.cells) {
        const range = document.createRange();
        range.selectNodeContents(cell);
        tallest = Math.max(tallest, range.getBoundingClientRect().height);
      }
      if (height > 2 * tallest + 40) {
        found.push(`${name(t)} has a row ${Math.round(height)} px tall around ${Math.round(tallest)} px of content`);
        break;
      }
    }
  }
  for (const e of document.body.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > width + 1 && getComputedStyle(e).position !== 'fixed'
        && !e.closest('.scroll, pre, details:not([open])')) {
      found.push(`${name(e)} reaches ${Math.round(r.right)} px, past the page's ${width} px`);
      break;
    }
  }
  return found;
})()"""


class _Page(Protocol):
    def evaluate(self, expression: str) -> object: ...


def layout_problems(page: _Page) -> list[str]:
    """The faults of the page loaded in ``page`` (a :class:`Browser`); empty when none."""
    found = page.evaluate(CHECK)
    return [str(p) for p in found] if isinstance(found, list) else [f"layout check returned {found!r}"]
