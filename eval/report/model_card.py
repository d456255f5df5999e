"""`python -m eval report DIR --model-card`: results as a Hugging Face `model-index` block plus a table.

The YAML goes into the header of a model's README.md (the Hub renders it as an evaluation widget);
the markdown table goes into its body. Values are percentages rounded to 2 decimals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from eval.figures import component, headline, headline_ci, score_nutrition_rows
from eval.report.runs import RunData
from eval.report.tables import md_table, pct
from eval.types import NUTRIENTS

DATASET_ID = "diningbench/diningbench"  # the Hub id of the release
DATASET_NAME = "DiningBench"
TASK_TYPES = {  # Hub task type and a readable name for each config
    "classification": ("image-classification", "Fine-grained dish classification"),
    "nutrition": ("image-text-to-text", "Nutrition estimation"),
    "vqa": ("visual-question-answering", "Dietary VQA"),
}


def model_name(spec: str) -> str:
    """`openai:gpt-4o` -> `gpt-4o`; `hf:Qwen/Qwen3-VL-8B-Instruct` -> `Qwen/Qwen3-VL-8B-Instruct`."""
    return spec.split(":", 1)[1] if ":" in spec else spec


def _settings(run: RunData) -> dict[str, Any]:
    return {"lang": str(run.setting("lang") or "zh"), "images": run.setting("images") or "all",
            "cot": bool(run.setting("cot"))}


def _metrics(task: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures a model card shows for one task, as percentages; empty when unscored."""
    value = headline(task, rows)
    if value is None:
        return []
    if task != "nutrition":
        return [{"type": "accuracy", "name": "Accuracy (%)", "value": round(100 * value, 2)}]
    figures = score_nutrition_rows(rows)
    out = [{"type": "mape", "name": "Average MAPE (%)", "value": round(100 * value, 2)}]
    for nutrient in NUTRIENTS:
        mape = component(figures, nutrient, "mape")
        if mape is not None:
            out.append({"type": "mape", "name": f"{nutrient.capitalize()} MAPE (%)",
                        "value": round(100 * mape, 2)})
    return out


def model_index(runs: Sequence[RunData]) -> dict[str, list[dict[str, Any]]]:
    """`{model name: model-index list}`: one card per model, one result per task and setting."""
    cards: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        name = model_name(run.model)
        entry = cards.setdefault(name, [{"name": name, "results": []}])[0]
        for task in TASK_TYPES:
            if task not in run.scores:
                continue
            metrics = _metrics(task, run.scores[task])
            if not metrics:
                continue
            task_type, task_name = TASK_TYPES[task]
            entry["results"].append({
                "task": {"type": task_type, "name": task_name},
                "dataset": {"name": DATASET_NAME, "type": DATASET_ID, "config": task, "split": "test",
                            "args": _settings(run)},
                "metrics": metrics,
            })
    return cards


def results_table(runs: Sequence[RunData], *, n_boot: int = 1000) -> str:
    """Markdown table for a model card body: headline figures with 95% merchant-clustered intervals."""
    rows = []
    for run in runs:
        settings = _settings(run)
        setting = f"{settings['lang']}, {settings['images']} views, {'CoT' if settings['cot'] else 'no CoT'}"
        for task in TASK_TYPES:
            if task not in run.scores:
                continue
            items = run.scores[task]
            value = headline(task, items)
            interval = headline_ci(task, items, n_boot=n_boot)
            figure = "Average MAPE (%, lower is better)" if task == "nutrition" else "Accuracy (%)"
            rows.append([model_name(run.model), TASK_TYPES[task][1], setting, figure,
                         "not scored" if value is None else pct(value),
                         "–" if interval is None else f"[{pct(interval[0])}, {pct(interval[1])}]",
                         str(len(items))])
    return md_table(["Model", "Task", "Setting", "Figure", "Value", "95% CI", "Items"], rows)


def render_model_card(runs: Sequence[RunData], *, n_boot: int = 1000) -> str:
    """YAML block(s) to paste into the card header, then the table for its body."""
    parts = []
    for name, index in model_index(runs).items():
        block = yaml.safe_dump({"model-index": index}, sort_keys=False, allow_unicode=True)
        parts.append(f"<!-- {name}: paste into the YAML header of the model card; values are percentages -->\n"
                     f"```yaml\n{block}```")
    parts.append(results_table(runs, n_boot=n_boot))
    parts.append(f"Dataset: [{DATASET_NAME}](https://huggingface.co/datasets/{DATASET_ID}), split `test`. "
                 "Intervals: 95% bootstrap, resampling whole merchants.")
    return "\n\n".join(parts) + "\n"
