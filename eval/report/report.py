"""`python -m eval report DIR [DIR ...]`: the paper's Table 2, confidence intervals, comparisons, breakdowns,
each recomputed from the runs' scores.jsonl with the metrics' own functions (so a run can be sliced later)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from eval.agreement import Agreement, Figures, read_agreement, scoring_judge
from eval.circular import circular_figures, read_rotations
from eval.compare import release
from eval.limiter import settled_line
from eval.numbers import (
    breakdown,
    chance_accuracy,
    component,
    headline,
    headline_ci,
    outcome_counts,
    resampled_unit,
    resampled_words,
    score_nutrition_rows,
    trials,
)
from eval.report import model_card
from eval.report.paired import comparison, group_runs
from eval.report.runs import ReportError, RunData, expand_run_dirs, load_reported, load_run
from eval.report.sweeps import sweep_sections
from eval.report.tables import (
    SMALL_SAMPLE,
    as_text,
    headline_cell,
    md_table,
    pct,
    read_differently,
    resampled_units,
    small_note,
    with_ci,
)
from eval.settings import N_BOOT
from eval.store import write_atomically
from eval.tasks import Task, all_tasks
from eval.tasks import names as task_names
from eval.types import NUTRIENT_UNITS, ScoreRecord, is_user_error

SHORT = {"calories": "Cal", "protein": "Prot", "carbohydrates": "Carb", "fat": "Fat"}
DIMENSION_TITLES = {"cuisine": "cuisine", "category": "menu category", "vqa_category": "VQA category",
                    "nutrition_source": "nutrition source", "n_images": "images sent"}
SMALL_CELL = 10  # cells with fewer items are flagged: their figure is mostly noise
MAX_BREAKDOWN_ROWS = 25  # menu categories can run into the hundreds; show the largest
MAX_BREAKDOWN_RUNS = 6  # more columns than this stop being readable


def task_headers(task: Task) -> list[str]:
    """A task's columns in the Table 2 layout: its accuracy, or each component's MAE, RMSE and MAPE and
    then the average MAPE."""
    if task.measure != "ape":
        return [f"{task.short} Acc (%)"]
    return [f"{SHORT.get(n, n)} {stat}" for n in task.components
            for stat in (f"MAE ({NUTRIENT_UNITS.get(n, '')})", f"RMSE ({NUTRIENT_UNITS.get(n, '')})", "MAPE (%)")
            ] + ["Avg MAPE (%)"]


def table2_headers() -> list[str]:
    shown = list(all_tasks())
    return (["Model", "Source"] + [h for task in shown for h in task_headers(task)]
            + [f"n ({'/'.join(t.short[:3].lower() for t in shown)})"])


def _task_cells(task: Task, run: RunData | None, n_boot: int, *, ours: bool = False) -> list[str]:
    """A task's cells for one run: the figures of the run's protocol (ours, or theirs on their release,
    with their interval), or with `ours` our reading of the same answers."""
    theirs = None if run is None or ours else run.headline(task)
    if run is not None and theirs is not None:
        return _protocol_cells(task, run, theirs)
    if task.measure != "ape":
        return [_headline_cell(task, run, n_boot)]
    figs = score_nutrition_rows(run.scores[task.name]) if run else {}
    return [*_component_cells(task, lambda part, stat: component(figs, part, stat)), _headline_cell(task, run, n_boot)]


def _component_cells(task: Task, figure: Callable[[str, str], float | None]) -> list[str]:
    """Each component's MAE, RMSE and MAPE cells, from `figure(component, "mae" | "rmse" | "mape")`."""
    return [pct(value) if stat == "mape" else "–" if value is None else f"{value:.2f}"
            for part in task.components for stat in ("mae", "rmse", "mape") for value in [figure(part, stat)]]


def _protocol_cells(task: Task, run: RunData, theirs: tuple[str, float | None, tuple[float, float] | None]
                    ) -> list[str]:
    """A task's cells from the figures the run's protocol reported (metrics.json): its headline with its
    interval, and for a task of components each one's MAE, RMSE and MAPE as that protocol computes them."""
    _, value, interval = theirs
    entry = run.entry(task.name)
    head = "–" if value is None else with_ci(value, interval, run.protocol.counted(task, entry),
                                             unit=_unit(entry.get("official_resampled") or "items"))
    if task.measure != "ape":
        return [head]
    return [*_component_cells(task, lambda part, stat: run.protocol.component(task, entry, part, stat)), head]


def _source(runs: Sequence[RunData], what: str) -> str:
    """`measured (folder; how it was asked)`: the run folders and the question they were asked."""
    asked = sorted({run.question() for run in runs})
    return f"{what} ({', '.join(sorted({r.path.name for r in runs}))}; {'; '.join(asked)})"


def _reported_cells(task: Task, row: dict[str, Any]) -> list[str]:
    """The paper's figures for a task (its accuracy, or each component's MAPE and the average)."""
    if task.measure != "ape":
        return [_reported(row.get(f"{task.name}_acc"))]
    return [c for part in task.components for c in ("–", "–", _reported(row.get(f"{part}_mape")))] + [
        _reported(row.get("avg_mape"))]


def table2(runs: Sequence[RunData], *, reported: bool = True, n_boot: int = N_BOOT) -> str:
    """The paper's Table 2 layout: measured runs, then baselines, then the paper's reported rows."""
    measured: list[list[str]] = []
    baselines: list[list[str]] = []
    for label, by_task in group_runs(runs).items():
        baseline = next(iter(by_task.values())).is_baseline
        into = baselines if baseline else measured
        into.append([label, _source(list(by_task.values()), "baseline, no skill" if baseline else "measured"),
                     *(c for task in all_tasks() for c in _task_cells(task, by_task.get(task.name), n_boot)),
                     "/".join(_count(by_task.get(t.name), t) for t in all_tasks())])
        differ = [read_differently(run.entry(t.name)) for t in all_tasks()
                  if (run := by_task.get(t.name)) is not None and run.headline(t) is not None]
        if differ:  # the run's protocol reads answers its own way: ours beside it, on the same answers
            into.append([label, f"ours' reading of the same answers ({sum(differ)} read differently)",
                         *(c for task in all_tasks() for c in _task_cells(task, by_task.get(task.name), n_boot, ours=True)),
                         "/".join(str(len(by_task[t].scores[t])) if t in by_task else "–" for t in task_names())])
    rows = measured + baselines + _chance_rows(runs)
    if reported:
        langs = sorted({str(r.setting("lang") or "zh") for r in runs}) or ["zh"]
        rows += [[row["model"] + (f" ({row['lang']})" if row["lang"] != "zh" else ""), "reported (paper)",
                  *(c for task in all_tasks() for c in _reported_cells(task, row)), "–"] for row in load_reported(langs)]
    return md_table(table2_headers(), rows)


def _count(run: RunData | None, task: Task) -> str:
    """Items a task's headline reads: what the run's protocol counted (`Protocol.counted`), else the items scored."""
    if run is None:
        return "–"
    counted = run.protocol.counted(task, run.entry(task.name)) if run.headline(task) is not None else None
    return str(len(run.scores[task.name]) if counted is None else counted)


def _unit(resampled: str) -> str:
    """One of what an interval resampled, as metrics.json names it: `merchants` -> `merchant`."""
    return str(resampled).removesuffix("s")


def _chance_rows(runs: Sequence[RunData]) -> list[list[str]]:
    """The `chance` row: accuracy of a uniform guess over each item's options (tasks with options),
    computed exactly (no interval: nothing is sampled); other tasks have no chance level."""
    cells, counts, any_value = [], [], False
    for task in all_tasks():
        items = {str(r["id"]): r for run in runs for r in run.scores.get(task.name, [])} if task.has_options else {}
        value = chance_accuracy(list(items.values()))
        any_value = any_value or value is not None
        cells += [pct(value) if value is not None else "–"] + ["–"] * (len(task_headers(task)) - 1)
        counts.append(str(len(items)) if value is not None else "–")
    return [["chance", "computed (mean of 1/options)", *cells, "/".join(counts)]] if any_value else []


def _reported(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _headline_cell(task: Task, run: RunData | None, n_boot: int) -> str:
    if run is None:
        return "–"
    rows = run.scores[task.name]
    value = headline(task, rows)
    failed = sum(r.get("error") is not None for r in rows)
    if value is None and rows and failed == len(rows):
        return headline_cell(None, None, failed=failed, n=len(rows))
    if value is None:
        return "not scored" if task.judged else "–"
    unit = _unit(run.entry(task.name).get("resampled") or resampled_unit(rows))
    return with_ci(value, headline_ci(task, rows, n_boot=n_boot), trials(rows), unit=unit)


def breakdown_tables(runs: Sequence[RunData]) -> str:
    """Per task and dimension: headline per group for every run, each cell with its item count."""
    grouped = group_runs(runs)
    sections = []
    for spec in all_tasks():
        task = spec.name
        columns = [(label, by_task[task]) for label, by_task in grouped.items() if task in by_task]
        if not columns:
            continue
        if spec.judged and all(r.get("correct") is None for _, run in columns for r in run.scores[task]):
            sections.append(f"{task}: breakdowns appear once {spec.title} is scored with a judge.")
            continue
        if len(columns) > MAX_BREAKDOWN_RUNS:
            sections.append(f"{task}: breakdowns shown for the first {MAX_BREAKDOWN_RUNS} of {len(columns)} "
                            "runs; report fewer folders at a time to see the others.")
            columns = columns[:MAX_BREAKDOWN_RUNS]
        figure = "Avg MAPE (%), lower is better" if spec.lower_is_better else "accuracy (%)"
        every = [r for _, run in columns for r in run.scores[task]]
        for dimension in spec.breakdowns:
            name = DIMENSION_TITLES.get(dimension, dimension)
            if every and all(r.get(dimension) is None for r in every):  # the authors' release names none
                sections.append(f"{task} by {name}: left out, the release names none for its items.")
                continue
            # Rows are the union of every run's cells (runs may differ in views sent or categories),
            # largest first; each run's cell shows its own n, and `–` only where it has no item.
            groups = breakdown(every, dimension)
            shown, hidden = groups[:MAX_BREAKDOWN_ROWS], groups[MAX_BREAKDOWN_ROWS:]
            per_run = [dict(breakdown(run.scores[task], dimension)) for _, run in columns]
            rows = [[value, *(_cell(spec, cells.get(value, [])) for cells in per_run)] for value, _ in shown]
            note = f"\n\n{len(hidden)} smaller groups not shown." if hidden else ""
            sections.append(f"### {task} by {name}: {figure}\n\n"
                            f"{md_table([name, *(lbl for lbl, _ in columns)], rows)}{note}")
    if sections:
        sections.append(f"† fewer than {SMALL_CELL} items: too small to read anything into.")
    return "\n\n".join(sections)


def _cell(task: Task, subset: Sequence[ScoreRecord]) -> str:
    if not subset:
        return "– (n=0)"
    value = headline(task, subset)
    flag = " †" if len(subset) < SMALL_CELL else ""
    return f"{'not scored' if value is None else pct(value)} (n={len(subset)}){flag}"


# ---------------------------------------------------------------- robustness and judge reliability
def circular_section(runs: Sequence[RunData], *, n_boot: int = N_BOOT) -> str:
    """`run --circular`: accuracy as stored against accuracy under every option rotation, and
    whether answers lean to a letter position (chi-square against an even spread)."""
    rows = []
    for run in runs:
        plain = [r for task in all_tasks() if task.has_options for r in run.scores.get(task.name, [])]
        found = circular_figures(plain, read_rotations(run.path), n_boot=n_boot)
        if not found or not found.get("items"):
            continue
        bias = found.get("position_bias") or {}
        rates = bias.get("pick_rate") or {}
        top = max(rates, key=lambda k: rates[k]) if rates else None
        p_value = bias.get("p_value")
        rows.append([run.label, str(found["items"]), pct(found["accuracy"]),
                     with_ci(found["circular_accuracy"], found.get("circular_accuracy_ci95")),
                     f"{top} {pct(rates[top])}" if top else "–",
                     f"{bias['statistic']:.2f} ({bias['df']})" if bias else "–",
                     "–" if p_value is None else f"{p_value:.3g}"])
    if not rows:
        return ""
    table = md_table(["Model", "Items", "Acc, options as stored (%)", "Circular acc (%) [95% CI]",
                      "Most picked position (%)", "χ² (df)", "p (no position bias)"], rows)
    return (table + "\n\nCircular accuracy counts an item correct only when it is answered correctly under every "
            "rotation of its options; a small p says the answers lean to some letter positions whatever the "
            "options (every position holds the correct option equally often).")


def agreement_section(result: Agreement) -> str:
    """judge_agreement.json as markdown: pairwise agreement and kappa, the rule against each judge,
    and the disagreements."""
    def cell(found: Figures, key: Literal["agreement", "kappa"], as_pct: bool) -> str:
        value, interval = found[key], found["agreement_ci95" if key == "agreement" else "kappa_ci95"]
        if value is None:
            return "–"
        if as_pct:
            return with_ci(value, interval)
        return f"{value:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")

    scope = "every answer judged by each judge" if result.get("judge_all") else \
        "the verdicts the accuracy uses (the rule's where it decides)"
    parts = [f"{result.get('judged', 0)} answers compared ({scope}); {result.get('rule_decided', 0)} decided by "
             f"the rule; {result.get('no_answer', 0)} empty or failed left out.",
             md_table(["Rater A", "Rater B", "n", "Agreement (%) [95% CI]", "Cohen's κ [95% CI]"],
                      [[p["a"], p["b"], str(p["n"]), cell(p, "agreement", True), cell(p, "kappa", False)]
                       for p in result.get("pairs", [])])]
    checks = result.get("rule_vs_judge") or []
    if any(c.get("n") for c in checks):
        parts.append("The deterministic rule against each judge, on the items the rule decides:")
        parts.append(md_table(["Judge", "n", "Agreement (%) [95% CI]", "Cohen's κ [95% CI]"],
                              [[c["judge"], str(c["n"]), cell(c, "agreement", True), cell(c, "kappa", False)]
                               for c in checks]))
    if accuracy := result.get("accuracy") or {}:
        parts.append("VQA accuracy by rater (%): " + ", ".join(f"{as_text(k)} {pct(v)}" for k, v in accuracy.items()))
    if listed := result.get("disagreements") or []:
        rows = [[d["id"], " ".join(f"{k}={v or '–'}" for k, v in d["verdicts"].items()),
                 " ".join(str(d["answer"]).split())[:80]] for d in listed]
        more = result.get("n_disagreements", len(listed)) - len(listed)
        parts.append(f"Disagreements ({result.get('n_disagreements', len(listed))}):\n\n"
                     + md_table(["Item", "Verdicts", "Answer (start)"], rows)
                     + (f"\n\n{more} more in judge_agreement.json." if more > 0 else ""))
    return "\n\n".join(parts)


def vqa_judge_lines(runs: Sequence[RunData]) -> list[str]:
    """Who decided each scored run's VQA verdicts: the judge, the rule's share, and how far another
    judge agrees when `python -m eval judge-agreement` has been run on the folder."""
    lines = []
    for run in runs:
        rows = _judged_rows([run])
        if not rows or all(r.get("verdict") is None for r in rows):
            continue
        judge = scoring_judge(run.path)
        ruled = sum(r.get("decided_by") == "rule" for r in rows)
        line = (f"VQA accuracy of {as_text(run.label)}: judged by {as_text(judge or 'the recorded judge')}; "
                f"{ruled} of {len(rows)} verdicts decided by the deterministic rule")
        if found := read_agreement(run.path):
            pairs = [p for p in found.get("pairs", []) if judge in (p.get("a"), p.get("b")) and p.get("n")]
            shown = pairs or [p for p in found.get("pairs", []) if p.get("n")]
            line += "; judge agreement " + "; ".join(
                f"{as_text(p['a'])} vs {as_text(p['b'])} {pct(p['agreement'])}%"
                + (f" (κ {p['kappa']:.2f})" if p.get("kappa") is not None else "") for p in shown)
        lines.append(line + ".")
    return lines


# ---------------------------------------------------------------- the report and its CLI
def dataset_note(runs: Sequence[RunData]) -> str:
    """Which data each run used: the paper's rows only compare with runs on the full release."""
    seen: dict[str, list[str]] = {}
    for run in runs:
        seen.setdefault(release(run, width=10), []).append(run.path.name)
    lines = []
    for text, names in seen.items():
        which = "all runs" if len(seen) == 1 and len(names) > 1 else ", ".join(names)
        lines.append(f"- Dataset: {as_text(text)}: {as_text(which)}")
        if "sample" in text.split(" (")[0]:
            lines.append("  - the embedded **synthetic** sample: these figures check the pipeline and are "
                         "not comparable with the paper's")
    return "\n".join(lines)


def outcome_table(runs: Sequence[RunData]) -> str:
    """Per run and task, the answers that did not count: unparsed (or unscored, for VQA), truncated
    by the token limit, failed generations; empty when every answer counted."""
    rows, truncated = [], 0
    for label, by_task in group_runs(runs).items():
        for spec in all_tasks():
            task = spec.name
            if task not in by_task:
                continue
            items = by_task[task].scores[task]
            counts = outcome_counts(items)
            missing = sum(r.get("correct") is None if spec.judged else r.get("parsed") is None and r.get("error") is None
                          for r in items)
            truncated += counts["truncated"]
            rows.append([label, task, str(len(items)), str(missing), str(counts["truncated"]),
                         str(counts["generation_failures"])])
    if not any(any(c != "0" for c in row[3:]) for row in rows):
        return ""
    text = md_table(["run", "task", "n", "unparsed (vqa: unscored)", "truncated", "failed"], rows)
    if truncated:
        text += ("\n\nTruncated answers were cut off by the token limit and count as unanswered. Rerun the same "
                 "command with a larger `--max-tokens` (and `--thinking-budget` for Gemini thinking models) into "
                 "the same `--out`: only those items are asked again.")
    return text


TOP_ERRORS = 5


def top_errors(items: Sequence[ScoreRecord], n: int = TOP_ERRORS) -> list[tuple[str, int]]:
    """The most frequent error messages of failed items, with their counts (most frequent first)."""
    return Counter(str(r["error"]) for r in items if r.get("error")).most_common(n)


def failure_lines(runs: Sequence[RunData]) -> str:
    """Per run and task, the most frequent reasons its items failed: `- 4 × HTTP 400: ...`."""
    return "\n".join(f"- {as_text(label)}, {task}: {count} × {as_text(message)}"
                     for label, by_task in group_runs(runs).items() for task in task_names() if task in by_task
                     for message, count in top_errors(by_task[task].scores[task]))


def concurrency_lines(runs: Sequence[RunData]) -> str:
    """What each endpoint's limiter settled on (run.json's `concurrency`), one line per endpoint."""
    lines = []
    for run in runs:
        found = run.info.get("concurrency")
        endpoints = found.get("endpoints") if isinstance(found, dict) else None
        lines += [f"- {as_text(run.path.name)}: {as_text(settled_line(endpoint))}"
                  for endpoint in (endpoints if isinstance(endpoints, list) else []) if isinstance(endpoint, dict)]
    return "\n".join(lines)


def build_report(runs: Sequence[RunData], *, compare: bool = False, reported: bool = True,
                 n_boot: int = N_BOOT, plot_dir: Path | None = None) -> str:
    """The whole markdown report for these runs."""
    units = resampled_units(runs)
    trial = "merchants" if units <= {"merchants"} else "items" if units == {"items"} else "merchants or items"
    parts = ["# DiningBench results", dataset_note(runs), "## Results (Table 2 layout)", table2(
        runs, reported=reported, n_boot=n_boot),
        f"Percentages with 2 decimals; `[low, high]` is a 95% bootstrap interval resampling {resampled_words(units)}. "
        "MAE/RMSE per serving in kcal or g; "
        "Avg MAPE is the mean of the four MAPEs, lower is better. Baseline rows show what no skill "
        "scores; the *chance* row is the exact expectation of a uniform guess among each item's options. Rows marked *reported (paper)* are copied from the paper (full benchmark), not "
        "reproduced here, and compare only with runs on the full release. An all-right or all-wrong figure "
        f"gets a one-sided 95% bound ({trial} counted as the trials), never a zero-width interval."]
    if any(trials(rows) < SMALL_SAMPLE for run in runs for rows in run.scores.values()):
        parts.append(small_note(units))
    parts += _sections(("## Answers that did not count", outcome_table(runs)),
                       ("### Why items failed", failure_lines(runs)), ("## Requests in flight", concurrency_lines(runs)))
    vqa = _judged_rows(runs)
    if unscored := sum(r.get("correct") is None for r in vqa):
        how = "`python -m eval score DIR --judge openai:MODEL` (add `--judge-base-url URL` for a local server)"
        parts.append(f"VQA is not scored: no judge was configured. Score it with {how}." if unscored == len(vqa)
                     else f"{unscored} VQA items have no verdict and count as not correct; re-score with {how}.")
    parts += vqa_judge_lines(runs)
    if suspected := sum(r.get("injection_suspected") is True for r in vqa):
        parts.append(f"{suspected} VQA answers carried text aimed at the judge (a `GRADE:` line or an instruction "
                     "override): the judge read every answer fenced as data with its verdict tokens neutralized; "
                     "look at these items (`injection_suspected` in scores.jsonl) before trusting the figure.")
    if paired := comparison(runs, against_first=compare, n_boot=n_boot):
        parts += ["## Paired comparison", paired, paired_note(units)]
    if sweep := sweep_sections(runs, plot_dir=plot_dir, n_boot=n_boot):
        parts.append(sweep)
    parts += _sections(("## Option-order robustness (CircularEval)", circular_section(runs, n_boot=n_boot)),
                       ("## Breakdowns", breakdown_tables(runs)))
    return "\n\n".join(parts) + "\n"


def _sections(*found: tuple[str, str]) -> list[str]:
    """Each (title, body) whose body is not empty, as its title and then its body."""
    return [part for title, body in found if body for part in (title, body)]


def paired_note(units: set[str]) -> str:
    """What the paired comparison resampled and swapped, in the words of what the runs recorded (`units`)."""
    if units <= {"merchants"}:
        same, swapped = "the same merchants", "a clustered paired permutation test (whole merchants' answers"
    elif units == {"items"}:
        same, swapped = ("the same items (the release names no merchant)",
                         "a paired permutation test (each item's answers")
    else:
        same = "the same merchants where the release names them, else the same items"
        swapped = "a clustered paired permutation test (whole merchants' answers, or each item's where none is named,"
    return (f"Both runs are resampled on {same}, so shared difficulty cancels out. p: {swapped} swapped between "
            "A and B; `python -m eval compare` prints it with McNemar's exact test and the items left out). "
            "pp = percentage points; for Avg MAPE a negative difference means A errs less.")


def _judged_rows(runs: Sequence[RunData]) -> list[ScoreRecord]:
    """The items of every judged task (VQA) in these runs."""
    return [r for run in runs for task in all_tasks() if task.judged for r in run.scores.get(task.name, [])]


def write_run_report(run_dir: Path) -> None:
    """Write `report.md` for one scored run folder (called by `python -m eval run` and `score`)."""
    write_atomically(Path(run_dir) / "report.md", build_report([load_run(run_dir)]))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dirs", nargs="+", metavar="DIR",
                        help="run folders (with scores.jsonl) or sweep folders holding run folders")
    parser.add_argument("--out", type=Path, help="write the markdown here instead of printing it")
    parser.add_argument("--model-card", action="store_true",
                        help="a Hugging Face model card of one model's runs: README.md text (YAML model-index "
                             "header, then a results table); with --out README.md, a file ModelCard.load reads")
    parser.add_argument("--format", choices=model_card.FORMATS, default="card",
                        help="with --model-card: card (default, the whole README.md), or yaml/json: only the "
                             "metadata, for huggingface_hub.metadata_update")
    parser.add_argument("--dataset", metavar="OWNER/NAME",
                        help="with --model-card: the Hub id of the release the runs used (default: the run's "
                             "own source when it is a Hub id)")
    parser.add_argument("--allow-partial", action="store_true",
                        help="with --model-card: export synthetic or partial runs (--limit, --ids, fewer items "
                             "than the release), marked as such; refused otherwise")
    parser.add_argument("--compare", action="store_true",
                        help="paired difference of every run against the first (automatic for two runs)")
    parser.add_argument("--no-reported", action="store_true", help="leave out the paper's reported rows")
    parser.add_argument("--plot-dir", type=Path,
                        help="where sweep plots go (default: beside --out, or inside a single sweep folder)")
    parser.add_argument("--n-boot", type=int, default=N_BOOT, help=f"bootstrap resamples (default {N_BOOT})")


def main(args: argparse.Namespace) -> int:
    try:
        if args.n_boot < 1:
            raise ReportError(f"--n-boot must be at least 1 (got {args.n_boot})")
        runs = [load_run(path) for path in expand_run_dirs(args.dirs)]
        if args.model_card:
            text = model_card.render_model_card(runs, hub_id=args.dataset, allow_partial=args.allow_partial,
                                                fmt=args.format, n_boot=args.n_boot)
        else:
            plot_dir = args.plot_dir
            if plot_dir is None and args.out is not None:
                plot_dir = args.out.parent
            elif plot_dir is None and len(args.dirs) == 1 and not (Path(args.dirs[0]) / "scores.jsonl").exists():
                plot_dir = Path(args.dirs[0])
            text = build_report(runs, compare=args.compare, reported=not args.no_reported,
                                n_boot=args.n_boot, plot_dir=plot_dir)
    except Exception as exc:
        if not is_user_error(exc):
            raise  # a bug of ours: its traceback, exit 1
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(args.out, text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0
