"""Runs side by side: rows grouped by label, and the paired comparison table of the report and the
model card (the difference, its interval and the permutation test's p-value: `eval.compare`)."""

from __future__ import annotations

from collections.abc import Sequence

from eval.report.runs import ReportError, RunData
from eval.report.tables import SMALL_MARK, SMALL_SAMPLE, md_table
from eval.settings import N_BOOT
from eval.tasks import get as get_task
from eval.tasks import names as task_names


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
    the clustered paired permutation test's p-value (`eval.compare`, as `python -m eval compare`)."""
    from eval.compare import compare_task

    grouped = list(group_runs(runs).items())
    pairs = [(grouped[0], other) for other in grouped[1:]] if against_first else \
        ([(grouped[0], grouped[1])] if len(grouped) == 2 else [])
    lines = []
    for (label_a, tasks_a), (label_b, tasks_b) in pairs:
        for task in task_names():
            if task not in tasks_a or task not in tasks_b:
                continue
            spec = get_task(task)
            try:
                result = compare_task(task, tasks_a[task].scores[task], tasks_b[task].scores[task], n_boot=n_boot)
            except ReportError:  # an id's reference differs: not the same questions, so no paired figure
                lines.append([task, "Avg MAPE" if spec.lower_is_better else "accuracy", label_a, label_b, "–", "–",
                              "–", "–", "not compared: some ids have another reference in each run"])
                continue
            if result is None:
                continue
            low, high = result.ci95
            verdict = (f"{result.better} better at the 5% level" if result.better
                       else "no significant difference at the 5% level")
            metric = "Avg MAPE" if spec.lower_is_better else "accuracy"
            mark = SMALL_MARK if result.merchants < SMALL_SAMPLE else ""
            lines.append([task, metric, label_a, label_b, f"{result.n} ({result.merchants} merchants)",
                          f"{100 * result.diff:+.2f}", f"[{100 * low:+.2f}, {100 * high:+.2f}]{mark}",
                          "below 0.001" if result.p_value < 0.001 else f"{result.p_value:.3f}", verdict])
    if not lines:
        return ""
    return md_table(["Task", "Figure", "A", "B", "Shared items", "A − B (pp)", "95% CI (pp)", "p", "Reading"], lines)
