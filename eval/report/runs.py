"""Run folders and the figures computed from them: what `report`, `sweep` and the model card share.

A run folder's scores.jsonl holds one scored line per item; every figure here is recomputed from
those lines with the metrics' own functions, so any slice of a run can be scored after the fact.
"""

from __future__ import annotations

import csv
import json
import math
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


def group_key(row: dict[str, Any], dimension: str) -> str:
    value = row.get(dimension)
    return "(none)" if value is None else str(value)


def breakdown(rows: Sequence[dict[str, Any]], dimension: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Items grouped by one field, largest group first (image counts in numeric order)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(group_key(row, dimension), []).append(row)
    if dimension == "n_images":
        return sorted(groups.items(), key=lambda kv: (not kv[0].isdigit(), int(kv[0]) if kv[0].isdigit() else 0))
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
