"""PNG figures for sweeps: metric vs number of views (the paper's Figure 4) and with vs without CoT
(Figures 5/9, drawn as paired bars with intervals, which read faster than a radar for a few models).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STYLE = {"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 9.5,
         "axes.spines.top": False, "axes.spines.right": False}


@dataclass(frozen=True)
class Point:
    """One measured cell: x (views), y, and its 95% interval when known (all in display units)."""

    x: float
    y: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Panel:
    """One subplot: a y label with units and one line per series (model)."""

    title: str
    ylabel: str
    series: dict[str, list[Point]]
    lower_is_better: bool = False


def _pyplot() -> Any:
    """matplotlib.pyplot, imported on first plot: every report imports this module, few draw, and
    the import costs more than a second of a run's start-up."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window: works headless and in CI
    import matplotlib.pyplot as plt

    return plt


def plot_views(path: Path, title: str, panels: Sequence[Panel]) -> Path:
    """Line plot per panel: metric against the number of views sent, one line per model, CI bars."""
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(panels), figsize=(max(6.4, 5.2 * len(panels)), 4.6), squeeze=False)
        banded = False
        for ax, panel in zip(axes[0], panels, strict=True):
            lines = sorted(panel.series.items())
            for number, (label, points) in enumerate(lines):
                points = sorted(points, key=lambda p: p.x)
                # a small sideways shift per line keeps overlapping error bars apart
                shift = 0.06 * (number - (len(lines) - 1) / 2) if len(lines) > 1 else 0.0
                xs, ys = [p.x + shift for p in points], [p.y for p in points]
                color = f"C{number % 10}"
                ax.plot(xs, ys, marker="o", linewidth=2, color=color, label=_wrap(label, 40))
                if all(p.low is not None and p.high is not None for p in points):
                    banded = True
                    ax.errorbar(xs, ys, yerr=[[p.y - p.low for p in points], [p.high - p.y for p in points]],
                                fmt="none", ecolor=color, elinewidth=1.2, capsize=3, alpha=0.7)
            if len(panels) > 1:
                ax.set_title(panel.title + (" (lower is better)" if panel.lower_is_better else ""))
            ax.set_xlabel("number of views (images sent)")
            ax.set_ylabel(panel.ylabel)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
        handles, labels = axes[0][0].get_legend_handles_labels()
        columns = min(len(labels), 3)
        fig.legend(handles, labels, loc="lower center", ncol=columns, frameon=False,
                   bbox_to_anchor=(0.5, 0.0))
        heading = title + (" (lower is better)" if len(panels) == 1 and panels[0].lower_is_better else "")
        fig.suptitle(heading, fontsize=13)
        if banded:
            fig.text(0.5, 0.915, "error bars: 95% CI, whole merchants resampled", ha="center", fontsize=9,
                     color="0.35")
        legend_rows = -(-len(labels) // columns)
        fig.tight_layout(rect=(0, 0.03 + 0.055 * legend_rows, 1, 0.915 if banded else 0.95))
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150)
        plt.close(fig)
    return path


@dataclass(frozen=True)
class CotBar:
    """One model's figure without and with CoT (display units), with 95% intervals when known."""

    label: str
    without: Point
    with_cot: Point


def plot_cot(path: Path, title: str, ylabel: str, bars: Sequence[CotBar], *,
             lower_is_better: bool = False) -> Path:
    """Paired bars per model: without CoT beside with CoT, error bars = 95% CI, values printed."""
    plt = _pyplot()
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(6.4, 1.6 * len(bars) + 3.0), 5.0))
        xs = list(range(len(bars)))
        top = max(_top(b.without) for b in bars) if bars else 1.0
        top = max(top, *(_top(b.with_cot) for b in bars)) or 1.0
        banded = False
        for offset, name, color, pick in ((-0.2, "without CoT", "#4C72B0", lambda b: b.without),
                                          (0.2, "with CoT", "#DD8452", lambda b: b.with_cot)):
            points = [pick(b) for b in bars]
            heights = [p.y for p in points]
            errors = None
            if all(p.low is not None and p.high is not None for p in points):
                banded = True
                errors = [[p.y - p.low for p in points], [p.high - p.y for p in points]]
            ax.bar([x + offset for x in xs], heights, width=0.38, color=color, label=name, yerr=errors,
                    capsize=4, error_kw={"elinewidth": 1, "ecolor": "0.25"})
            for x, point in zip(xs, points, strict=True):  # value above its error bar, never on it
                ax.text(x + offset, _top(point) + 0.015 * top,
                        f"{point.y:.1f}", ha="center", va="bottom", fontsize=9, color="0.15")
        ax.set_xticks(xs, [_wrap(b.label, 22) for b in bars])
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, top * 1.22)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper left", ncol=2, frameon=False)
        fig.suptitle(title + (" (lower is better)" if lower_is_better else ""), fontsize=13)
        if banded:
            fig.text(0.5, 0.915, "error bars: 95% CI, whole merchants resampled", ha="center", fontsize=9,
                     color="0.35")
        fig.tight_layout(rect=(0, 0, 1, 0.915 if banded else 0.95))
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150)
        plt.close(fig)
    return path


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
