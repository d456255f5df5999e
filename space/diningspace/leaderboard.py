"""The Leaderboard table: the paper's reported figures next to the runs found under results/.

Reported rows are marked as reported (not reproduced here) and carry no interval; local runs
carry the 95% intervals their metrics.json holds. Figures are percentages, as in the paper.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

NUTRIENTS = ("calories", "protein", "carbohydrates", "fat")
COLUMNS = ["Model", "Source", "Lang", "Cls acc %", "Cls 95% CI",
           "Avg MAPE %", "MAPE 95% CI", "kcal MAPE %", "Prot MAPE %",
           "Carb MAPE %", "Fat MAPE %", "VQA acc %", "VQA 95% CI", "Items", "Data"]
DATATYPES = ["str", "str", "str", "number", "str", "number", "str", "number", "number", "number",
             "number", "number", "str", "str", "str"]
# Pixel widths, so that sparse columns stay readable instead of collapsing to one character.
WIDTHS = [230, 170, 60, 95, 120, 110, 120, 110, 110, 110, 100, 95, 120, 150, 200]
REPORTED = "reported (paper)"


def _percent(value: Any) -> float | None:
    """A fraction from metrics.json as a percentage rounded for display; None when absent."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return round(number * 100, 2) if math.isfinite(number) else None


def _reported_number(text: str) -> float | None:
    try:
        return round(float(text), 2) if text.strip() else None
    except ValueError:
        return None


def _interval(value: Any) -> str:
    if isinstance(value, list | tuple) and len(value) == 2:
        low, high = _percent(value[0]), _percent(value[1])
        if low is not None and high is not None:
            return f"{low:.2f} – {high:.2f}"
    return ""


def _empty_row() -> dict[str, Any]:
    return dict.fromkeys(COLUMNS)


def reported_rows(csv_path: Path | None) -> list[dict[str, Any]]:
    """Rows of the paper's Table 2 (and its English-prompt Table 4 rows); [] if the file is absent."""
    if csv_path is None or not csv_path.is_file():
        return []
    rows = []
    with csv_path.open(newline="", encoding="utf-8") as fh:
        for rec in csv.DictReader(fh):
            row = _empty_row()
            row.update({
                "Model": rec.get("model", ""), "Source": REPORTED, "Lang": rec.get("lang", ""),
                "Cls acc %": _reported_number(rec.get("classification_acc", "")),
                "Avg MAPE %": _reported_number(rec.get("avg_mape", "")),
                "kcal MAPE %": _reported_number(rec.get("calories_mape", "")),
                "Prot MAPE %": _reported_number(rec.get("protein_mape", "")),
                "Carb MAPE %": _reported_number(rec.get("carbohydrates_mape", "")),
                "Fat MAPE %": _reported_number(rec.get("fat_mape", "")),
                "VQA acc %": _reported_number(rec.get("vqa_acc", "")),
                "Data": f"DiningBench ({rec.get('type', '')} model)",
            })
            rows.append(row)
    return rows


def _component_mape(nutrition: dict[str, Any], component: str) -> Any:
    """A component's MAPE whichever way metrics.json nests it (`fat_mape`, `fat.mape`, `mape.fat`)."""
    if f"{component}_mape" in nutrition:
        return nutrition[f"{component}_mape"]
    if isinstance(nutrition.get(component), dict):
        return nutrition[component].get("mape")
    if isinstance(nutrition.get("mape"), dict):
        return nutrition["mape"].get(component)
    return None


def _run_setting(run: dict[str, Any], key: str) -> Any:
    settings = run.get("settings") if isinstance(run.get("settings"), dict) else {}
    return run.get(key, settings.get(key))


def _dataset_label(run: dict[str, Any]) -> str:
    dataset = _run_setting(run, "dataset")
    if isinstance(dataset, dict):
        dataset = dataset.get("name") or dataset.get("source") or dataset.get("fingerprint")
    return str(dataset) if dataset else "embedded synthetic sample"


def local_rows(results_dir: Path) -> list[dict[str, Any]]:
    """One row per run folder under `results_dir` that holds a readable metrics.json."""
    rows = []
    if not results_dir.is_dir():
        return rows
    for metrics_path in sorted(results_dir.glob("*/metrics.json")):
        try:
            metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
            run_path = metrics_path.with_name("run.json")
            run = json.loads(run_path.read_text(encoding="utf-8")) if run_path.is_file() else {}
        except (OSError, ValueError):
            continue  # a run being written or a broken file: skip it rather than break the table
        if not isinstance(metrics, dict) or not isinstance(run, dict):
            continue
        cls, nut, vqa = (metrics.get(t) if isinstance(metrics.get(t), dict) else {}
                         for t in ("classification", "nutrition", "vqa"))
        counts = [f"{t[:3]} {m['n']}" for t, m in (("classification", cls), ("nutrition", nut), ("vqa", vqa))
                  if m.get("n") is not None]
        row = _empty_row()
        row.update({
            "Model": str(_run_setting(run, "model") or metrics_path.parent.name),
            "Source": f"local run: {metrics_path.parent.name}",
            "Lang": str(_run_setting(run, "lang") or ""),
            "Cls acc %": _percent(cls.get("accuracy")),
            "Cls 95% CI": _interval(cls.get("accuracy_ci95")),
            "Avg MAPE %": _percent(nut.get("avg_mape")),
            "MAPE 95% CI": _interval(nut.get("avg_mape_ci95")),
            "kcal MAPE %": _percent(_component_mape(nut, "calories")),
            "Prot MAPE %": _percent(_component_mape(nut, "protein")),
            "Carb MAPE %": _percent(_component_mape(nut, "carbohydrates")),
            "Fat MAPE %": _percent(_component_mape(nut, "fat")),
            "VQA acc %": _percent(vqa.get("accuracy")),
            "VQA 95% CI": _interval(vqa.get("accuracy_ci95")),
            "Items": ", ".join(counts),
            "Data": _dataset_label(run),
        })
        rows.append(row)
    return rows


def leaderboard_table(csv_path: Path | None, results_dir: Path) -> pd.DataFrame:
    """Local runs first (what an operator came to compare), then the reported rows."""
    frame = pd.DataFrame(local_rows(results_dir) + reported_rows(csv_path), columns=COLUMNS)
    return frame.astype(object).where(frame.notna(), None)
