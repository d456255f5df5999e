"""`python -m eval report DIR [DIR ...]`: the paper's Table 2, confidence intervals, comparisons, breakdowns.

Every figure is recomputed from each run's scores.jsonl with the metrics' own functions, so a report
can slice a run (by cuisine, image count...) after the fact and never invents a second formula.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eval.stats import (
    Statistic,
    can_resample,
    cluster_bootstrap_ci,
    cluster_bootstrap_mean_ci,
    mean_of_column_means,
    paired_bootstrap,
)

TASK_ORDER = ("classification", "nutrition", "vqa")
NUTRIENTS = ("calories", "protein", "carbohydrates", "fat")
UNITS = {"calories": "kcal", "protein": "g", "carbohydrates": "g", "fat": "g"}
SHORT = {"calories": "Cal", "protein": "Prot", "carbohydrates": "Carb", "fat": "Fat"}
DIMENSION_TITLES = {"cuisine": "cuisine", "category": "menu category", "vqa_category": "VQA category",
                    "nutrition_source": "nutrition source", "n_images": "images sent"}
# Which item fields each task is broken down by; every task also by cuisine, category, image count.
DIMENSIONS = {
    "classification": ("cuisine", "category", "n_images"),
    "nutrition": ("cuisine", "category", "nutrition_source", "n_images"),
    "vqa": ("cuisine", "category", "vqa_category", "n_images"),
}
SMALL_CELL = 10  # cells with fewer items are flagged: their figure is mostly noise
MAX_BREAKDOWN_ROWS = 25  # menu categories can run into the hundreds; show the largest
MAX_BREAKDOWN_RUNS = 6  # more columns than this stop being readable
REPORTED_CSV = Path(__file__).parent / "data" / "table2_reported.csv"


class ReportError(ValueError):
    """A bad input (missing file, malformed line): printed as one `error:` line."""


# ---------------------------------------------------------------- loading runs
@dataclass
class RunData:
    """One run folder: its settings (run.json) and its scored items (scores.jsonl) per task."""

    path: Path
    info: dict[str, Any]
    scores: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def setting(self, key: str, default: Any = None) -> Any:
        settings = self.info.get("settings")
        if isinstance(settings, dict) and key in settings:
            return settings[key]
        return self.info.get(key, default)

    @property
    def model(self) -> str:
        return str(self.setting("model") or self.path.name)

    @property
    def is_baseline(self) -> bool:
        return self.model.startswith("baseline:")

    @property
    def label(self) -> str:
        """Model spec plus the settings that change answers, e.g. `openai:gpt-4o (en, 2 views, CoT)`."""
        tags = []
        lang = self.setting("lang") or "zh"
        if lang != "zh":
            tags.append(str(lang))
        if self.setting("images"):
            n = int(self.setting("images"))
            tags.append(f"{n} view" + ("s" if n != 1 else ""))
        if self.setting("cot"):
            tags.append("CoT")
        return self.model + (f" ({', '.join(tags)})" if tags else "")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReportError(f"{path}: line {number} is not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict) or "task" not in row or "id" not in row:
            raise ReportError(f"{path}: line {number} has no `id`/`task`; is this a scores.jsonl?")
        rows.append(row)
    return rows


def load_run(path: Path | str) -> RunData:
    """Read run.json and scores.jsonl of one run folder; a one-line ReportError when unusable."""
    path = Path(path)
    scores_path = path / "scores.jsonl"
    if not scores_path.is_file():
        raise ReportError(f"{path}: no scores.jsonl; score the run first with `python -m eval score {path}`")
    info: dict[str, Any] = {}
    if (path / "run.json").is_file():
        try:
            info = json.loads((path / "run.json").read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ReportError(f"{path / 'run.json'}: not valid JSON ({exc.msg})") from None
    run = RunData(path=path, info=info if isinstance(info, dict) else {})
    for row in _read_jsonl(scores_path):
        run.scores.setdefault(row["task"], []).append(row)
    if not run.scores:
        raise ReportError(f"{scores_path}: no scored items")
    return run


def expand_run_dirs(paths: Sequence[Path | str]) -> list[Path]:
    """Run folders named directly, plus the cell folders of any sweep folder (holding run folders)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise ReportError(f"{path}: not a folder")
        if (path / "scores.jsonl").is_file():
            found.append(path)
            continue
        cells = sorted(p.parent for p in path.glob("*/scores.jsonl"))
        if not cells:
            raise ReportError(f"{path}: neither a run folder (scores.jsonl) nor a sweep folder of runs")
        found.extend(cells)
    return found


def load_reported(langs: Sequence[str] = ("zh",)) -> list[dict[str, Any]]:
    """The paper's Table 2 (and Table 4 for en) rows, as percentages; missing cells are None."""
    out = []
    with REPORTED_CSV.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["lang"] in langs:
                out.append({k: (float(v) if v else None) if k not in ("model", "type", "lang") else v
                            for k, v in row.items()})
    return out


# ---------------------------------------------------------------- figures
def score_nutrition_rows(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The nutrition metric's own figures for these items (unparsed/failed items stay unparsed)."""
    from metrics.nutrition_error.nutrition_error import score_nutrition

    predictions = [r["parsed"] if isinstance(r.get("parsed"), dict) and not r.get("error") else ""
                   for r in rows]
    return score_nutrition(predictions, [r["reference"] for r in rows])


def component(figures: dict[str, Any], nutrient: str, stat: str) -> float | None:
    """`calories_mae`-style key from the nutrition metric's output (flat or nested)."""
    value = figures.get(f"{nutrient}_{stat}")
    if value is None and isinstance(figures.get(nutrient), dict):
        value = figures[nutrient].get(stat)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def accuracy(rows: Sequence[dict[str, Any]]) -> float | None:
    """Share of items marked correct; unparsed, failed and unscored items count as not correct.

    None when no item was scored at all (VQA without a judge).
    """
    if not rows or all(r.get("correct") is None for r in rows):
        return None
    return sum(r.get("correct") is True for r in rows) / len(rows)


def headline(task: str, rows: Sequence[dict[str, Any]]) -> float | None:
    """The figure Table 2 ranks by: accuracy, or Average MAPE for nutrition (both fractions)."""
    if task == "nutrition":
        value = score_nutrition_rows(rows).get("avg_mape")
        return None if value is None else float(value)
    return accuracy(rows)


def headline_ci(task: str, rows: Sequence[dict[str, Any]], *, n_boot: int = 1000,
                seed: int = 0) -> tuple[float, float] | None:
    """95% interval for `headline`, resampling merchants (the items' `merchant_id`).

    Memoised per item list: a report shows the same interval in several tables and plots, and a
    nutrition interval calls the metric once per resample.
    """
    key = (task, id(rows), n_boot, seed)
    if key in _CI_MEMO and _CI_MEMO[key][0] is rows:
        return _CI_MEMO[key][1]
    interval: tuple[float, float] | None = None
    merchants = [str(r.get("merchant_id")) for r in rows]
    if rows and headline(task, rows) is not None and can_resample(len(rows), merchants):
        if task == "nutrition":
            interval = cluster_bootstrap_ci(len(rows), merchants, _nutrition_statistic(rows),
                                            n_boot=n_boot, seed=seed)
        else:
            interval = cluster_bootstrap_mean_ci([float(r.get("correct") is True) for r in rows], merchants,
                                                 n_boot=n_boot, seed=seed)
    if len(_CI_MEMO) > 256:  # long-lived callers (the Space) must not grow it forever
        _CI_MEMO.clear()
    _CI_MEMO[key] = (rows, interval)  # holding `rows` keeps its id from being reused
    return interval


_CI_MEMO: dict[tuple[str, int, int, int], tuple[Sequence[dict[str, Any]], tuple[float, float] | None]] = {}


def _nutrition_statistic(rows: Sequence[dict[str, Any]]) -> Statistic:
    """avg_mape of a resample from the metric's per-item APEs (one metric call, not one per resample)."""
    per_item = score_nutrition_rows(rows)["per_item"]
    return mean_of_column_means(np.array([[np.nan if item["ape"][c] is None else item["ape"][c] for c in NUTRIENTS]
                                          for item in per_item]))


def _correct_statistic(rows: Sequence[dict[str, Any]]) -> Statistic:
    values = np.array([float(r.get("correct") is True) for r in rows])
    return lambda indices: float(values[indices].mean())


def paired_difference(task: str, rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]], *,
                      n_boot: int = 1000, seed: int = 0) -> dict[str, Any] | None:
    """Headline of run A minus run B on the items both scored, with a paired cluster-bootstrap interval."""
    by_id = {r["id"]: r for r in rows_b}
    common = [(a, by_id[a["id"]]) for a in rows_a if a["id"] in by_id]
    if not common:
        return None
    a_rows, b_rows = [a for a, _ in common], [b for _, b in common]
    if headline(task, a_rows) is None or headline(task, b_rows) is None:
        return None
    make = _nutrition_statistic if task == "nutrition" else _correct_statistic
    diff, interval = paired_bootstrap(len(common), [str(a.get("merchant_id")) for a in a_rows],
                                      make(a_rows), make(b_rows), n_boot=n_boot, seed=seed)
    return {"n": len(common), "diff": diff, "ci95": interval}


def _group_key(row: dict[str, Any], dimension: str) -> str:
    value = row.get(dimension)
    return "(none)" if value is None else str(value)


def breakdown(rows: Sequence[dict[str, Any]], dimension: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Items grouped by one field, largest group first (image counts in numeric order)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(_group_key(row, dimension), []).append(row)
    if dimension == "n_images":
        return sorted(groups.items(), key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0))
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


# ---------------------------------------------------------------- markdown
def pct(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{100 * value:.2f}"


def with_ci(value: float | None, interval: tuple[float, float] | None) -> str:
    if value is None:
        return "–"
    if interval is None or any(math.isnan(x) for x in interval):
        return pct(value)
    return f"{pct(value)} [{pct(interval[0])}, {pct(interval[1])}]"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


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


TABLE2_HEADERS = (
    ["Model", "Source", "Cls Acc (%)"]
    + [f"{SHORT[n]} {stat}" for n in NUTRIENTS
       for stat in (f"MAE ({UNITS[n]})", f"RMSE ({UNITS[n]})", "MAPE (%)")]
    + ["Avg MAPE (%)", "VQA Acc (%)", "n (cls/nut/vqa)"]
)


def table2(runs: Sequence[RunData], *, reported: bool = True, n_boot: int = 1000) -> str:
    """The paper's Table 2 layout: measured runs, then baselines, then the paper's reported rows."""
    grouped = group_runs(runs)
    measured, baselines = [], []
    for label, tasks in grouped.items():
        cells = [label]
        any_run = next(iter(tasks.values()))
        cells.append("baseline (no skill)" if any_run.is_baseline
                     else "measured (" + ", ".join(sorted({r.path.name for r in tasks.values()})) + ")")
        cls = tasks.get("classification")
        cells.append(_headline_cell("classification", cls, n_boot))
        nut = tasks.get("nutrition")
        figs = score_nutrition_rows(nut.scores["nutrition"]) if nut else {}
        for nutrient in NUTRIENTS:
            mae, rmse, mape = (component(figs, nutrient, s) for s in ("mae", "rmse", "mape"))
            cells += ["–" if mae is None else f"{mae:.2f}", "–" if rmse is None else f"{rmse:.2f}", pct(mape)]
        cells.append(_headline_cell("nutrition", nut, n_boot))
        cells.append(_headline_cell("vqa", tasks.get("vqa"), n_boot))
        cells.append("/".join(str(len(tasks[t].scores[t])) if t in tasks else "–" for t in TASK_ORDER))
        (baselines if any_run.is_baseline else measured).append(cells)
    rows = measured + baselines
    langs = sorted({str(r.setting("lang") or "zh") for r in runs}) or ["zh"]
    if reported:
        for row in load_reported(langs):
            label = row["model"] + (f" ({row['lang']})" if row["lang"] != "zh" else "")
            cells = [label, "reported (paper)", _reported(row["classification_acc"])]
            for nutrient in NUTRIENTS:
                cells += ["–", "–", _reported(row[f"{nutrient}_mape"])]
            cells += [_reported(row["avg_mape"]), _reported(row["vqa_acc"]), "–"]
            rows.append(cells)
    return md_table(TABLE2_HEADERS, rows)


def _reported(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _headline_cell(task: str, run: RunData | None, n_boot: int) -> str:
    if run is None:
        return "–"
    rows = run.scores[task]
    value = headline(task, rows)
    if value is None:
        return "not scored" if task == "vqa" else "–"
    return with_ci(value, headline_ci(task, rows, n_boot=n_boot))


def comparison(runs: Sequence[RunData], *, against_first: bool = False, n_boot: int = 1000) -> str:
    """Paired differences (A − B, percentage points) on shared items, with 95% cluster-bootstrap CIs."""
    grouped = list(group_runs(runs).items())
    pairs = [(grouped[0], other) for other in grouped[1:]] if against_first else \
        ([(grouped[0], grouped[1])] if len(grouped) == 2 else [])
    lines = []
    for (label_a, tasks_a), (label_b, tasks_b) in pairs:
        for task in TASK_ORDER:
            if task not in tasks_a or task not in tasks_b:
                continue
            result = paired_difference(task, tasks_a[task].scores[task], tasks_b[task].scores[task],
                                       n_boot=n_boot)
            if result is None:
                continue
            low, high = result["ci95"]
            better_when_lower = task == "nutrition"
            if low > 0 or high < 0:
                a_ahead = (result["diff"] < 0) == better_when_lower
                verdict = f"{'A' if a_ahead else 'B'} better"
            else:
                verdict = "no clear difference (interval contains 0)"
            metric = "Avg MAPE" if task == "nutrition" else "accuracy"
            lines.append([task, metric, label_a, label_b, str(result["n"]),
                          f"{100 * result['diff']:+.2f}", f"[{100 * low:+.2f}, {100 * high:+.2f}]", verdict])
    if not lines:
        return ""
    return md_table(["Task", "Figure", "A", "B", "Shared items", "A − B (pp)", "95% CI (pp)", "Reading"], lines)


def breakdown_tables(runs: Sequence[RunData]) -> str:
    """Per task and dimension: headline per group for every run, each cell with its item count."""
    grouped = group_runs(runs)
    sections = []
    for task in TASK_ORDER:
        columns = [(label, tasks[task]) for label, tasks in grouped.items() if task in tasks]
        if not columns:
            continue
        if task == "vqa" and all(r.get("correct") is None for _, run in columns for r in run.scores[task]):
            sections.append("vqa: breakdowns appear once VQA is scored with a judge.")
            continue
        if len(columns) > MAX_BREAKDOWN_RUNS:
            sections.append(f"{task}: breakdowns shown for the first {MAX_BREAKDOWN_RUNS} of {len(columns)} "
                            "runs; report fewer folders at a time to see the others.")
            columns = columns[:MAX_BREAKDOWN_RUNS]
        figure = "Avg MAPE (%), lower is better" if task == "nutrition" else "accuracy (%)"
        for dimension in DIMENSIONS[task]:
            groups = breakdown(columns[0][1].scores[task], dimension)
            shown, hidden = groups[:MAX_BREAKDOWN_ROWS], groups[MAX_BREAKDOWN_ROWS:]
            rows = []
            for value, _ in shown:
                cells = [value]
                for _, run in columns:
                    subset = [r for r in run.scores[task] if _group_key(r, dimension) == value]
                    cells.append(_cell(task, subset))
                rows.append(cells)
            name = DIMENSION_TITLES[dimension]
            note = f"\n\n{len(hidden)} smaller groups not shown." if hidden else ""
            sections.append(f"### {task} by {name}: {figure}\n\n"
                            f"{md_table([name, *(lbl for lbl, _ in columns)], rows)}{note}")
    if sections:
        sections.append(f"† fewer than {SMALL_CELL} items: too small to read anything into.")
    return "\n\n".join(sections)


def _cell(task: str, subset: Sequence[dict[str, Any]]) -> str:
    if not subset:
        return "– (n=0)"
    value = headline(task, subset)
    flag = " †" if len(subset) < SMALL_CELL else ""
    return f"{'not scored' if value is None else pct(value)} (n={len(subset)}){flag}"


# ---------------------------------------------------------------- the report and its CLI
def dataset_note(runs: Sequence[RunData]) -> str:
    """Which data each run used: the paper's rows only compare with runs on the full release."""
    seen: dict[str, list[str]] = {}
    for run in runs:
        data = run.info.get("dataset") or run.setting("dataset") or {"source": "embedded sample"}
        if not isinstance(data, dict):
            data = {"source": data}
        text = str(data.get("source") or "embedded sample")
        prints = data.get("fingerprints")
        if isinstance(prints, dict) and prints:
            text += " (fingerprints " + ", ".join(f"{k} {str(v)[:10]}" for k, v in sorted(prints.items())) + ")"
        seen.setdefault(text, []).append(run.path.name)
    lines = []
    for text, names in seen.items():
        which = "all runs" if len(seen) == 1 and len(names) > 1 else ", ".join(names)
        lines.append(f"- Dataset: `{text}`: {which}")
        if "sample" in text.split(" (")[0]:
            lines.append("  - the embedded **synthetic** sample: these figures check the pipeline and are "
                         "not comparable with the paper's")
    return "\n".join(lines)


def build_report(runs: Sequence[RunData], *, compare: bool = False, reported: bool = True,
                 n_boot: int = 1000, plot_dir: Path | None = None) -> str:
    """The whole markdown report for these runs."""
    from eval.sweep import sweep_sections

    parts = ["# DiningBench results", dataset_note(runs), "## Results (Table 2 layout)", table2(
        runs, reported=reported, n_boot=n_boot),
        "Percentages with 2 decimals; `[low, high]` is a 95% bootstrap interval resampling whole "
        "merchants (items of one restaurant are not independent). MAE/RMSE per serving in kcal or g; "
        "Avg MAPE is the mean of the four MAPEs, lower is better. Baseline rows show what no skill "
        "scores. Rows marked *reported (paper)* are copied from the paper (full benchmark), not "
        "reproduced here, and compare only with runs on the full release."]
    vqa = [r for run in runs for r in run.scores.get("vqa", [])]
    unscored = sum(r.get("correct") is None for r in vqa)
    if unscored:
        how = "`python -m eval score DIR --judge openai:MODEL` (add `--judge-base-url URL` for a local server)"
        parts.append(f"VQA is not scored: no judge was configured. Score it with {how}." if unscored == len(vqa)
                     else f"{unscored} VQA items have no verdict and count as not correct; re-score with {how}.")
    paired = comparison(runs, against_first=compare, n_boot=n_boot)
    if paired:
        parts += ["## Paired comparison", paired,
                  "Both runs are resampled on the same merchants, so shared difficulty cancels out. "
                  "pp = percentage points; for Avg MAPE a negative difference means A errs less."]
    sweep = sweep_sections(runs, plot_dir=plot_dir, n_boot=n_boot)
    if sweep:
        parts.append(sweep)
    details = breakdown_tables(runs)
    if details:
        parts += ["## Breakdowns", details]
    return "\n\n".join(parts) + "\n"


def write_run_report(run_dir: Path) -> None:
    """Write `report.md` for one scored run folder (called by `python -m eval run` and `score`)."""
    run_dir = Path(run_dir)
    (run_dir / "report.md").write_text(build_report([load_run(run_dir)]), encoding="utf-8")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dirs", nargs="+", metavar="DIR",
                        help="run folders (with scores.jsonl) or sweep folders holding run folders")
    parser.add_argument("--out", type=Path, help="write the markdown here instead of printing it")
    parser.add_argument("--model-card", action="store_true",
                        help="print a model-index YAML block and a markdown table for a model card")
    parser.add_argument("--compare", action="store_true",
                        help="paired difference of every run against the first (automatic for two runs)")
    parser.add_argument("--no-reported", action="store_true", help="leave out the paper's reported rows")
    parser.add_argument("--plot-dir", type=Path,
                        help="where sweep plots go (default: beside --out, or inside a single sweep folder)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (default 1000)")


def main(args: argparse.Namespace) -> int:
    try:
        if args.n_boot < 1:
            raise ReportError(f"--n-boot must be at least 1 (got {args.n_boot})")
        runs = [load_run(path) for path in expand_run_dirs(args.dirs)]
        if args.model_card:
            from eval.model_card import render_model_card

            text = render_model_card(runs)
        else:
            plot_dir = args.plot_dir
            if plot_dir is None and args.out is not None:
                plot_dir = args.out.parent
            elif plot_dir is None and len(args.dirs) == 1 and not (Path(args.dirs[0]) / "scores.jsonl").exists():
                plot_dir = Path(args.dirs[0])
            text = build_report(runs, compare=args.compare, reported=not args.no_reported,
                                n_boot=args.n_boot, plot_dir=plot_dir)
    except (ReportError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0
