"""Runs side by side: rows grouped by label, and the paired comparison table of the report and the model card
(the difference, its interval and the permutation test's p-value: `eval.compare`), on the runs' protocol's
reading, with ours' reading of the same answers beside it when that protocol reads answers its own way."""

from __future__ import annotations

from collections.abc import Sequence

from eval.compare import Comparison, compare_runs_task, protocol_line
from eval.report.runs import ReportError, RunData
from eval.report.tables import SMALL_MARK, SMALL_SAMPLE, md_table
from eval.settings import N_BOOT
from eval.tasks import all_tasks


def group_runs(runs: Sequence[RunData]) -> dict[str, dict[str, RunData]]:
    """Table rows: label -> {task: run}. Folders with the same label and distinct tasks share a row."""
    table: dict[str, dict[str, RunData]] = {}
    for run in runs:
        label = run.label
        if any(task in table.get(label, {}) for task in run.scores):
            label = f"{label} [{run.path.name}]"
        for task in run.scores:
            table.setdefault(label, {})[task] = run
    return table


def comparison(runs: Sequence[RunData], *, against_first: bool = False, n_boot: int = N_BOOT) -> str:
    """Paired differences (A − B, percentage points) on shared items, with 95% cluster-bootstrap CIs and
    the clustered paired permutation test's p-value (`eval.compare`, as `python -m eval compare`). Under a
    protocol that reads answers its own way each task has a row of its reading and one of ours beside it,
    and a line under the table names the protocol, how the runs were asked and the release."""
    grouped = list(group_runs(runs).items())
    pairs = [(grouped[0], other) for other in grouped[1:]] if against_first else \
        ([(grouped[0], grouped[1])] if len(grouped) == 2 else [])
    lines, named = [], []
    for (label_a, tasks_a), (label_b, tasks_b) in pairs:
        for spec in all_tasks():
            task = spec.name
            if task not in tasks_a or task not in tasks_b:
                continue
            metric = "Avg MAPE" if spec.lower_is_better else "accuracy"
            run_a, run_b = tasks_a[task], tasks_b[task]
            try:
                result = compare_runs_task(run_a, run_b, spec, n_boot=n_boot)
            except ReportError:  # not the same questions, or not the same figure: no paired figure
                why = ("they were scored under different protocols" if run_a.protocol.name != run_b.protocol.name
                       else "some ids have another reference in each run")
                lines.append([task, metric, label_a, label_b, "–", "–", "–", "–", f"not compared: {why}"])
                continue
            if result.headline is None:
                continue
            figure = metric if result.reading is None else f"{metric} ({result.reading})"
            lines.append(_row(task, figure, label_a, label_b, result.headline))
            if result.reading is None:
                continue
            if result.ours is not None:
                lines.append(_row(task, f"{metric} (ours' reading of the same answers)", label_a, label_b,
                                  result.ours))
            line = protocol_line(run_a, run_b, [spec])
            if line is not None and line not in named:
                named.append(line)
    if not lines:
        return ""
    table = md_table(["Task", "Figure", "A", "B", "Shared items", "A − B (pp)", "95% CI (pp)", "p", "Reading"], lines)
    return "\n\n".join([table, *named])


def _row(task: str, figure: str, label_a: str, label_b: str, result: Comparison) -> list[str]:
    low, high = result.ci95
    verdict = (f"{result.better} better at the 5% level" if result.better
               else "no significant difference at the 5% level")
    mark = SMALL_MARK if result.merchants < SMALL_SAMPLE else ""
    # merchants counted only where the rows name them; else the items are what was resampled
    shared = f"{result.n} ({result.merchants} merchants)" if result.unit == "merchants" else f"{result.n} items"
    return [task, figure, label_a, label_b, shared, f"{100 * result.diff:+.2f}",
            f"[{100 * low:+.2f}, {100 * high:+.2f}]{mark}",
            "below 0.001" if result.p_value < 0.001 else f"{result.p_value:.3f}", verdict]
