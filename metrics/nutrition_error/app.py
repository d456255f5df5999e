"""Gradio demo of the nutrition_error metric: paste nutrition answers and references, get MAPE.

Built with gr.Blocks (evaluate's launch_gradio_widget does not work on current Gradio); importing
this file builds `demo` without launching it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import evaluate
import gradio as gr

METRIC = evaluate.load(str(Path(__file__).resolve().parent))

EXAMPLE_PREDICTIONS = json.dumps([
    '```json\n{"calories": 450, "protein": 20, "carbohydrates": 50, "fat": 18}\n```',
    '{"热量": "约600千卡", "蛋白质": "25克", "碳水化合物": "60-80g", "脂肪": "20 g"}',
    "I cannot estimate this dish.",
], ensure_ascii=False, indent=1)
EXAMPLE_REFERENCES = "\n".join(json.dumps(r) for r in [
    {"calories": 500, "protein": 25, "carbohydrates": 50, "fat": 20},
    {"calories": 640, "protein": 30, "carbohydrates": 70, "fat": 25},
    {"calories": 300, "protein": 10, "carbohydrates": 40, "fat": 10},
])


def _items(text: str, what: str) -> list[Any]:
    """A JSON list, or one JSON value (or raw text line) per non-empty line."""
    text = text.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            if isinstance(value, list):
                return value
    items = []
    for number, line in enumerate(line for line in text.splitlines() if line.strip()):
        try:
            items.append(json.loads(line))
        except ValueError:
            if what == "references":
                raise ValueError(f"reference line {number + 1} is not a JSON object") from None
            items.append(line)
    return items


def score(predictions: str, references: str) -> dict[str, Any]:
    """Nutrition error figures; input problems come back as a one-line `error`."""
    try:
        preds, refs = _items(predictions, "predictions"), _items(references, "references")
        if not refs:
            return {"error": "paste at least one reference"}
        if len(preds) != len(refs):
            return {"error": f"{len(preds)} predictions but {len(refs)} references: give one of each per item"}
        result = METRIC.compute(predictions=preds, references=refs)
    except (ValueError, TypeError) as exc:
        return {"error": str(exc).splitlines()[0]}
    return {k: v for k, v in result.items() if k != "per_item"} | {"per_item": result["per_item"]}


NUTRIENT_UNITS = {"calories": "kcal", "protein": "g", "carbohydrates": "g", "fat": "g"}
TABLE_HEADERS = ["Nutrient", "Unit", "MAE", "RMSE", "MAPE (%)"]


def _pct(value: float | None, sign: str = "%") -> str:
    """A fraction as a percentage with 2 decimals, like the CLI (0.2445 -> "24.45%"); None -> "—"."""
    return "—" if value is None else f"{100 * value:.2f}{sign}"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def headline(result: dict[str, Any]) -> str:
    """The Markdown shown first: Average MAPE, items, parse failures (or the error, as one line).

    >>> print(headline({"avg_mape": 0.2445, "avg_mape_parsed_only": 0.1, "n": 3, "parse_failures": 1,
    ...                 "zero_gt_exclusions": 0}))
    **Average MAPE: 24.45%** (lower is better)
    <BLANKLINE>
    n = 3 · parse failures: 1 (counted as predicting 0, APE 100%) · parsed answers only: 10.00%
    """
    if not result:
        return ""
    if "error" in result:
        return f"**Error:** {result['error']}"
    lines = [f"**Average MAPE: {_pct(result.get('avg_mape'))}** (lower is better)",
             f"n = {result['n']} · parse failures: {result['parse_failures']} (counted as predicting 0, APE 100%)"
             f" · parsed answers only: {_pct(result.get('avg_mape_parsed_only'))}"]
    if result.get("zero_gt_exclusions"):
        lines.append(f"{result['zero_gt_exclusions']} reference values of 0 left out of MAPE")
    return "\n\n".join(lines)


def nutrient_rows(result: dict[str, Any]) -> list[list[str]]:
    """One row per nutrient: name, unit, MAE, RMSE (in the unit), MAPE (%); no rows for an error.

    >>> nutrient_rows({"calories_mae": 50.0, "calories_rmse": 50.0, "calories_mape": 0.1})[0]
    ['calories', 'kcal', '50.00', '50.00', '10.00']
    """
    if not result or "error" in result:
        return []
    return [[c, unit, _num(result.get(f"{c}_mae")), _num(result.get(f"{c}_rmse")), _pct(result.get(f"{c}_mape"), "")]
            for c, unit in NUTRIENT_UNITS.items()]


def present(result: dict[str, Any]) -> tuple[str, list[list[str]]]:
    """What the page shows above the raw keys: (headline Markdown, per-nutrient rows)."""
    return headline(result), nutrient_rows(result)


with gr.Blocks(title="DiningBench nutrition_error") as demo:
    gr.Markdown(
        "# nutrition_error\nPer-serving nutrition estimation error (kcal, g). Predictions: a JSON list of "
        "raw answers, or one per line. References: one JSON object per line with calories, protein, "
        "carbohydrates and fat. Figures show as percentages; the raw result keys hold fractions (0.2445 = "
        "24.45%). An unparsed answer counts as predicting 0 (APE 100%)."
    )
    with gr.Row():
        predictions_box = gr.Textbox(label="Predictions (raw model text or JSON)", lines=10, value=EXAMPLE_PREDICTIONS)
        references_box = gr.Textbox(label="References (JSON per line)", lines=10, value=EXAMPLE_REFERENCES)
    button = gr.Button("Compute", variant="primary")
    summary = gr.Markdown()
    table = gr.Dataframe(headers=TABLE_HEADERS, label="Per nutrient (MAE and RMSE in the unit shown)",
                         interactive=False)
    with gr.Accordion("All result keys", open=False):
        output = gr.JSON(label="Result")
    button.click(score, inputs=[predictions_box, references_box], outputs=output,
                 api_name="score").then(present, inputs=output, outputs=[summary, table], api_visibility="private")

if __name__ == "__main__":
    demo.launch()
