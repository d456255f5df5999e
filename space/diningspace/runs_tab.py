"""The Runs tab (and `python -m eval view DIR`): a run's items with filters, and one item whole.

The data comes from `eval.report.items`; this module only lays it out. Everything shown is the run
folder's own content (answers, prompts, references), in text components that never render HTML.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import gradio as gr
from PIL import Image

from eval.report.items import STATUSES, item_detail, run_items
from eval.report.runs import ReportError
from eval.report.tables import pct

ALL = "all"
COLUMNS = ["task", "id", "status", "cuisine", "parsed", "reference", "score"]


def run_folders(root: Path) -> list[Path]:
    """`root` itself when it is a run folder, else the run folders below it (sweep cells too)."""
    root = Path(root)
    if (root / "scores.jsonl").is_file():
        return [root]
    return sorted({p.parent for p in root.glob("*/scores.jsonl")} | {p.parent for p in root.glob("*/*/scores.jsonl")})


def _short(value: Any, width: int = 60) -> str:
    text = "" if value is None else str(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _score(row: dict[str, Any]) -> str:
    if row.get("task") == "nutrition" and isinstance(row.get("ape"), dict):
        values = [v for v in row["ape"].values() if isinstance(v, int | float)]
        return f"mean APE {pct(sum(values) / len(values))}%" if values else "–"
    if row.get("verdict"):
        return f"verdict {row['verdict']} ({row.get('decided_by') or '?'})"
    if row.get("correct") is not None:
        return "correct" if row["correct"] else "wrong"
    return "–"


def table(run_dir: str | None, task: str, status: str, cuisine: str) -> tuple[list[list[str]], list[str]]:
    """The filtered items as table rows, and their `task/id` keys for the item picker."""
    if not run_dir:
        return [], []
    items = run_items(run_dir, task=None if task == ALL else task, status=None if status == ALL else status,
                      cuisine=None if cuisine == ALL else cuisine)
    rows = [[r["task"], str(r["id"]), r["status"], str(r.get("cuisine") or ""), _short(r.get("parsed")),
             _short(r.get("reference")), _score(r)] for r in items]
    return rows, [f"{r['task']}/{r['id']}" for r in items]


def detail(run_dir: str | None, key: str | None) -> tuple[list[Any], str, str, Any, Any, Any, str, str]:
    """Gallery, prompt, raw answer, parsed, reference, score, judge reply and a note for one item."""
    if not run_dir or not key or "/" not in key:
        return [], "", "", None, None, None, "", ""
    task, item_id = key.split("/", 1)
    try:
        found = item_detail(run_dir, task, item_id)
    except ReportError as exc:
        return [], "", "", None, None, None, "", str(exc)
    gallery = [(Image.open(io.BytesIO(v.data)), f"view {i + 1}: {v.role}") for i, v in enumerate(found.views)]
    lines = [f"**{found.task} {found.id}**: {found.status}"]
    if found.finish_reason:
        lines.append(f"finish reason `{found.finish_reason}`")
    if found.error:
        lines.append(f"error: {found.error}")
    lines.append("prompt verified against the request hash" if found.prompt_verified else (found.note or ""))
    return (gallery, found.prompt, found.raw or "", _json(found.parsed), _json(found.reference), found.score,
            found.judge_reply or "", "  \n".join(line.replace("<", "&lt;") for line in lines if line))


def _json(value: Any) -> Any:
    """gr.JSON reads a string as JSON text: a letter or an answer must go in quoted."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else value


def build(results_dir: Path) -> tuple[Any, list[Any], Any, list[Any]]:
    """The tab's components, inside the current Blocks; returns what a page load should refresh."""
    folders = [str(p) for p in run_folders(results_dir)]
    gr.Markdown("A run's items one by one: filter, pick one, and see its views, the exact prompt sent, the raw "
                "answer, what was parsed, the reference and the score.")
    with gr.Row():
        run = gr.Dropdown(folders, value=folders[0] if folders else None, label="Run folder", scale=3)
        task = gr.Dropdown([ALL, "classification", "nutrition", "vqa"], value=ALL, label="Task")
        status = gr.Dropdown([ALL, *STATUSES], value=ALL, label="Status")
        cuisine = gr.Dropdown([ALL, "chinese", "western", "worldwide", "asian", "japanese", "latin_american",
                               "indian"], value=ALL, label="Cuisine")
    items = gr.Dataframe(headers=COLUMNS, interactive=False, wrap=True, elem_classes=["db-scroll"])
    item = gr.Dropdown([], label="Item", allow_custom_value=False)
    summary = gr.Markdown()
    gallery = gr.Gallery(label="Views as sent", columns=4, height="auto")
    prompt = gr.Textbox(label="Prompt sent", lines=6, max_lines=20)
    raw = gr.Textbox(label="Raw answer", lines=6, max_lines=30)
    with gr.Row():
        parsed, reference, score = gr.JSON(label="Parsed"), gr.JSON(label="Reference"), gr.JSON(label="Score")
    judge = gr.Textbox(label="Judge's reply (VQA)", lines=3, max_lines=12)

    def listed(run_dir: str | None) -> str | None:
        # Only the folders listed above: a client-sent path must never make the page read elsewhere.
        if run_dir is not None and run_dir not in folders:
            raise gr.Error("unknown run folder")
        return run_dir

    shown = [gallery, prompt, raw, parsed, reference, score, judge, summary]

    def refresh(run_dir: str | None, task_name: str, status_name: str, cuisine_name: str):
        # The first item's detail comes with the list: no second event to wait for.
        rows, keys = table(listed(run_dir), task_name, status_name, cuisine_name)
        first = keys[0] if keys else None
        return (rows, gr.update(choices=keys, value=first), *detail(run_dir, first))

    def show(run_dir: str | None, key: str | None):
        return detail(listed(run_dir), key)

    filters = [run, task, status, cuisine]
    for component in filters:
        component.input(refresh, filters, [items, item, *shown], api_visibility="private")
    item.input(show, [run, item], shown, api_visibility="private")
    return run, filters, refresh, [items, item, *shown]


def app(results_dir: Path) -> gr.Blocks:
    """A small app with the Runs tab alone: `python -m eval view DIR`."""
    with gr.Blocks(title="DiningBench runs") as demo:
        gr.Markdown(f"# DiningBench runs in `{Path(results_dir)}`")
        _, filters, refresh, outputs = build(Path(results_dir))
        demo.load(refresh, filters, outputs, api_visibility="private")
    return demo
