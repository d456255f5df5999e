"""Gradio demo of the judge_accuracy metric: closed-form rule verdicts, or a configured judge model.

Built with gr.Blocks (evaluate's launch_gradio_widget does not work on current Gradio); importing
this file builds `demo` without launching it.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import evaluate
import gradio as gr

METRIC = evaluate.load(str(Path(__file__).resolve().parent))
MODULE = sys.modules[type(METRIC).__module__]
OPENAI_URL = "https://api.openai.com/v1"
JUDGE_TIMEOUT_S = 60.0
JUDGE_MAX_TOKENS = 1024  # a verdict is one line; the limit leaves room for a short reason
MAX_REPLY_BYTES = 1 << 20  # a judge reply is a few hundred bytes; more is refused unread


class EndpointJudge:
    """`judge(prompt) -> text` over an OpenAI-compatible /chat/completions endpoint, at temperature 0. A spec
    is `openai:MODEL` or a bare model name. The key is the server environment's, never the page's, and never
    appears in an error: any failure is one line naming the HTTP status or the reason."""

    def __init__(self, spec: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = JUDGE_TIMEOUT_S) -> None:
        backend, sep, model = spec.partition(":")
        if sep and backend != "openai":
            raise ValueError(f"judge {spec!r}: this app calls an OpenAI-compatible endpoint; use openai:MODEL")
        self.model = (model if sep else spec).strip()
        if not self.model:
            raise ValueError(f"judge {spec!r}: name a model, e.g. openai:gpt-4o")
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL", "").strip() or OPENAI_URL).rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError("OPENAI_BASE_URL must be an http(s) URL")
        self._key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "").strip()
        if not self._key and base_url is None and not os.environ.get("OPENAI_BASE_URL"):
            raise ValueError("a judge needs OPENAI_API_KEY set on the server")
        self.timeout = timeout

    def __call__(self, prompt: str) -> str:
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": prompt}],
                           "temperature": 0, "max_tokens": JUDGE_MAX_TOKENS}).encode()
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {self._key or 'EMPTY'}"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - http(s) checked above
                data = response.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise ValueError(f"the judge endpoint answered HTTP {exc.code}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise ValueError(f"cannot reach the judge endpoint ({type(exc).__name__})") from None
        if len(data) > MAX_REPLY_BYTES:
            raise ValueError(f"the judge reply is over {MAX_REPLY_BYTES} bytes; not read")
        try:
            text = json.loads(data)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ValueError("the judge endpoint sent no chat completion") from None
        if not isinstance(text, str):
            raise ValueError("the judge endpoint sent an empty answer")
        return text

    def close(self) -> None:
        """Nothing is held open between calls."""


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
    try:
        judge = EndpointJudge(spec) if spec else None
        return METRIC.compute(predictions=preds, references=refs, questions=qs, judge=judge, judge_model=spec or None)
    except ValueError as exc:
        return {"error": str(exc).splitlines()[0]}


def _pct(value: float | None) -> str:
    """A fraction as a percentage with 2 decimals, like the CLI (0.2445 -> "24.45%"); None -> "—"."""
    return "—" if value is None else f"{100 * value:.2f}%"


def headline(result: dict[str, Any]) -> str:
    """The Markdown shown first: judge accuracy, scored / unscored / rule-decided counts, or the error.

    >>> print(headline({"accuracy": 0.25, "accuracy_scored": 1 / 3, "n": 4, "unscored": 1, "decided_by_rule": 2,
    ...                 "verdicts": ["C", "I", None, "I"], "injection_suspected": 0}))
    **Judge accuracy: 25.00%** (1 of 4 correct; unscored counts as not correct)
    <BLANKLINE>
    n = 4 · scored: 3 · unscored: 1 · decided by rule: 2 · accuracy on scored items: 33.33%
    """
    if not result:
        return ""
    if "error" in result:
        return f"**Error:** {result['error']}"
    n, unscored = result["n"], result["unscored"]
    correct = result["verdicts"].count("C") if "verdicts" in result else round(result["accuracy"] * n)
    lines = [f"**Judge accuracy: {_pct(result['accuracy'])}** ({correct} of {n} correct; "
             "unscored counts as not correct)",
             f"n = {n} · scored: {n - unscored} · unscored: {unscored} · decided by rule: "
             f"{result['decided_by_rule']} · accuracy on scored items: {_pct(result.get('accuracy_scored'))}"]
    if result.get("injection_suspected"):
        lines.append(f"{result['injection_suspected']} answers carry text aimed at the judge")
    return "\n\n".join(lines)


with gr.Blocks(title="DiningBench judge_accuracy") as demo:
    gr.Markdown(
        "# judge_accuracy\nBinary verdicts on free-text dietary answers. Closed-form answers (comply / "
        "does not comply, 符合/不符合, yes/no, 是/否) are decided by rule; the rest need a judge model "
        "(a spec such as `openai:gpt-4o` on an OpenAI-compatible endpoint, its key set on the server). Without a judge those items "
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
    summary = gr.Markdown()
    with gr.Accordion("All result keys", open=False):
        output = gr.JSON(label="Result")
    with gr.Accordion(f"Judge prompt ({MODULE.JUDGE_PROMPT_VERSION})", open=False):
        gr.Code(MODULE.JUDGE_PROMPT, language=None)
    button.click(score, inputs=[questions_box, references_box, predictions_box, judge_box], outputs=output,
                 api_name="score").then(headline, inputs=output, outputs=summary, api_visibility="private")

if __name__ == "__main__":
    demo.launch()
