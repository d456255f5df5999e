"""The run viewer: `python -m eval view DIR`, and the Space's Runs tab. A run's summary, its items
with filters and a search, and one item whole; a click on a row opens it, Previous / Next step
through the list. It sits with the reports, below both the CLI and the Space, which import it;
gradio is imported by whoever imports this module (the CLI only for `eval view`).

The list of run folders is read again on every page load and on Refresh (folder names only, no
file is parsed). The run, the filters, the search and the open item are kept in the page's
address (`?tab=runs&run=NAME&task=…&status=…&cuisine=…&q=…&item=TASK/ID`), so a link opens the
same view; NAME is the run folder relative to the results folder.

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
from eval.report.items import STATUSES, item_detail, run_items, run_summary
from eval.report.runs import ReportError, run_folders
from eval.report.tables import as_text, pct
from eval.tasks import figure_of
from eval.tasks import names as task_names

MAX_PROBLEMS_SHOWN = 5
# An absolute path (not the path of a URL, which follows `:` or `/`): its folders are hidden.
_ABSOLUTE = re.compile(r"(?<![\w.:/~])(?:[A-Za-z]:)?[/\\](?:[^\s/\\'\"`:]+[/\\])+(?=[^\s/\\'\"`:]+)")

ALL = "all"
NO_RUNS = ("No run folder here yet. A run appears once scored: `python -m eval run --task classification "
           "--model baseline:random --out results/NAME`, then **↻ Refresh list**.")
COLUMNS = ["task", "id", "status", "cuisine", "parsed", "reference", "score"]
TASK_CHOICES = [ALL, *task_names()]
CUISINE_CHOICES = [ALL, *CUISINES]
# The address keeps the view: each filter's query parameter, in the order of the handlers' inputs.
QUERY = ("run", "task", "status", "cuisine", "q", "item")
URL_JS = """(run, task, status, cuisine, q, item) => {
  const url = new URL(window.location.href);
  const values = {tab: "runs", run, task, status, cuisine, q, item};
  for (const [name, value] of Object.entries(values)) {
    if (value && value !== "all") url.searchParams.set(name, value); else url.searchParams.delete(name);
  }
  window.history.replaceState(window.history.state, "", url);
}"""


def _short(value: Any, width: int = 60) -> str:
    text = "" if value is None else str(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _score(row: dict[str, Any]) -> str:
    if figure_of(row.get("task")) == "avg_mape" and isinstance(row.get("ape"), dict):
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


def table(run_dir: str | None, task: str, status: str, cuisine: str, problems: list[str] | None = None,
          search: str = "") -> tuple[list[list[str]], list[str]]:
    """The filtered items as table rows, and their `task/id` keys; with `problems`, malformed lines
    are left out and named there rather than stopping the listing."""
    if not run_dir:
        return [], []
    items = run_items(run_dir, task=None if task == ALL else task, status=None if status == ALL else status,
                      cuisine=None if cuisine == ALL else cuisine, search=search or None, problems=problems)
    rows = [[r["task"], str(r["id"]), r["status"], str(r.get("cuisine") or ""), _short(r.get("parsed")),
             _short(r.get("reference")), _score(r)] for r in items]
    return rows, [f"{r['task']}/{r['id']}" for r in items]


def summary(run_dir: str | None, root: Path | None = None, problems: list[str] | None = None) -> str:
    """The run at a glance as Markdown (every piece from the folder is text): model and settings,
    then per task the items, the headline figure and the counts by status."""
    if not run_dir:
        return ""
    try:
        found = run_summary(run_dir, problems)
    except ReportError:
        return ""  # the listing says why
    settings = " · ".join(as_text(hide_paths(f"{k} {v}" if v is not True else k, root))
                          for k, v in found["settings"].items())
    lines = [f"**{as_text(found['model'])}**" + (f" · {settings}" if settings else "")]
    for task, figures in found["tasks"].items():
        value = figures["headline"]
        figure = ("Average MAPE " if figure_of(task) == "avg_mape" else "accuracy ") + (f"{pct(value)}%" if value is not None
                                                                              else "–")
        counts = ", ".join(f"{n} {name}" for name, n in figures["counts"].items())
        lines.append(f"{as_text(task)}: {figures['n']} items, {figure} ({as_text(counts)})")
    return "  \n".join(lines)


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


def folder_names(root: Path) -> dict[str, Path]:
    """The run folders under `root` by the name the page shows: their path relative to `root`."""
    root = Path(root)
    return {(p.relative_to(root).as_posix() if p != root else root.name or "."): p for p in run_folders(root)}


class RunsView:
    """The tab's handlers over the run folders under `root`; `build` lays the tab out."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def listed(self, name: str | None) -> str | None:
        # Only folders the listing finds: a client-sent path must never make the page read elsewhere.
        if not name:
            return None
        found = folder_names(self.root).get(name)
        if found is None:
            raise gr.Error("unknown run folder", print_exception=False)
        return str(found)

    def _item(self, run_dir: str | None, keys: list[str], key: str | None, problems: list[str] | None = None
              ) -> tuple[Any, ...]:
        """The open item: its key, `Item i of n`, then its panels (each shown only when it has something)."""
        gallery, prompt, raw, parsed, reference, score, judge, note = detail(run_dir, key, self.root, problems)
        where = f"Item {keys.index(key) + 1} of {len(keys)}" if key in keys else ("No item matches." if run_dir
                                                                                  else "")
        has_item = bool(prompt or raw or parsed is not None or reference is not None)
        return (key, where, gr.update(value=gallery, visible=bool(gallery)), gr.update(value=prompt, visible=bool(prompt)),
                gr.update(value=raw, visible=has_item), gr.update(value=parsed, visible=has_item),
                gr.update(value=reference, visible=has_item), gr.update(value=score, visible=bool(score)),
                gr.update(value=judge, visible=bool(judge)), note)

    def refresh(self, name: str | None, task: str, status: str, cuisine: str, search: str = "",
                key: str | None = None) -> tuple[Any, ...]:
        """Summary, list and the open item (`key` when it is listed, else the first) in one event."""
        run_dir = self.listed(name)
        problems: list[str] = []
        try:
            rows, keys = table(run_dir, task, status, cuisine, problems, search)
        except ReportError as exc:  # no usable scores.jsonl at all: say so, keep the page
            rows, keys = [], []
            problems.insert(0, str(exc))
        head = summary(run_dir, self.root) if run_dir else NO_RUNS
        current = key if key in keys else (keys[0] if keys else None)
        return (head, rows, keys, *self._item(run_dir, keys, current, problems))

    def open_row(self, name: str | None, keys: list[str], event: gr.SelectData) -> tuple[Any, ...]:
        """A click on a table row opens that item (the row's own task and id, whatever the sorting)."""
        row = event.row_value if isinstance(getattr(event, "row_value", None), list) else None
        key: str | None
        if row and len(row) >= 2:
            key = f"{row[0]}/{row[1]}"
        else:
            index = event.index[0] if isinstance(event.index, list | tuple) else event.index
            key = keys[index] if isinstance(index, int) and 0 <= index < len(keys) else None
        return self._item(self.listed(name), keys or [], key if key in (keys or []) else None)

    def step(self, delta: int, name: str | None, keys: list[str], key: str | None) -> tuple[Any, ...]:
        """Previous / next item of the list (staying at its ends)."""
        keys = keys or []
        if not keys:
            return self._item(self.listed(name), keys, None)
        at = keys.index(key) if key in keys else -1 if delta > 0 else len(keys)
        return self._item(self.listed(name), keys, keys[min(max(at + delta, 0), len(keys) - 1)])

    def reload(self, name: str | None) -> Any:
        """The run picker with the folders there are now (the chosen one kept when it still exists)."""
        names = list(folder_names(self.root))
        return gr.update(choices=names, value=name if name in names else (names[0] if names else None))

    def load(self, request: gr.Request = None) -> tuple[Any, ...]:  # type: ignore[assignment]
        """A page load: the folders there are now and the view the address names (`?run=…&item=…`)."""
        params = dict(getattr(request, "query_params", None) or {})
        value = {name: str(params.get(name) or "")[:300] for name in QUERY}
        names = list(folder_names(self.root))
        unknown = bool(value["run"]) and value["run"] not in names
        # A link to a run that is not here opens none (never another run in its place) and says so.
        run = value["run"] if value["run"] in names else (None if unknown else (names[0] if names else None))
        task = value["task"] if value["task"] in TASK_CHOICES else ALL
        status = value["status"] if value["status"] in (ALL, *STATUSES) else ALL
        cuisine = value["cuisine"] if value["cuisine"] in CUISINE_CHOICES else ALL
        shown = self.refresh(run, task, status, cuisine, value["q"], value["item"] or None)
        if unknown:
            shown = (f"No run folder named {as_text(value['run'][:80])} here: choose one from the list.", *shown[1:])
        return (gr.update(choices=names, value=run), task, status, cuisine, value["q"], *shown)

    def build(self) -> tuple[Any, list[Any], list[Any]]:
        """The tab's components, inside the current Blocks; returns what a page load refreshes:
        (handler, inputs, outputs)."""
        gr.Markdown("A run's items one by one: filter or search, click a row, and see its views, the exact prompt "
                    "sent, the raw answer, what was parsed, the reference and the score. The address bar keeps "
                    "what you chose: copy it to share this view.")
        with gr.Row(equal_height=True):
            run = gr.Dropdown([], label="Run folder", scale=4, elem_id="db-runs-run")
            reload = gr.Button("↻ Refresh list", size="sm", scale=1, min_width=120, elem_id="db-runs-reload")
        head = gr.Markdown(elem_id="db-runs-summary", elem_classes="db-note")
        with gr.Row():
            task = gr.Dropdown(TASK_CHOICES, value=ALL, label="Task", min_width=140)
            status = gr.Dropdown([ALL, *STATUSES], value=ALL, label="Status", min_width=140)
            cuisine = gr.Dropdown(CUISINE_CHOICES, value=ALL, label="Cuisine", min_width=140)
            search = gr.Textbox(label="Search answers and prompts", placeholder="text, then Enter", min_width=200,
                                max_length=200, elem_id="db-runs-search")
        items = gr.Dataframe(headers=COLUMNS, interactive=False, wrap=True, max_height=360,
                             elem_classes=["db-scroll"], elem_id="db-runs-items")
        keys = gr.State([])
        # The open item's key, in the page (a State stays on the server): the address is written from it.
        current = gr.Textbox(visible="hidden", elem_id="db-runs-current")
        with gr.Row(elem_classes="db-nav"):
            prev_btn = gr.Button("← Previous", size="sm", min_width=80, elem_id="db-runs-prev")
            where = gr.Markdown("", elem_classes="db-where", elem_id="db-runs-where")
            next_btn = gr.Button("Next →", size="sm", min_width=80, elem_id="db-runs-next")
        note = gr.Markdown(elem_id="db-runs-note")
        gallery = gr.Gallery(label="Views as sent", columns=4, height="auto", object_fit="contain", fit_columns=False,
                             preview=False, allow_preview=True, elem_id="db-runs-gallery")
        prompt = gr.Textbox(label="Prompt sent", lines=6, max_lines=20, elem_id="db-runs-prompt")
        raw = gr.Textbox(label="Raw answer", lines=4, max_lines=30, elem_id="db-runs-raw")
        with gr.Row():
            parsed, reference = gr.JSON(label="Parsed", min_width=160), gr.JSON(label="Reference", min_width=160)
            score = gr.JSON(label="Score", min_width=160)
        judge = gr.Textbox(label="Judge's reply", lines=3, max_lines=12, visible=False, elem_id="db-runs-judge")

        item_out = [current, where, gallery, prompt, raw, parsed, reference, score, judge, note]
        listing = [head, items, keys, *item_out]
        filters = [run, task, status, cuisine, search]
        in_url = [run, task, status, cuisine, search, current]

        def keep(event: Any) -> None:
            event.then(None, in_url, None, js=URL_JS, api_visibility="private")

        for component in (run, task, status, cuisine):
            keep(component.input(self.refresh, filters, listing, api_visibility="private"))
        keep(search.submit(self.refresh, filters, listing, api_visibility="private"))
        keep(items.select(self.open_row, [run, keys], item_out, api_visibility="private"))
        keep(prev_btn.click(lambda *a: self.step(-1, *a), [run, keys, current], item_out, api_visibility="private"))
        keep(next_btn.click(lambda *a: self.step(1, *a), [run, keys, current], item_out, api_visibility="private"))
        reload.click(self.reload, run, run, api_visibility="private")
        return self.load, [], [run, task, status, cuisine, search, *listing]


def build(results_dir: Path) -> tuple[Any, list[Any], list[Any]]:
    """The Runs tab inside the current Blocks: (load handler, its inputs, its outputs)."""
    return RunsView(results_dir).build()


STYLE = Path(__file__).with_name("viewer.css")  # the viewer's own rules; the Space adds them to its own


def launch_options() -> dict[str, Any]:
    """What `eval view` passes to launch(): the viewer's CSS (views two by two on a phone, whole)."""
    return {"css": STYLE.read_text(encoding="utf-8")} if STYLE.is_file() else {}


def app(results_dir: Path) -> gr.Blocks:
    """A small app with the Runs tab alone: `python -m eval view DIR`."""
    with gr.Blocks(title="DiningBench runs") as demo:
        gr.Markdown(f"# DiningBench runs in {as_text(Path(results_dir).name or results_dir)}")
        load, inputs, outputs = build(Path(results_dir))
        demo.load(load, inputs, outputs, api_visibility="private")
    return demo
