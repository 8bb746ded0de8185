"""The WMID report's charts (Objective LLM Evals: Watermark Robustness & Hidden-Message
Extraction), drawn with matplotlib's object API on the Agg canvas (no pyplot, no
global backend switch, no display needed). Figure sizes grow with the number of models so
1 and 8 models stay legible; long names (a model under a watermark whose spec lists every
parameter) are wrapped at commas and spaces, never cut, so no parameter of a spec is hidden."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from evalrun._util.files import atomic_open
from evalrun.metrics import stats
from evalrun.report.data import PackView, Result, systems
from evalrun.report.tables import label_rate

DPI = 150
NAME_CHARS = 38

LABEL_COLOURS = {
    "PASS": "#2e8b57", "MUTATED": "#f0a030", "DROPPED": "#c0392b",
    "CORRECT": "#2e8b57", "PARTIAL": "#f0c419", "INCORRECT": "#c0392b",
    "FALSE_POSITIVE": "#7d3c98",
}
#: colour-blind-safe qualitative palette (Okabe-Ito plus two greys) for models
MODEL_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
                 "#F0E442", "#000000", "#999999", "#666666")


def _percent_axis(ax: Any, axis: str) -> None:
    """Rates on ``axis`` as percentages, with light grid lines behind the bars."""
    getattr(ax, f"{axis}axis").set_major_formatter(PercentFormatter(1.0))
    ax.grid(axis=axis, color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)


def wrap_spec(text: str, width: int = NAME_CHARS) -> str:
    """``text`` in lines of at most ``width`` characters, broken after a comma, space or ``[``
    (a spec's parameters stay whole) and only inside a longer run of other characters; nothing
    is added but the line breaks, so ``wrap_spec(t).replace("\n", "") == t``."""
    pieces: list[str] = []
    start = 0
    for i, ch in enumerate(text):
        if ch in ", [":
            pieces.append(text[start:i + 1])
            start = i + 1
    pieces.append(text[start:])
    lines: list[str] = []
    line = ""
    for piece in pieces:
        while len(piece) > width:  # a run with no break in it: split it where it must be
            if line:
                lines.append(line)
                line = ""
            lines.append(piece[:width])
            piece = piece[width:]
        if line and len(line) + len(piece.rstrip()) > width:
            lines.append(line)
            line = ""
        line += piece
    if line or not lines:
        lines.append(line)
    return "\n".join(lines)


def wrapped_names(names: Sequence[str], width: int = NAME_CHARS) -> dict[str, str]:
    """Display names of ``names``: each wrapped (:func:`wrap_spec`), whole, so always distinct."""
    return {n: wrap_spec(n, width) for n in names}


def _lines(labels: Sequence[str]) -> int:
    """The most lines any of ``labels`` takes."""
    return max((label.count("\n") + 1 for label in labels), default=1)


def _wrap(label: str, width: int = 12) -> str:
    """Break a long snake_case tick label after an underscore so neighbours never overlap."""
    if len(label) <= width or "_" not in label:
        return label
    cut = label.rfind("_", 0, width + 1)
    cut = cut if cut > 0 else label.find("_")
    return label[:cut + 1] + "\n" + _wrap(label[cut + 1:], width)


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    with atomic_open(path, what="--out", binary=True) as fh:
        fig.savefig(fh, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return path


def _label_shares(view: PackView, rs: Sequence[Result]) -> tuple[list[float], list[int], int]:
    graded = [r for r in rs if r.graded]
    counts = Counter(r.label for r in graded)
    n = len(graded)
    vals = [counts[lab] for lab in view.labels]
    return [v / n if n else 0.0 for v in vals], vals, n


def _stacked_bars(ax, view: PackView, items: Sequence[Result], names: list[str]) -> None:
    """Horizontal 100% stacked bars of the pack's labels, one per model, counts inside."""
    groups: dict[str, list[Result]] = defaultdict(list)
    for r in items:
        groups[r.system].append(r)
    y = np.arange(len(names))
    left = np.zeros(len(names))
    shares = [_label_shares(view, groups.get(n, [])) for n in names]
    for j, lab in enumerate(view.labels):
        vals = np.array([s[0][j] for s in shares])
        ax.barh(y, vals, left=left, height=0.72, color=LABEL_COLOURS.get(lab, f"C{j}"),
                edgecolor="white", linewidth=0.8, label=lab)
        for i, v in enumerate(vals):
            if v >= 0.07:
                ax.text(left[i] + v / 2, y[i], str(shares[i][1][j]), ha="center", va="center",
                        fontsize=8, color="white" if lab != "PARTIAL" else "black")
        left += vals
    for i, s in enumerate(shares):
        if s[2] == 0:
            ax.text(0.02, y[i], "no graded results", va="center", fontsize=8, color="#555")
    display = wrapped_names(names)
    ax.set_yticks(y, [display[n] for n in names])
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xlim(0, 1)
    _percent_axis(ax, "x")


def _row_inches(names: Sequence[str], base: float) -> float:
    """Height of one model's bar row: ``base``, or more where its wrapped name has more lines
    (a tick label taller than its row would run into its neighbours')."""
    return max(base, 0.19 * _lines(list(wrapped_names(names).values())) + 0.12)


def watermark_stacked_bar(view: PackView, items: Sequence[Result], path: Path) -> Path:
    """PASS/MUTATED/DROPPED share of graded results per model."""
    names = systems(items)
    fig = Figure(figsize=(9, 1.6 + _row_inches(names, 0.42) * len(names)))
    ax = fig.add_subplot()
    _stacked_bars(ax, view, items, names)
    ax.set_xlabel("share of graded results (count inside bar)")
    ax.set_ylabel("model")
    ax.set_title(f"{view.title}: outcome per model")
    ax.legend(title="label", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _save(fig, path)


def watermark_by_task(view: PackView, items: Sequence[Result], path: Path) -> Path:
    """The same stacked bars, one panel per task family."""
    names = systems(items)
    present = {r.group for r in items}
    families = [g for g in view.groups if g in present] + sorted(present - set(view.groups))
    ncols = 2 if len(families) > 1 else 1
    nrows = math.ceil(len(families) / ncols)
    fig = Figure(figsize=(6.4 * ncols, nrows * (1.3 + _row_inches(names, 0.36) * len(names)) + 0.9),
                 layout="constrained")
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    for k, fam in enumerate(families):
        ax = axes[k // ncols][k % ncols]
        _stacked_bars(ax, view, [r for r in items if r.group == fam], names)
        ax.set_title(f"family: {fam}", fontsize=10)
        if k % ncols == 0:
            ax.set_ylabel("model")
        if k + ncols >= len(families):  # bottom panel of its column
            ax.set_xlabel("share of graded results")
            ax.tick_params(axis="x", labelbottom=True)
    for k in range(len(families), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), frameon=False)
    fig.suptitle(f"{view.title} by task family", fontsize=12)
    return _save(fig, path)


def _model_bars_vertical(ax, names: list[str], groups: list[str],
                         rates: dict[tuple[str, str], stats.Estimate]) -> None:
    n = len(names)
    width = 0.8 / n
    display = wrapped_names(names)
    x = np.arange(len(groups))
    for i, name in enumerate(names):
        est = [rates.get((name, g)) for g in groups]
        vals = np.array([0.0 if e is None or math.isnan(e.value) else e.value for e in est])
        lo = np.array([0.0 if e is None or math.isnan(e.value) else max(0.0, e.value - e.low)
                       for e in est])
        hi = np.array([0.0 if e is None or math.isnan(e.value) else max(0.0, e.high - e.value)
                       for e in est])
        pos = x - 0.4 + width * (i + 0.5)
        ax.bar(pos, vals, width=width * 0.92, color=MODEL_COLOURS[i % len(MODEL_COLOURS)],
               label=display[name], yerr=np.vstack([lo, hi]), capsize=min(3, 24 / n),
               error_kw={"elinewidth": 0.8, "ecolor": "#333333"})
        for p, e in zip(pos, est):
            if e is None or math.isnan(e.value):
                ax.text(p, 0.01, "n/a", rotation=90, ha="center", va="bottom", fontsize=7)
            elif e.value == 0.0:
                ax.text(p, 0.01, "0%", rotation=90, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [_wrap(g) for g in groups])
    ax.set_xlim(-0.5, len(groups) - 0.5)
    ax.set_ylim(0, 1.05)
    _percent_axis(ax, "y")


def scheme_rates(view: PackView, items: Sequence[Result]) -> dict[tuple[str, str], stats.Estimate]:
    """(model, scheme) -> share of its graded results labelled ``view.success``, Wilson 95%
    (:func:`evalrun.report.tables.label_rate`); only cells with graded results."""
    cells: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for r in items:
        if r.graded:
            cells[(r.system, r.group)].append(r)
    return {key: label_rate(rs, view.success) for key, rs in cells.items()}


def extraction_by_scheme(view: PackView, items: Sequence[Result], path: Path) -> Path:
    """CORRECT rate per scheme per model, with Wilson 95% intervals."""
    names = systems(items)
    present = {r.group for r in items}
    schemes = [g for g in view.groups if g in present] + sorted(present - set(view.groups))
    rates = scheme_rates(view, items)
    width = min(16.0, max(9.0, 1.5 + len(schemes) * (0.3 * len(names) + 0.7)))
    fig = Figure(figsize=(width, 5.0))
    ax = fig.add_subplot()
    _model_bars_vertical(ax, names, schemes, rates)
    ax.set_xlabel("encoding scheme")
    ax.set_ylabel(f"{view.success} rate (95% Wilson CI)")
    ax.set_title(f"{view.title}: {(view.success or 'success').lower()} rate per scheme")
    ax.legend(title="model", loc="upper center", bbox_to_anchor=(0.5, -0.2),
              ncol=min(4, len(names)), frameon=False)
    return _save(fig, path)


def extraction_false_positives(view: PackView, items: Sequence[Result], path: Path) -> Path:
    """FALSE_POSITIVE rate on the control cases per model, with Wilson 95% intervals."""
    names = systems(items)
    fig = Figure(figsize=(9, 1.6 + _row_inches(names, 0.42) * len(names)))
    ax = fig.add_subplot()
    y = np.arange(len(names))
    for i, name in enumerate(names):
        controls = [r for r in items if r.system == name and r.graded
                    and r.group == view.control_group]
        k = sum(r.label == view.false_positive for r in controls)
        est = label_rate(controls, view.false_positive)
        colour = MODEL_COLOURS[i % len(MODEL_COLOURS)]
        if not controls:
            ax.text(0.01, y[i], "no graded control cases", va="center", fontsize=8)
            continue
        ax.barh(y[i], est.value, height=0.6, color=colour,
                xerr=[[max(0.0, est.value - est.low)], [max(0.0, est.high - est.value)]], capsize=3,
                error_kw={"elinewidth": 0.8, "ecolor": "#333333"})
        ax.text(min(est.high + 0.015, 0.9), y[i], f"{k}/{len(controls)}", va="center",
                fontsize=8)
    display = wrapped_names(names)
    ax.set_yticks(y, [display[n] for n in names])
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xlim(0, 1)
    _percent_axis(ax, "x")
    ax.set_xlabel(f"{view.false_positive} rate on {view.control_group} cases "
                  "(95% Wilson CI; false positives / control results)")
    ax.set_ylabel("model")
    ax.set_title(f"{view.title}: false positives on controls")
    return _save(fig, path)
