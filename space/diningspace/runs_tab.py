"""The Runs tab (and `python -m eval view DIR`): a run's items with filters, and one item whole.

The data comes from `eval.report.items`; this module only lays it out. Everything shown is the run
folder's own content (answers, prompts, references), in text components that never render HTML;
the one Markdown line is made of `as_text` pieces. Run folders are named relative to the results
folder, and any other absolute path in a message keeps only its last part: a visitor never learns
where the operator keeps things. A malformed line of scores.jsonl or predictions.jsonl is left out
and named (`scores.jsonl:N`); the rest is shown.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import gradio as gr
from PIL import Image

from diningbench import CUISINES
from eval.report.items import STATUSES, item_detail, run_items
from eval.report.runs import ReportError
from eval.report.tables import as_text, pct
from eval.types import TASKS

MAX_PROBLEMS_SHOWN = 5
# An absolute path (not the path of a URL, which follows `:` or `/`): its folders are hidden.
_ABSOLUTE = re.compile(r"(?<![\w.:/~])(?:[A-Za-z]:)?[/\\](?:[^\s/\\'\"`:]+[/\\])+(?=[^\s/\\'\"`:]+)")

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


def hide_paths(text: str, root: Path | None = None) -> str:
    """`text` with the results folder left out of paths under it, and the folders of any other
    absolute path replaced by `…/`.

    >>> hide_paths("/srv/op/results/run-1: no scores.jsonl; cannot load /home/op/data/rel at http://h/x",
    ...            Path("/srv/op/results"))
    'run-1: no scores.jsonl; cannot load …/rel at http://h/x'
    """
    if root is not None:
        for shown in {str(root.absolute()), str(root.resolve()), str(root)}:
            if shown not in (".", ""):
                text = text.replace(shown + "/", "").replace(shown, ".")
    return _ABSOLUTE.sub("…/", text)


def _problems_line(problems: list[str]) -> str:
    if not problems:
        return ""
    shown = "; ".join(problems[:MAX_PROBLEMS_SHOWN])
    more = f" (and {len(problems) - MAX_PROBLEMS_SHOWN} more)" if len(problems) > MAX_PROBLEMS_SHOWN else ""
    return f"left out: {shown}{more}"


def table(run_dir: str | None, task: str, status: str, cuisine: str, problems: list[str] | None = None
          ) -> tuple[list[list[str]], list[str]]:
    """The filtered items as table rows, and their `task/id` keys for the item picker; with
    `problems`, malformed lines are left out and named there rather than stopping the listing."""
    if not run_dir:
        return [], []
    items = run_items(run_dir, task=None if task == ALL else task, status=None if status == ALL else status,
                      cuisine=None if cuisine == ALL else cuisine, problems=problems)
    rows = [[r["task"], str(r["id"]), r["status"], str(r.get("cuisine") or ""), _short(r.get("parsed")),
             _short(r.get("reference")), _score(r)] for r in items]
    return rows, [f"{r['task']}/{r['id']}" for r in items]


def detail(run_dir: str | None, key: str | None, root: Path | None = None, listed: list[str] | None = None
           ) -> tuple[list[Any], str, str, Any, Any, Any, str, str]:
    """Gallery, prompt, raw answer, parsed, reference, score, judge reply and a note for one item.

    The note is Markdown whose every piece from the run folder is text (`as_text`); `listed` are
    problems already found while listing, shown with the ones found here."""
    problems = list(listed or [])
    if not run_dir or not key or "/" not in key:
        note = _problems_line(problems)
        return [], "", "", None, None, None, "", as_text(hide_paths(note, root)) if note else ""
    task, item_id = key.split("/", 1)
    try:
        found = item_detail(run_dir, task, item_id, problems=problems)
    except ReportError as exc:
        lines = [str(exc), _problems_line(problems)]
        return [], "", "", None, None, None, "", "  \n".join(as_text(hide_paths(x, root)) for x in lines if x)
    gallery = []
    for i, view in enumerate(found.views):
        try:
            gallery.append((Image.open(io.BytesIO(view.data)), f"view {i + 1}: {view.role}"))
        except (OSError, ValueError, Image.DecompressionBombError):
            problems.append(f"view {i + 1} cannot be decoded")
    lines = [f"**{as_text(found.task)} {as_text(found.id)}**: {as_text(found.status)}"]
    if found.finish_reason:
        lines.append(f"finish reason: {as_text(found.finish_reason)}")
    if found.error:
        lines.append(f"error: {as_text(hide_paths(str(found.error), root))}")
    lines.append("prompt verified against the request hash" if found.prompt_verified
                 else as_text(hide_paths(found.note or "", root)))
    lines.append(as_text(hide_paths(_problems_line(sorted(set(problems), key=problems.index)), root)))
    return (gallery, found.prompt, _text(found.raw), _json(found.parsed), _json(found.reference), found.score,
            _text(found.judge_reply), "  \n".join(line for line in lines if line))


def _text(value: Any) -> str:
    """A text box's value: a string whatever the file held."""
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _json(value: Any) -> Any:
    """gr.JSON reads a string as JSON text: a letter or an answer must go in quoted."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else value


def build(results_dir: Path) -> tuple[Any, list[Any], Any, list[Any]]:
    """The tab's components, inside the current Blocks; returns what a page load should refresh.

    The run picker offers folders by their path relative to `results_dir`; only those map to a folder."""
    root = Path(results_dir)
    found = run_folders(root)
    by_name = {(p.relative_to(root).as_posix() if p != root else root.name or "."): p for p in found}
    folders = list(by_name)
    gr.Markdown("A run's items one by one: filter, pick one, and see its views, the exact prompt sent, the raw "
                "answer, what was parsed, the reference and the score.")
    with gr.Row():
        run = gr.Dropdown(folders, value=folders[0] if folders else None, label="Run folder", scale=3)
        task = gr.Dropdown([ALL, *TASKS], value=ALL, label="Task")
        status = gr.Dropdown([ALL, *STATUSES], value=ALL, label="Status")
        cuisine = gr.Dropdown([ALL, *CUISINES], value=ALL, label="Cuisine")
    items = gr.Dataframe(headers=COLUMNS, interactive=False, wrap=True, elem_classes=["db-scroll"])
    item = gr.Dropdown([], label="Item", allow_custom_value=False)
    summary = gr.Markdown()
    gallery = gr.Gallery(label="Views as sent", columns=4, height="auto")
    prompt = gr.Textbox(label="Prompt sent", lines=6, max_lines=20)
    raw = gr.Textbox(label="Raw answer", lines=6, max_lines=30)
    with gr.Row():
        parsed, reference, score = gr.JSON(label="Parsed"), gr.JSON(label="Reference"), gr.JSON(label="Score")
    judge = gr.Textbox(label="Judge's reply (VQA)", lines=3, max_lines=12)

    def listed(name: str | None) -> str | None:
        # Only the folders listed above: a client-sent path must never make the page read elsewhere.
        if name is None:
            return None
        if name not in by_name:
            raise gr.Error("unknown run folder", print_exception=False)
        return str(by_name[name])

    shown = [gallery, prompt, raw, parsed, reference, score, judge, summary]

    def refresh(name: str | None, task_name: str, status_name: str, cuisine_name: str):
        # The first item's detail comes with the list: no second event to wait for.
        run_dir, problems = listed(name), []
        try:
            rows, keys = table(run_dir, task_name, status_name, cuisine_name, problems)
        except ReportError as exc:  # no usable scores.jsonl at all: say so, keep the page
            rows, keys = [], []
            problems.insert(0, str(exc))
        first = keys[0] if keys else None
        return (rows, gr.update(choices=keys, value=first), *detail(run_dir, first, root, problems))

    def show(name: str | None, key: str | None):
        return detail(listed(name), key, root)

    filters = [run, task, status, cuisine]
    for component in filters:
        component.input(refresh, filters, [items, item, *shown], api_visibility="private")
    item.input(show, [run, item], shown, api_visibility="private")
    return run, filters, refresh, [items, item, *shown]


def app(results_dir: Path) -> gr.Blocks:
    """A small app with the Runs tab alone: `python -m eval view DIR`."""
    with gr.Blocks(title="DiningBench runs") as demo:
        gr.Markdown(f"# DiningBench runs in {as_text(Path(results_dir).name or results_dir)}")
        _, filters, refresh, outputs = build(Path(results_dir))
        demo.load(refresh, filters, outputs, api_visibility="private")
    return demo
