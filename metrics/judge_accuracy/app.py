"""Gradio demo of the judge_accuracy metric: closed-form rule verdicts, or a configured judge model.

Built with gr.Blocks (evaluate's launch_gradio_widget does not work on current Gradio); importing
this file builds `demo` without launching it. Judge keys come from the server's environment only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import evaluate
import gradio as gr

METRIC = evaluate.load(str(Path(__file__).resolve().parent))
MODULE = sys.modules[type(METRIC).__module__]


def _items(text: str) -> list[str]:
    """A JSON list (for multi-line answers) or one item per non-empty line."""
    text = text.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            if isinstance(value, list):
                return [str(v) for v in value]
    return [line for line in text.splitlines() if line.strip()]


def score(questions: str, references: str, predictions: str, judge_spec: str) -> dict[str, Any]:
    """Verdicts by rule, and by the judge when a spec is given; errors come back as one line."""
    qs, refs, preds = _items(questions), _items(references), _items(predictions)
    if not refs:
        return {"error": "paste at least one question, reference and prediction"}
    if not len(qs) == len(refs) == len(preds):
        return {"error": f"{len(qs)} questions, {len(refs)} references and {len(preds)} predictions: "
                         "give one of each per item"}
    spec = judge_spec.strip()
    judge = None
    try:
        if spec:
            try:
                from eval.judge import make_judge  # the harness's backends, in a DiningBench checkout
            except ImportError:
                return {"error": "a judge spec needs the DiningBench harness (run this app from a checkout)"}
            judge = make_judge(spec)
        return METRIC.compute(predictions=preds, references=refs, questions=qs, judge=judge, judge_model=spec or None)
    except ValueError as exc:
        return {"error": str(exc).splitlines()[0]}
    finally:
        if judge is not None:
            judge.close()


with gr.Blocks(title="DiningBench judge_accuracy") as demo:
    gr.Markdown(
        "# judge_accuracy\nBinary verdicts on free-text dietary answers. Closed-form answers (comply / "
        "does not comply, 符合/不符合, yes/no, 是/否) are decided by rule; the rest need a judge model "
        "(a spec such as `openai:gpt-4o`, with its key set on the server). Without a judge those items "
        "are `unscored`, which counts as not correct in `accuracy`."
    )
    with gr.Row():
        questions_box = gr.Textbox(label="Questions", lines=6,
                                   value="该菜品是否符合素食者的饮食要求？\nIs this dish suitable for a peanut allergy?")
        references_box = gr.Textbox(label="Reference answers", lines=6,
                                    value="不符合。酱汁含有猪油。\nNo. Peanuts are visible on top.")
        predictions_box = gr.Textbox(label="Candidate answers", lines=6, value="不符合，有猪油。\nYes, it looks safe.")
    judge_box = gr.Textbox(label="Judge (optional backend spec)", placeholder="openai:gpt-4o")
    button = gr.Button("Compute", variant="primary")
    output = gr.JSON(label="Result")
    with gr.Accordion(f"Judge prompt ({MODULE.JUDGE_PROMPT_VERSION})", open=False):
        gr.Code(MODULE.JUDGE_PROMPT, language=None)
    button.click(score, inputs=[questions_box, references_box, predictions_box, judge_box], outputs=output,
                 api_name="score")

if __name__ == "__main__":
    demo.launch()
