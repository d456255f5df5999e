"""PNG figures for sweeps: metric vs number of views (the paper's Figure 4) and with vs without CoT
(Figures 5/9, drawn as paired bars with intervals, which read faster than a radar for a few models)."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.store import write_atomically

# text.parse_math off: labels are model names and categories from run folders, drawn as the
# characters they are (a name with `$\x$` would otherwise be parsed as math, and fail the report).
STYLE: dict[str, Any] = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
         "xtick.labelsize": 9, "ytick.labelsize": 9, "axes.spines.top": False, "axes.spines.right": False,
         "text.parse_math": False}
DPI = 150
# Every figure fits 1,200 px wide: in a report or a README a wider one is scaled down until its labels blur.
MAX_WIDTH_IN = 8.0  # 1,200 px at DPI
# One (colour, marker) pair per series: colour alone fails in greyscale and for colour-blind readers,
# and matplotlib's own cycle has 10 colours, so the 11th model looked like the 1st.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#e7969c")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p", "d", "8")
CHANCE_STYLE: dict[str, Any] = {"color": "0.35", "linestyle": "--", "linewidth": 1.3}


def series_style(number: int) -> tuple[str, str]:
    """(colour, marker) of the `number`-th series: distinct for the first len(COLOURS) * len(MARKERS)."""
    return COLOURS[number % len(COLOURS)], MARKERS[(number + number // len(COLOURS)) % len(MARKERS)]


@dataclass(frozen=True)
class Point:
    """One measured cell: x (views), y, and its 95% interval when known (all in display units)."""

    x: float
    y: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Panel:
    """One subplot: a y label with units and one line per series (model); `chance`: the figure of a
    uniform guess, drawn as a dashed line (accuracy panels of classification)."""

    title: str
    ylabel: str
    series: dict[str, list[Point]]
    lower_is_better: bool = False
    chance: float | None = None


def _pyplot() -> Any:
    """matplotlib.pyplot, imported on first plot: every report imports this module, few draw, and
    the import costs more than a second of a run's start-up."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window: works headless and in CI
    import matplotlib.pyplot as plt

    return plt


def plot_views(path: Path, title: str, panels: Sequence[Panel | None], *, columns: int = 2) -> Path:
    """Metric against the number of views sent, one line per model with CI bars, one subplot per
    panel on a grid `columns` wide; a `None` panel is the slot where the legend goes."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    labels = sorted({label for panel in panels if panel for label in panel.series})
    styles = {label: series_style(number) for number, label in enumerate(labels)}
    columns = max(1, min(columns, len(panels)))
    rows = -(-len(panels) // columns)
    spare = None in panels
    entries = len(labels) + any(panel and panel.chance is not None for panel in panels)
    ncol = 2 if entries > 1 else 1
    legend_in = 0 if spare else 0.25 + 0.2 * -(-entries // ncol)  # legend below the grid, in inches
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(rows, columns, figsize=(MAX_WIDTH_IN, 1.0 + 3.0 * rows + legend_in),
                                 squeeze=False)
        flat = list(axes.flat)
        banded, chance_shown = False, None
        for ax, panel in zip(flat, [*panels, *[None] * (len(flat) - len(panels))], strict=True):
            if panel is None:
                ax.axis("off")
                continue
            lines = sorted(panel.series.items())
            for number, (label, points) in enumerate(lines):
                points = sorted(points, key=lambda p: p.x)
                # a small sideways shift per line keeps overlapping error bars apart
                shift = 0.05 * (number - (len(lines) - 1) / 2) if len(lines) > 1 else 0.0
                xs, ys = [p.x + shift for p in points], [p.y for p in points]
                color, marker = styles[label]
                ax.plot(xs, ys, marker=marker, markersize=6, linewidth=1.8, color=color)
                if (errors := _errors(points)) is not None:
                    banded = True
                    ax.errorbar(xs, ys, yerr=errors, fmt="none", ecolor=color, elinewidth=1.0, capsize=2.5,
                                alpha=0.7)
            if panel.chance is not None:
                ax.axhline(panel.chance, **CHANCE_STYLE)
                chance_shown = panel.chance
            ax.set_title(panel.title + (" (lower is better)" if panel.lower_is_better else ""))
            ax.set_xlabel("views sent")
            ax.set_ylabel(panel.ylabel)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
        handles = [Line2D([], [], color=styles[label][0], marker=styles[label][1], linewidth=1.8)
                   for label in labels]
        names = [_wrap(label, 34) for label in labels]
        if chance_shown is not None:
            handles.append(Line2D([], [], **CHANCE_STYLE))
            names.append(f"chance ({chance_shown:.2f})")
        height = fig.get_figheight()
        fig.suptitle(title, fontsize=12, y=1 - 0.12 / height, va="top")
        if banded:
            fig.text(0.5, 1 - 0.45 / height, "error bars: 95% CI, whole merchants resampled", ha="center",
                     va="top", fontsize=8.5, color="0.35")
        if spare:  # the empty grid cell holds the legend
            slot = flat[list(panels).index(None)]
            slot.legend(handles, names, loc="center", frameon=False, ncol=1 if len(names) <= 14 else 2,
                        fontsize=8)
        else:
            fig.legend(handles, names, loc="lower center", ncol=ncol, frameon=False, bbox_to_anchor=(0.5, 0.0))
        fig.tight_layout(rect=(0, legend_in / height, 1, 1 - 0.7 / height))
        return _save(plt, fig, path)


@dataclass(frozen=True)
class CotBar:
    """One model's figure without and with CoT (display units), with 95% intervals when known."""

    label: str
    without: Point
    with_cot: Point


def plot_cot(path: Path, title: str, ylabel: str, bars: Sequence[CotBar], *,
             lower_is_better: bool = False, chance: float | None = None) -> Path:
    """Paired horizontal bars per model: without CoT above with CoT, error bars = 95% CI, values
    printed. Horizontal, so a long model label or many models (VQA categories x models) grow the
    figure downwards and never overlap; `chance` is a dashed vertical line."""
    plt = _pyplot()
    with plt.rc_context(STYLE):
        height = 1.6 + 0.62 * max(len(bars), 1)
        fig, ax = plt.subplots(figsize=(MAX_WIDTH_IN, height))
        ys = list(range(len(bars)))
        top = max([_top(b.without) for b in bars] + [_top(b.with_cot) for b in bars] + [chance or 0.0]) or 1.0
        banded = False
        for offset, name, color, pick in ((-0.2, "without CoT", "#4C72B0", lambda b: b.without),
                                          (0.2, "with CoT", "#DD8452", lambda b: b.with_cot)):
            points = [pick(b) for b in bars]
            errors = _errors(points) if points else None
            banded = banded or errors is not None
            ax.barh([y + offset for y in ys], [p.y for p in points], height=0.38, color=color, label=name,
                    xerr=errors, capsize=3, error_kw={"elinewidth": 1, "ecolor": "0.25"})
            for y, point in zip(ys, points, strict=True):  # value beyond its error bar, never on it
                ax.text(_top(point) + 0.01 * top, y + offset, f"{point.y:.1f}", va="center", ha="left",
                        fontsize=8.5, color="0.15")
        if chance is not None:
            ax.axvline(chance, **CHANCE_STYLE, label=f"chance ({chance:.2f})")
        ax.set_yticks(ys, [_wrap(b.label, 30) for b in bars])
        ax.invert_yaxis()  # first model on top, as in the table
        ax.set_xlabel(ylabel + (" (lower is better)" if lower_is_better else ""))
        ax.set_xlim(0, top * 1.15)
        ax.grid(axis="x", alpha=0.3)
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
        fig.suptitle(title + (" (lower is better)" if lower_is_better else ""), fontsize=12)
        top_margin = 1 - 0.5 / height
        if banded:
            fig.text(0.5, top_margin, "error bars: 95% CI, whole merchants resampled", ha="center", va="top",
                     fontsize=8.5, color="0.35")
        fig.tight_layout(rect=(0, 0, 1, top_margin - 0.05 / height * 4))
        return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    """The figure as its file, written by the one writer that never follows a link (`write_atomically`),
    then closed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    drawn = io.BytesIO()
    fig.savefig(drawn, format=path.suffix.lstrip(".") or "png", dpi=DPI)
    write_atomically(path, drawn.getvalue())
    plt.close(fig)
    return path


def _errors(points: Sequence[Point]) -> list[list[float]] | None:
    """The points' 95% intervals as error bar lengths (below, above), or None when one has none."""
    if any(p.low is None or p.high is None for p in points):
        return None
    return [[p.y - float(p.low or 0) for p in points], [float(p.high or 0) - p.y for p in points]]


def _top(point: Point) -> float:
    return point.high if point.high is not None else point.y


def _wrap(label: str, width: int) -> str:
    """Wrap a model spec at its natural joints (`backend:`, `org/`, spaces), not inside a name."""
    pieces = [piece for piece in re.split(r"(?<=[:/ ])", label) if piece]
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(line.strip() for line in lines)
