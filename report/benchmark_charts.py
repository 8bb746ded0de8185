"""The watermark benchmark's charts (MarkMyWords Figs. 1, 3, 6 and 8), in the style of
:mod:`evalrun.report.charts`: matplotlib's object API on the Agg canvas, deterministic files
(no timestamp in the PNG), colour-blind-safe colours. They draw numbers handed to them -- the
records of metrics.json, or the points the tamper-resistance record was computed from -- and
compute nothing themselves. Watermark specs (and attacks) are shown whole, wrapped at commas
(:func:`evalrun.report.charts.wrap_spec`): a spec cut in the middle hides its parameters (γ, δ).
Points are told apart by marker in a legend, not by labels beside them that would overlap."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from evalrun._util.specs import is_none
from evalrun.metrics import stats
from evalrun.metrics.tamper import DEFAULT_MIN_QUALITY, AttackPoint
from evalrun.report.charts import MODEL_COLOURS, _percent_axis, _save, wrap_spec, wrapped_names

Point = tuple[float, float]
#: series label -> category -> estimate (None: no record)
Series = Mapping[str, Mapping[str, "stats.Estimate | None"]]

#: darker = more tamper-resistant, as in MarkMyWords Fig. 6; starts light blue so R = 0 is visible
RESISTANCE_CMAP = ListedColormap(colormaps["Blues"](np.linspace(0.25, 1.0, 256)))
NAME_CHARS = 30    # tick labels (attacks, temperatures)
LEGEND_CHARS = 44  # legend entries and panel titles (a model · watermark spec)
#: markers telling schemes (size versus quality) and attacks (tamper resistance) apart
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "<", ">", "p", "h", "*")


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _grouped_bars(ax, categories: Sequence[str], series: Series, *, horizontal: bool,
                  top: float | None = None, missing: Mapping[str, str] | None = None) -> None:
    """Bars per category, one per series, with CI whiskers; ``inf`` values reach ``top``,
    hatched and marked ∞; missing values are marked n/a (or ``missing[category]``)."""
    names = list(series)
    n = max(1, len(names))
    width = 0.8 / n
    pos0 = np.arange(len(categories))
    display = wrapped_names(names, LEGEND_CHARS)
    for i, name in enumerate(names):
        colour = MODEL_COLOURS[i % len(MODEL_COLOURS)]
        for j, cat in enumerate(categories):
            est = series[name].get(cat)
            p = pos0[j] - 0.4 + width * (i + 0.5)
            label = display[name] if j == 0 else None
            if est is None or math.isnan(est.value):
                note = (missing or {}).get(cat, "n/a")
                (ax.text(0.01, p, note, va="center", fontsize=6) if horizontal else
                 ax.text(p, 0.01 * (top or 1.0), note, rotation=90, ha="center", va="bottom", fontsize=6))
                if label:  # keep the legend entry
                    (ax.barh if horizontal else ax.bar)(p, 0.0, width * 0.92, color=colour, label=label)
                continue
            if math.isinf(est.value):
                assert top is not None
                ax.bar(p, top, width * 0.92, color="white", edgecolor=colour, hatch="//", label=label)
                ax.text(p, top, "∞", ha="center", va="bottom", fontsize=9)
                continue
            lo = max(0.0, est.value - est.low) if _finite(est.low) else 0.0
            hi = (max(0.0, est.high - est.value) if _finite(est.high)
                  else (top - est.value if top is not None else 0.0))
            err = [[lo], [hi]]
            kw = {"color": colour, "label": label, "capsize": 2,
                  "error_kw": {"elinewidth": 0.7, "ecolor": "#333333"}}
            if horizontal:
                ax.barh(p, est.value, height=width * 0.92, xerr=err, **kw)
            else:
                ax.bar(p, est.value, width=width * 0.92, yerr=err, **kw)
    ticks = [wrap_spec(c, NAME_CHARS) for c in categories]
    if horizontal:
        ax.set_yticks(pos0, ticks)
        ax.set_ylim(len(categories) - 0.5, -0.5)
    else:
        ax.set_xticks(pos0, ticks)
        ax.set_xlim(-0.5, len(categories) - 0.5)


def watermark_size(panels: Mapping[str, Series], path: Path) -> Path:
    """MarkMyWords Fig. 1: watermark size E (median tokens to detection at p <= threshold) per
    scheme and sampling temperature, one panel per pack; never-detected medians (+inf) are
    hatched bars marked ∞."""
    packs = list(panels)
    ncols = min(3, max(1, len(packs)))
    nrows = math.ceil(len(packs) / ncols)
    fig = Figure(figsize=(6.2 * ncols, 4.2 * nrows + 0.8), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for k, pack in enumerate(packs):
        ax = axes[k // ncols][k % ncols]
        series = panels[pack]
        temps = sorted({t for s in series.values() for t in s}, key=float)
        finite = [v for s in series.values() for e in s.values() if e is not None
                  for v in (e.value, e.high) if _finite(v)]
        top = max(finite, default=10.0) * 1.2 or 10.0
        _grouped_bars(ax, temps, series, horizontal=False, top=top)
        ax.set_ylim(0, top * 1.08)
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel("sampling temperature")
        ax.set_ylabel("watermark size E (tokens, 95% CI)")
        ax.set_title(pack, fontsize=10)
        ax.legend(title="model · watermark", fontsize=7, title_fontsize=7, loc="upper center",
                  bbox_to_anchor=(0.5, -0.16), ncol=min(2, len(series)), frameon=False)
    for k in range(len(packs), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle("Watermark size per scheme and temperature (MarkMyWords Fig. 1)", fontsize=12)
    return _save(fig, path)


@dataclass(frozen=True)
class TamperPanel:
    """One scheme's tamper-resistance plot (MarkMyWords Fig. 3)."""

    title: str
    #: the attacks R is computed from: name -> (quality retention, detection rate)
    points: Mapping[str, Point]
    #: paraphrase attacks, drawn apart and left out of R
    excluded: Mapping[str, Point]
    #: lower convex hull of ``points`` with (0, 0) and (1, 1) (:func:`evalrun.metrics.lower_hull`)
    hull: Sequence[Point]
    best: AttackPoint | None
    resistance: float | None
    quality_label: str


def _attack_styles(panels: Sequence[TamperPanel]) -> dict[str, tuple[str, str]]:
    """A marker and colour per attack, the same in every panel; paraphrases grey."""
    names = sorted({name for p in panels for name in p.points})
    styles = {name: (MARKERS[i % len(MARKERS)], MODEL_COLOURS[i % len(MODEL_COLOURS)])
              for i, name in enumerate(names)}
    excluded = sorted({name for p in panels for name in p.excluded} - set(styles))
    styles.update({name: ("x" if i == 0 else MARKERS[i % len(MARKERS)], "#777777") for i, name in enumerate(excluded)})
    return styles


def tamper_figure(panels: Sequence[TamperPanel]) -> Figure:
    """The figure :func:`tamper_resistance` saves (kept apart so tests can read its lines:
    the hull is the line with gid ``hull``). Attacks are told apart by marker and colour in one
    legend below the panels; each panel's title names its watermark spec whole and its best attack."""
    ncols = min(3, max(1, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    styles = _attack_styles(panels)
    # h_pad: the panels' titles (a wrapped spec, R, the best attack) keep clear of the suptitle
    fig = Figure(figsize=(5.0 * ncols, 5.6 * nrows + 0.4 + 0.18 * math.ceil(len(styles) / 3)),
                 layout=ConstrainedLayoutEngine(h_pad=0.08))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    handles: dict[str, Any] = {}
    for k, panel in enumerate(panels):
        ax = axes[k // ncols][k % ncols]
        ax.plot([0, 1], [0, 1], color="#bbbbbb", linestyle=":", linewidth=0.8)
        hx, hy = zip(*panel.hull)
        ax.fill_between(hx, hy, color="#0072B2", alpha=0.15, linewidth=0)
        ax.plot(hx, hy, color="#0072B2", linewidth=1.2, gid="hull")
        for group, gid in ((panel.points, "attacks"), (panel.excluded, "excluded")):
            for name, (x, y) in group.items():
                marker, colour = styles[name]
                label = name if gid == "attacks" else f"{name} (paraphrase, not in R)"
                handles[label] = ax.scatter([x], [y], marker=marker, color=colour, s=30, zorder=3, gid=gid,
                                            label=label, alpha=0.85)
        ax.axvline(DEFAULT_MIN_QUALITY, color="#D55E00", linestyle="--", linewidth=0.8)
        best = "none"
        if panel.best is not None:
            ax.axhline(panel.best.detection_rate, color="#D55E00", linestyle="--", linewidth=0.8)
            best = f"{panel.best.name} (detected {panel.best.detection_rate:.0%})"
        ax.set_xlim(-0.02, 1.04)
        ax.set_ylim(-0.03, 1.05)
        ax.set_box_aspect(1)
        _percent_axis(ax, "y")
        ax.set_xlabel(panel.quality_label, fontsize=8)
        ax.set_ylabel("detection rate after attack", fontsize=8)
        r = "n/a" if panel.resistance is None else f"{panel.resistance:.3f}"
        title = [wrap_spec(line, LEGEND_CHARS) for line in panel.title.split("\n")]
        title += [f"R = {r}", wrap_spec(f"best attack keeping ≥ 80% quality: {best}", LEGEND_CHARS)]
        ax.set_title("\n".join(title), fontsize=8)
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    if handles:
        ordered = sorted(handles, key=lambda label: ("not in R" in label, label))
        fig.legend([handles[label] for label in ordered], [wrap_spec(label, LEGEND_CHARS) for label in ordered],
                   title="attack (dashed: 80% quality kept, and the best attack's detection rate)",
                   loc="outside lower center", ncol=min(3, len(ordered)), fontsize=7, title_fontsize=7,
                   frameon=False)
    fig.suptitle("Tamper resistance (MarkMyWords Fig. 3): attacks, lower convex hull, best attack keeping 80%",
                 fontsize=10)
    return fig


def tamper_resistance(panels: Sequence[TamperPanel], path: Path) -> Path:
    return _save(tamper_figure(panels), path)


@dataclass(frozen=True)
class AttackPanel:
    """One pack's detection and quality retention per attack (MarkMyWords Fig. 8)."""

    pack: str
    attacks: Sequence[str]
    detection: Series
    retention: Series | None
    quality_label: str


def attacks(panels: Sequence[AttackPanel], path: Path) -> Path:
    """Per attack and scheme: the detection rate left (Wilson 95%) and the quality retained
    (bootstrap 95%), one row of panels per pack."""
    height = sum(1.4 + 0.22 * len(p.attacks) * max(1, len(p.detection)) for p in panels)
    fig = Figure(figsize=(12, height + 0.8), layout="constrained")
    axes = fig.subplots(len(panels), 2, squeeze=False)
    for k, panel in enumerate(panels):
        left, right = axes[k]
        _grouped_bars(left, panel.attacks, panel.detection, horizontal=True)
        left.set_xlim(0, 1)
        _percent_axis(left, "x")
        left.set_xlabel("detection rate (95% Wilson CI)")
        left.set_title(f"{panel.pack}: detection", fontsize=9)
        if k == 0:
            handles, labels = left.get_legend_handles_labels()
            fig.legend(handles, labels, title="model · watermark", loc="outside lower center",
                       ncol=min(2, len(labels)), fontsize=7, title_fontsize=7, frameon=False)
        if panel.retention is None:
            right.text(0.5, 0.5, "no quality answers:\nquality retention not available", ha="center",
                       va="center", fontsize=9, transform=right.transAxes)
            right.set_axis_off()
            continue
        _grouped_bars(right, panel.attacks, panel.retention, horizontal=True,
                      missing={a: "baseline (no attack)" for a in panel.attacks if is_none(a)})
        right.set_xlim(0, 1.05)
        _percent_axis(right, "x")
        right.set_xlabel(f"{panel.quality_label} (95% bootstrap CI)")
        right.set_title(f"{panel.pack}: quality kept", fontsize=9)
        right.tick_params(axis="y", labelleft=False)
    fig.suptitle("Detection and quality per attack (MarkMyWords Fig. 8)", fontsize=11)
    return _save(fig, path)


@dataclass(frozen=True)
class SizeQualityPoint:
    label: str
    quality: float
    size: float
    resistance: float | None


@dataclass(frozen=True)
class SizeQualityPanel:
    """One pack's schemes (each pack has its own quality source, so its own axis)."""

    pack: str
    quality_label: str
    points: Sequence[SizeQualityPoint]


def size_quality(panels: Sequence[SizeQualityPanel], path: Path) -> Path:
    """MarkMyWords Fig. 6: watermark size against quality per scheme, coloured by tamper
    resistance (darker = more resistant), one panel per pack; each scheme has its own marker,
    named whole in the legend below its panel; a size of +inf sits on the dotted top line, a
    scheme without R is hollow."""
    ncols = min(3, max(1, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    lines = max((wrap_spec(p.label, LEGEND_CHARS).count("\n") + 1 for panel in panels for p in panel.points), default=1)
    legend_inches = 0.16 * lines * max((len(panel.points) for panel in panels), default=1)
    fig = Figure(figsize=(5.6 * ncols + 1.0, (4.6 + legend_inches) * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    norm = Normalize(0.0, 1.0)
    for k, panel in enumerate(panels):
        ax = axes[k // ncols][k % ncols]
        finite = [p.size for p in panel.points if math.isfinite(p.size)]
        top = max(finite, default=10.0) * 1.25
        for i, p in enumerate(panel.points):
            y = p.size if math.isfinite(p.size) else top
            face = "none" if p.resistance is None else RESISTANCE_CMAP(norm(p.resistance))
            ax.scatter([p.quality], [y], marker=MARKERS[i % len(MARKERS)], s=55, facecolors=face,
                       edgecolors="#333333", linewidths=0.8, zorder=3, label=wrap_spec(p.label, LEGEND_CHARS))
        if any(not math.isfinite(p.size) for p in panel.points):
            ax.axhline(top, color="#bbbbbb", linestyle=":", linewidth=0.8)
            ax.text(0.01, top, "∞ (more than half never detected)", transform=ax.get_yaxis_transform(),
                    va="bottom", fontsize=6, color="#777777")
        qs = [p.quality for p in panel.points]
        pad = max(0.02, 0.15 * (max(qs) - min(qs))) if qs else 0.05
        ax.set_xlim(min(qs, default=0.0) - pad, max(qs, default=1.0) + pad)
        ax.set_ylim(0, top * 1.12)
        ax.grid(color="#eeeeee", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel(panel.quality_label, fontsize=8)
        ax.set_ylabel("watermark size E (tokens)", fontsize=8)
        ax.set_title(panel.pack, fontsize=9)
        legend = ax.legend(title="model · watermark (fill: tamper resistance R)", loc="upper center",
                           bbox_to_anchor=(0.5, -0.14), fontsize=7, title_fontsize=7, frameon=False)
        for handle in legend.legend_handles:  # the marker's shape names the scheme; its fill is R
            if handle is not None:
                handle.set_facecolor("white")
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.colorbar(ScalarMappable(norm=norm, cmap=RESISTANCE_CMAP), ax=axes[:, -1].tolist(),
                 label="tamper resistance R (hollow: n/a)")
    fig.suptitle("Size versus quality, coloured by tamper resistance (MarkMyWords Fig. 6)", fontsize=11)
    return _save(fig, path)
