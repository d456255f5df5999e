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


with gr.Blocks(title="DiningBench nutrition_error") as demo:
    gr.Markdown(
        "# nutrition_error\nPer-serving nutrition estimation error (kcal, g). Predictions: a JSON list of "
        "raw answers, or one per line. References: one JSON object per line with calories, protein, "
        "carbohydrates and fat. Ratios are fractions (0.2445 = 24.45%); an unparsed answer counts as "
        "predicting 0 (APE 100%)."
    )
    with gr.Row():
        predictions_box = gr.Textbox(label="Predictions (raw model text or JSON)", lines=10, value=EXAMPLE_PREDICTIONS)
        references_box = gr.Textbox(label="References (JSON per line)", lines=10, value=EXAMPLE_REFERENCES)
    button = gr.Button("Compute", variant="primary")
    output = gr.JSON(label="Result")
    button.click(score, inputs=[predictions_box, references_box], outputs=output, api_name="score")

if __name__ == "__main__":
    demo.launch()
