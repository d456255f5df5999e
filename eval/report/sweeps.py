"""The sweep sections of a report: the views figure (paper's Figure 4) and the CoT comparison
(Figures 5/9), rebuilt from whichever run folders vary those settings (a sweep's cells are ordinary runs)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eval.numbers import (
    chance_accuracy,
    component,
    headline,
    headline_ci,
    paired_difference,
    score_nutrition_rows,
)
from eval.report.plots import CotBar, Panel, Point, plot_cot, plot_views
from eval.report.runs import RunData
from eval.report.tables import as_text, indices_sent, md_table, pct, read_differently, with_ci
from eval.settings import N_BOOT
from eval.tasks import Task, all_tasks
from eval.types import NUTRIENT_UNITS, ScoreRecord


def figure(task: Task) -> tuple[str, str]:
    """A plot's title and y label for the task's headline."""
    if task.measure == "ape":
        return f"{task.title} Average MAPE", "Average MAPE (%)"
    return f"{task.title} accuracy", "accuracy (%)"


def _series(run: RunData, *, without: str) -> str:
    """Label of the line/bar a run belongs to: its model and settings, except the one being swept; a run
    whose protocol's figure leads (the authors' on their release) is named with that protocol."""
    parts = [run.model]
    lang = run.setting("lang") or "zh"
    if lang != "zh":
        parts.append(str(lang))
    if without != "images" and (views := views_sent(run)):
        parts.append(_views(int(views)))
    if without != "cot" and run.setting("cot"):
        parts.append("CoT")
    if any(run.headline(task) is not None for task in all_tasks() if task.name in run.scores):
        parts.append(run.protocol.title)
    return " · ".join(parts)


def views_sent(run: RunData) -> int | None:
    """How many views each request sent: the image indices named (the authors' protocol: a sweep's N views
    are their indices 0..N-1), else `--images` (None: all)."""
    indices = indices_sent(run)
    return len(indices) if indices is not None else run.setting("images")


def _figure(task: Task, run: RunData, n_boot: int) -> tuple[float | None, tuple[float, float] | None]:
    """The headline a sweep shows for a run: the run's protocol's figure and interval where it leads, else
    ours over the run's items."""
    if (theirs := run.headline(task)) is not None:
        return theirs[1], theirs[2]
    items = run.scores[task.name]
    return headline(task, items), headline_ci(task, items, n_boot=n_boot)


def _views(n: int) -> str:
    return f"{n} view" + ("" if n == 1 else "s")


def _point(x: float, value: float | None, interval: Sequence[float] | None) -> Point | None:
    if value is None:
        return None
    low, high = (None, None) if interval is None else (100 * interval[0], 100 * interval[1])
    return Point(x, 100 * value, low, high)


def views_section(runs: Sequence[RunData], spec: Task, plot_dir: Path | None, n_boot: int) -> str:
    """Figure 4: headline against the number of views, one line per model (needs >= 2 view counts)."""
    task = spec.name
    series: dict[str, dict[int, RunData]] = {}
    for run in runs:
        if task in run.scores and (views := views_sent(run)):
            series.setdefault(_series(run, without="images"), {})[int(views)] = run
    series = {label: cells for label, cells in series.items() if len(cells) >= 2}
    if not series:
        return ""
    counts = sorted({n for cells in series.values() for n in cells})
    title, ylabel = figure(spec)
    headline_lines: dict[str, list[Point]] = {}
    # Figure 4 shows MAE and RMSE of every nutrient: (nutrient, stat) -> series
    error_lines: dict[tuple[str, str], dict[str, list[Point]]] = {
        (nutrient, stat): {} for nutrient in spec.components for stat in ("mae", "rmse")}
    rows, asked = [], []
    for label, cells in sorted(series.items()):
        row = [label]
        for n in counts:
            if (cell := cells.get(n)) is None:
                row.append("–")
                continue
            value, interval = _figure(spec, cell, n_boot)
            led = cell.headline(spec) is not None
            row.append(with_ci(value, interval) + (_ours_beside(spec, cell) if led else ""))
            if (point := _point(n, value, interval)) is not None:
                headline_lines.setdefault(label, []).append(point)
            if led:
                asked.append(f"{_views(n)}: {cell.question()}, interval resampling "
                             f"{cell.entry(task).get('official_resampled') or 'items'}")
            if spec.components:
                figures = score_nutrition_rows(cell.scores[task])
                for (nutrient, stat), lines in error_lines.items():
                    found = (cell.protocol.component(spec, cell.entry(task), nutrient, stat) if led
                             else component(figures, nutrient, stat))
                    if found is not None:
                        lines.setdefault(label, []).append(Point(n, found))
        rows.append(row)
    text = f"### {title} by number of views\n\n" + md_table(["model", *(_views(n) for n in counts)], rows)
    if asked:  # cells whose protocol's figure leads: how each was asked (its image indices)
        text += "\n\n" + "; ".join(as_text(line) for line in dict.fromkeys(asked)) + "."
    if plot_dir is not None and headline_lines:
        chance = _chance_percent(spec, [run for cells in series.values() for run in cells.values()])
        panels: list[Panel | None] = [Panel(title, ylabel, headline_lines, lower_is_better=spec.lower_is_better,
                                            chance=chance)]
        if spec.components:  # the headline beside the legend, then one row per nutrient: MAE | RMSE
            panels.append(None)
            panels += [Panel(f"{nutrient.capitalize()} {stat.upper()}", f"{stat.upper()} ({NUTRIENT_UNITS[nutrient]})",
                             lines, lower_is_better=True)
                       for (nutrient, stat), lines in error_lines.items()]
        path = plot_views(Path(plot_dir) / f"views_{task}.png", f"{title} vs number of views", panels)
        text += f"\n\n![{title} vs number of views]({path.relative_to(plot_dir).as_posix()})"
    return text


def cot_section(runs: Sequence[RunData], spec: Task, plot_dir: Path | None, n_boot: int) -> str:
    """Figures 5/9: each model without vs with CoT, and the paired difference with its interval."""
    task = spec.name
    pairs: dict[str, dict[bool, RunData]] = {}
    for run in runs:
        if task in run.scores:
            pairs.setdefault(_series(run, without="cot"), {})[bool(run.setting("cot"))] = run
    pairs = {label: pair for label, pair in pairs.items() if len(pair) == 2}
    if not pairs:
        return ""
    title, ylabel = figure(spec)
    rows, bars = [], []
    for label, plain, cot in _cot_slices(spec, pairs):
        diff = paired_difference(spec, cot, plain, n_boot=n_boot)
        figures = [(headline(spec, items), headline_ci(spec, items, n_boot=n_boot)) for items in (plain, cot)]
        rows.append([label, *(with_ci(*found) for found in figures), "–" if diff is None else
                     f"{100 * diff['diff']:+.2f} [{100 * diff['ci95'][0]:+.2f}, {100 * diff['ci95'][1]:+.2f}]"])
        without, with_cot = (_point(x, *found) for x, found in enumerate(figures))
        if without is not None and with_cot is not None:
            bars.append(CotBar(label, without, with_cot))
    if spec.slice_field:
        title += f" by {spec.slice_title}"
    text = f"### {title} with and without chain of thought\n\n" + md_table(
        ["model", "without CoT (%)", "with CoT (%)", "CoT − without (pp, paired 95% CI)"], rows)
    if plot_dir is not None and bars:
        path = plot_cot(Path(plot_dir) / f"cot_{task}.png", f"{title}: without vs with CoT", ylabel, bars,
                        lower_is_better=spec.lower_is_better,
                        chance=_chance_percent(spec, [run for pair in pairs.values() for run in pair.values()]))
        text += f"\n\n![{title} with and without CoT]({path.relative_to(plot_dir).as_posix()})"
    return text


def _ours_beside(task: Task, run: RunData) -> str:
    """` (ours 66.67; 2 read differently)`: ours of the same answers beside the protocol's figure."""
    return (f" (ours {pct(headline(task, run.scores[task.name]))}; "
            f"{read_differently(run.entry(task.name))} read differently)")


def _cot_slices(task: Task, pairs: dict[str, dict[bool, RunData]]
                ) -> list[tuple[str, list[ScoreRecord], list[ScoreRecord]]]:
    """(label, items without CoT, items with CoT) per model, each as its run's protocol reads them; VQA also
    per VQA category (Figure 10)."""
    slices = []
    for label, pair in sorted(pairs.items()):
        plain, cot = (pair[k].protocol.read_rows(task, pair[k].scores[task.name]) for k in (False, True))
        if (field := task.slice_field) is None:
            slices.append((label, plain, cot))
            continue
        for category in sorted({str(r.get(field)) for r in plain + cot}):
            slices.append((f"{label} · {category}", [r for r in plain if str(r.get(field)) == category],
                           [r for r in cot if str(r.get(field)) == category]))
    return slices


def _chance_percent(task: Task, runs: Sequence[RunData]) -> float | None:
    """The chance line of a classification accuracy plot (percent); other tasks have none."""
    if not task.has_options:
        return None
    items = {str(r["id"]): r for run in runs for r in run.scores.get(task.name, [])}
    value = chance_accuracy(list(items.values()))
    return None if value is None else 100 * value


def sweep_sections(runs: Sequence[RunData], *, plot_dir: Path | None = None, n_boot: int = N_BOOT) -> str:
    """The sweep tables (and PNGs in `plot_dir`) for whatever the runs vary: views and/or CoT."""
    parts = [section for task in all_tasks() for section in (
        views_section(runs, task, plot_dir, n_boot), cot_section(runs, task, plot_dir, n_boot)) if section]
    return "## Sweeps\n\n" + "\n\n".join(parts) if parts else ""
