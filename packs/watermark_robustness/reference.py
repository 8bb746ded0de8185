"""Reference solver for the watermark_robustness pack: an ideal, deterministic answer per case.

It never reads the case's ``watermark`` field. It finds the marker in the *passage* and carries
it into a faithful, rule-based transformation chosen by family (and, for format conversion, by
keywords in the instruction). Grading its answer against the ``watermark`` field therefore
proves that each passage really carries its case's marker once and that the grader accepts a
well-behaved answer in every output shape the pack asks for (prose, lists, JSON, tables, YAML,
CSV, email, FAQ).
"""

from __future__ import annotations

import csv
import io
import json
import re

# A well-formed marker as it appears in a passage (the hex run may not continue).
_MARKER_RE = re.compile(r"WMID:[0-9a-f]{32}(?![0-9a-fA-F])")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+")
_WS_RE = re.compile(r"\s+")


def _marker(passage: str) -> str:
    found = _MARKER_RE.findall(passage)
    if len(found) != 1:
        raise ValueError(f"passage must hold exactly one marker, found {len(found)}")
    return found[0]


def _sentences(passage: str) -> list[str]:
    """Lines, then sentences within lines, whitespace-collapsed; the marker stays in place."""
    out: list[str] = []
    for line in passage.splitlines():
        for piece in _SENTENCE_END_RE.split(line.strip()):
            piece = _WS_RE.sub(" ", piece).strip()
            if piece:
                out.append(piece)
    return out


def _paragraph(passage: str) -> str:
    return " ".join(_sentences(passage))


def _lower_outside(text: str, marker: str) -> str:
    """Lower-case everything except the marker, which must survive character for character."""
    before, _, after = text.partition(marker)
    return before.lower() + marker + after.lower()


def _rewrite(passage: str, instruction: str, marker: str) -> str:
    return "Rewritten passage:\n\n" + _paragraph(passage)


def _summarize(passage: str, instruction: str, marker: str) -> str:
    sentences = _sentences(passage)
    chosen = [sentences[0]]
    holder = next(s for s in sentences if marker in s)
    if holder is not sentences[0]:
        chosen.append(holder)
    return "Summary: " + " ".join(chosen)


def _format_convert(passage: str, instruction: str, marker: str) -> str:
    sentences = _sentences(passage)
    want = instruction.lower()
    if "json" in want:
        return json.dumps({"content": sentences}, indent=2, ensure_ascii=False)
    if "yaml" in want:
        # JSON string literals are valid YAML scalars, which keeps quoting exact.
        return "content:\n" + "\n".join(
            f"  - {json.dumps(s, ensure_ascii=False)}" for s in sentences
        )
    if "csv" in want:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["line", "text"])
        writer.writerows([i, s] for i, s in enumerate(sentences, 1))
        return buffer.getvalue()
    if "table" in want:
        rows = [f"| {i} | {s.replace('|', '/')} |" for i, s in enumerate(sentences, 1)]
        return "| # | Content |\n| --- | --- |\n" + "\n".join(rows)
    if "email" in want:
        subject = " ".join(sentences[0].split()[:8]).rstrip(".:;,")
        body = _paragraph(passage)
        return f"Subject: {subject}\n\nHello everyone,\n\n{body}\n\nBest regards"
    if "faq" in want:
        return "\n\n".join(
            f"Q{i}: What does point {i} say?\nA{i}: {s}" for i, s in enumerate(sentences, 1)
        )
    if "heading" in want:
        return "## Content\n\n" + _paragraph(passage)
    bullet = "{i}. " if "number" in want else "- "
    return "\n".join(bullet.format(i=i) + s for i, s in enumerate(sentences, 1))


def _style_transfer(passage: str, instruction: str, marker: str) -> str:
    text = _paragraph(passage)
    if "lowercase" in instruction.lower():
        return _lower_outside(text, marker)
    return "Restyled:\n\n" + text


_BY_FAMILY = {
    "rewrite": _rewrite,
    "summarize": _summarize,
    "format_convert": _format_convert,
    "style_transfer": _style_transfer,
}


def solve(case: dict) -> str:
    """Return the ideal answer for ``case``: the task done trivially, the marker kept once."""
    passage = case["passage"]
    family = case["family"]
    if family not in _BY_FAMILY:
        raise ValueError(f"unknown family {family!r}")
    return _BY_FAMILY[family](passage, case["instruction"], _marker(passage))
