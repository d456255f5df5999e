"""Gradio demo of the dining_accuracy metric: paste answers and letters, get the accuracy.

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


def _items(text: str) -> list[Any]:
    """A JSON list (for multi-line answers) or one item per non-empty line."""
    text = text.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            if isinstance(value, list):
                return value
    return [line for line in text.splitlines() if line.strip()]


def score(predictions: str, references: str, n_options: float) -> dict[str, Any]:
    """Accuracy of the pasted predictions; input problems come back as a one-line `error`."""
    preds, refs = _items(predictions), _items(references)
    if not refs:
        return {"error": "paste at least one reference letter"}
    if len(preds) != len(refs):
        return {"error": f"{len(preds)} predictions but {len(refs)} references: give one of each per item"}
    try:
        return METRIC.compute(predictions=[str(p) for p in preds], references=[str(r) for r in refs],
                              n_options=int(n_options))
    except ValueError as exc:
        return {"error": str(exc).splitlines()[0]}


def _pct(value: float | None) -> str:
    """A fraction as a percentage with 2 decimals, like the CLI (0.2445 -> "24.45%"); None -> "—"."""
    return "—" if value is None else f"{100 * value:.2f}%"


def headline(result: dict[str, Any]) -> str:
    """The Markdown shown above the raw keys: accuracy, items and parse failures, or the error.

    >>> print(headline({"accuracy": 0.5, "n": 4, "parse_failures": 1, "correct": [True, False, True, False]}))
    **Accuracy: 50.00%** (2 of 4 correct)
    <BLANKLINE>
    n = 4 · parse failures: 1 (counted as wrong)
    >>> headline({"error": "paste at least one reference letter"})
    '**Error:** paste at least one reference letter'
    """
    if not result:
        return ""
    if "error" in result:
        return f"**Error:** {result['error']}"
    n = result["n"]
    correct = sum(result["correct"]) if "correct" in result else round(result["accuracy"] * n)
    return (f"**Accuracy: {_pct(result['accuracy'])}** ({correct} of {n} correct)\n\n"
            f"n = {n} · parse failures: {result['parse_failures']} (counted as wrong)")


with gr.Blocks(title="DiningBench dining_accuracy") as demo:
    gr.Markdown(
        "# dining_accuracy\nMultiple-choice dish identification accuracy. One raw model answer per line "
        "(or a JSON list for multi-line answers) and one reference letter per line. Unreadable or "
        "ambiguous answers count as wrong and are reported in `parse_failures`."
    )
    with gr.Row():
        predictions_box = gr.Textbox(label="Predictions (raw model text)", lines=8,
                                     value="C\nAnswer: B\n答案：D\nIt could be A or E.")
        references_box = gr.Textbox(label="References (letters)", lines=8, value="C\nA\nD\nE")
    options_box = gr.Number(label="Number of options", value=8, precision=0, minimum=1, maximum=26)
    button = gr.Button("Compute", variant="primary")
    summary = gr.Markdown()
    with gr.Accordion("All result keys", open=False):
        output = gr.JSON(label="Result")
    button.click(score, inputs=[predictions_box, references_box, options_box], outputs=output,
                 api_name="score").then(headline, inputs=output, outputs=summary, api_visibility="private")

if __name__ == "__main__":
    demo.launch()
