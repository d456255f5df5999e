"""The run viewer: `python -m eval view DIR`, and the Space's Runs tab: a run's summary, its items with
filters and a search, and one item whole. Whoever imports it imports gradio (the CLI only for `eval view`)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any, cast

import gradio as gr

from diningbench import CUISINES, read_json_file
from eval.images import ImageError, decode_bounded
from eval.report import shown_views
from eval.report.items import (
    STATUSES,
    derived,
    item_detail,
    item_facts,
    note_problems,
    run_items,
    run_summary,
    status_matches,
)
from eval.report.runs import ReportError, file_signature, protocol_of, run_folders, task_named
from eval.report.tables import as_text, pct, readable
from eval.tasks import figure_of
from eval.tasks import names as task_names
from eval.types import RunInfo, TaskFigures

MAX_PROBLEMS_SHOWN = 5
SHOWN_SIDE = 2048  # views as sent are at most the run's max side (1,568 px by default): shown whole
# An absolute path (not the path of a URL, which follows `:` or `/`): its folders are hidden.
_ABSOLUTE = re.compile(r"(?<![\w.:/~])(?:[A-Za-z]:)?[/\\](?:[^\s/\\'\"`:]+[/\\])+(?=[^\s/\\'\"`:]+)")

ALL = "all"
NO_RUNS = ("No run folder here yet. A run appears once scored: `python -m eval run --task classification "
           "--model baseline:random --out results/NAME`, then **↻ Refresh list**.")
COLUMNS = ["task", "id", "status", "cuisine", "parsed", "reference", "score", "tokens", "latency s", "attempts",
           "finish"]
NUMERIC = {"tokens", "latency s", "attempts"}
LISTED = "list order"
SORTS = [LISTED, *COLUMNS]
PAGE_ROWS = 50
TASK_CHOICES = [ALL, *task_names()]
CUISINE_CHOICES = [ALL, *CUISINES]
# The address keeps the view: each filter's query parameter, in the order of the handlers' inputs.
QUERY = ("run", "task", "status", "cuisine", "q", "item", "sort", "desc")
URL_JS = """(run, task, status, cuisine, q, item, sort, desc) => {
  const url = new URL(window.location.href);
  const values = {tab: "runs", run, task, status, cuisine, q, item, sort: sort === "list order" ? "" : sort,
                  desc: desc ? "1" : ""};
  for (const [name, value] of Object.entries(values)) {
    if (value && value !== "all") url.searchParams.set(name, value); else url.searchParams.delete(name);
  }
  window.history.replaceState(window.history.state, "", url);
}"""


def _score(row: dict[str, Any]) -> str:
    """The item's score; where the run's protocol's figure leads, its reading first and ours beside
    (`wrong (the authors' protocol) · ours correct`)."""
    if row.get("protocol"):
        read = row.get("protocol_reading")
        theirs = _own_score({k: v for k, v in read.items() if k != "verdict"}) if isinstance(read, dict) else "not counted"
        return f"{theirs} ({row['protocol']}) · ours {_own_score(row)}"
    return _own_score(row)


def _own_score(row: dict[str, Any]) -> str:
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


def _sort_key(column: str, cell: str) -> tuple[int, Any]:
    """(kind, value): kind 0 a number or text to order by, 1 a score in words (after the numbers), 2 a blank."""
    if cell in ("", "–"):
        return (2, "")
    if column in NUMERIC:
        try:
            return (0, float(cell))
        except ValueError:
            return (2, "")
    if column == "score":  # `mean APE 12.50%` by its number, `correct` / `verdict …` as words after them
        found = re.search(r"-?\d+(?:\.\d+)?", cell) if cell.startswith("mean APE") else None
        return (0, float(found.group())) if found else (1, cell.casefold())
    return (0, cell.casefold())


def table(run_dir: str | None, task: str, status: str, cuisine: str, problems: list[str] | None = None,
          search: str = "", sort: str = LISTED, descending: bool = False) -> tuple[list[list[str]], list[str]]:
    """The filtered items as table rows (COLUMNS), sorted by `sort` (blanks last), and their `task/id` keys;
    with `problems`, malformed lines are left out and named there rather than stopping the listing."""
    if not run_dir:
        return [], []
    if problems is None:  # a caller that wants malformed lines to raise: read anew
        listed = _rows(run_dir, run_items(run_dir))
    else:
        note_problems(run_dir, problems)  # the lines left out, named (and the lines met, when none is usable)
        listed = derived(run_dir, "viewer.rows", lambda: _rows(run_dir, run_items(run_dir, problems=[])))
    found = None
    if search:
        found = {(r["task"], str(r["id"])) for r in run_items(run_dir, task=None if task == ALL else task,
                                                             search=search, problems=problems)}
    rows = [row for row in listed
            if (task == ALL or row[0] == task) and (cuisine == ALL or row[3] == cuisine)
            and (status == ALL or status_matches(status, row[2]))
            and (found is None or (row[0], row[1]) in found)]
    if sort in COLUMNS:
        at = COLUMNS.index(sort)
        keyed = [(_sort_key(sort, row[at]), row) for row in rows]
        # Each kind in the chosen direction, numbers before words, blanks last either way.
        rows = [row for kind in (0, 1, 2) for _, row in sorted(
            (pair for pair in keyed if pair[0][0] == kind), key=lambda pair: pair[0][1], reverse=descending and kind < 2)]
    return rows, [f"{row[0]}/{row[1]}" for row in rows]


def _rows(run_dir: str, items: list[dict[str, Any]]) -> list[list[str]]:
    """Every scored item as a table row (COLUMNS), in the run's order."""
    facts = item_facts(run_dir, problems=[])  # predictions.jsonl's own problems are named by the item panel
    rows = []
    for r in items:
        fact = facts.get((r["task"], str(r["id"]), r.get("epoch") or 0), {})
        latency, attempts, tokens = fact.get("latency_s"), fact.get("attempts"), fact.get("tokens")
        if tokens is None and isinstance(r.get("usage"), dict):
            tokens = r["usage"].get("completion_tokens")
        rows.append([r["task"], str(r["id"]), r["status"], str(r.get("cuisine") or ""), readable(r.get("parsed"), 60),
                     readable(r.get("reference"), 60), _score(r), "" if tokens is None else str(tokens),
                     "" if not isinstance(latency, int | float) else f"{latency:.2f}",
                     "" if attempts is None else str(attempts), str(r.get("finish_reason") or "")])
    return rows


# A click on a header sorts the whole list by it (again: reverse), a click on a row (or Enter on it) opens it.
TABLE_JS = """
const send = (e) => {
  const head = e.target.closest('th[data-sort]');
  if (head) { trigger('click', {sort: head.dataset.sort}); return; }
  const row = e.target.closest('tr[data-key]');
  if (!row) return;
  element.querySelectorAll('tr.db-open').forEach((r) => r.classList.remove('db-open'));
  row.classList.add('db-open');
  trigger('click', {key: row.dataset.key});
};
element.addEventListener('click', send);
element.addEventListener('keydown', (e) => { if (e.key === 'Enter') send(e); });
"""


def rows_html(rows: list[list[str]], key: str | None = None, sort: str = LISTED, descending: bool = False) -> str:
    """One page of rows as a table: every cell escaped text; the open item's row marked; each header a sort
    button (its direction shown on the column the list is sorted by)."""
    if not rows:
        return "<div class='db-empty'>No item matches.</div>"
    heads = []
    for column in COLUMNS:
        arrow = f" <span class='db-arrow'>{'▼' if descending else '▲'}</span>" if column == sort else ""
        sorted_by = f" aria-sort='{'descending' if descending else 'ascending'}'" if column == sort else ""
        css = " class='db-num'" if column in NUMERIC else ""
        heads.append(f"<th{css} data-sort='{html.escape(column, quote=True)}' tabindex='0' role='button'{sorted_by} "
                     f"title='sort the whole list by {html.escape(column, quote=True)} (again: reverse)'>"
                     f"{html.escape(column)}{arrow}</th>")
    body = []
    for row in rows:
        row_key = f"{row[0]}/{row[1]}"
        mark = " class='db-open' aria-current='true'" if row_key == key else ""
        cells = "".join(f"<td{' class=db-num' if column in NUMERIC else ''}>{html.escape(cell)}</td>"
                        for column, cell in zip(COLUMNS, row, strict=True))
        body.append(f"<tr data-key='{html.escape(row_key, quote=True)}' tabindex='0'{mark}>{cells}</tr>")
    return (f"<div class='db-scroll db-runs-scroll'><table class='db-runs-table'><thead><tr>{''.join(heads)}</tr>"
            f"</thead><tbody>{''.join(body)}</tbody></table></div>")


def page_of(keys: list[str], key: str | None) -> int:
    """The page (from 0) that holds `key`, 0 when it is not listed."""
    return keys.index(key) // PAGE_ROWS if key in keys else 0


def pager_text(page: int, total: int) -> str:
    if not total:
        return "No item matches."
    first = page * PAGE_ROWS
    return f"Rows {first + 1}–{min(first + PAGE_ROWS, total)} of {total:,}"


def summary(run_dir: str | None, root: Path | None = None, problems: list[str] | None = None) -> str:
    """The run at a glance as Markdown (every piece from the folder is text): model and settings,
    then per task the items, the headline figure and the counts by status."""
    if not run_dir:
        return ""
    try:
        found = run_summary(run_dir, [] if problems is None else problems)
    except ReportError:
        return ""  # the listing says why
    settings = " · ".join(as_text(hide_paths(f"{k} {v}" if v is not True else k, root))
                          for k, v in found["settings"].items())
    lines = [f"**{as_text(found['model'])}**" + (f" · {settings}" if settings else "")
             + (f" · {as_text(found['asked'])}" if found.get("asked") else "")]
    for task, figures in found["tasks"].items():
        value = figures["headline"]
        figure = ("Average MAPE " if figure_of(task) == "avg_mape" else "accuracy ") + (
            f"{pct(value)}%" if value is not None else "–")
        counts = ", ".join(f"{n} {name}" for name, n in figures["counts"].items())
        if figures.get("protocol"):
            lines.append(f"{as_text(task)}: {_protocol_figure(figures['protocol'])} (ours: {figures['n']} items, "
                         f"{figure}; {figures['protocol']['differ']} read differently; {as_text(counts)})")
            continue
        lines.append(f"{as_text(task)}: {figures['n']} items, {figure} ({as_text(counts)})")
    return "  \n".join(lines)


def _protocol_figure(led: dict[str, Any]) -> str:
    """`the authors' protocol acc 50.00% [25.00, 75.21] (95% CI resampling items) on 12 items, release
    fingerprint 927ffe12808bd631`."""
    text = f"{led['title']} {led['name']} " + (f"{pct(led['value'])}%" if led.get("value") is not None else "–")
    if interval := led.get("interval"):
        text += f" [{pct(interval[0])}, {pct(interval[1])}] (95% CI resampling {led.get('resampled') or 'items'})"
    if led.get("items") is not None:
        text += f" on {led['items']} items"
    if led.get("revision"):
        text += f", release revision {str(led['revision'])[:12]}"
    elif led.get("fingerprint"):
        text += f", release fingerprint {str(led['fingerprint'])[:16]}"
    return as_text(text)


def detail(run_dir: str | None, key: str | None, root: Path | None = None, listed: list[str] | None = None
           ) -> tuple[list[Any], str, str, Any, Any, Any, str, str]:
    """The views (each a (file, caption) pair), prompt, raw answer, parsed, reference, score, judge reply and
    a note for one item. The note is Markdown whose every piece from the run folder is text (`as_text`);
    `listed` are problems already found while listing, shown with the ones found here."""
    problems = list(listed or [])
    if not run_dir or not key or "/" not in key:
        return _note_only(root, _problems_line(problems))
    task, item_id = key.split("/", 1)
    try:
        found = item_detail(run_dir, task, item_id, problems=problems)
    except ReportError as exc:
        return _note_only(root, str(exc), _problems_line(problems))
    views = []
    for i, view in enumerate(found.views):
        try:
            views.append((_view_file(view.data, found.id, i), f"view {i + 1}: {view.role}"))
        except (ImageError, OSError, ValueError):
            problems.append(f"view {i + 1} cannot be decoded")
    lines = [f"**{as_text(found.task)} {as_text(found.id)}**: {as_text(found.status)}"]
    if found.finish_reason:
        lines.append(f"finish reason: {as_text(found.finish_reason)}")
    if found.error:
        lines.append(f"error: {as_text(hide_paths(str(found.error), root))}")
    lines.append("prompt verified against the request hash" if found.prompt_verified
                 else as_text(hide_paths(found.note or "", root)))
    lines.append(as_text(hide_paths(_problems_line(sorted(set(problems), key=problems.index)), root)))
    return (views, found.prompt, _text(found.raw), found.parsed, found.reference, found.score,
            _text(found.judge_reply), "  \n".join(line for line in lines if line))


def _note_only(root: Path | None, *lines: str) -> tuple[list[Any], str, str, Any, Any, Any, str, str]:
    """`detail` with no item: the note alone, its lines as text with paths hidden."""
    return [], "", "", None, None, None, "", "  \n".join(as_text(hide_paths(x, root)) for x in lines if x)


def _view_file(data: bytes, item_id: str, index: int) -> str:
    """A view as a JPEG file to show, decoded (its pixel count checked first) and written once while it is
    among the views shown lately: the next visitor's event only links it."""
    return shown_views.shared().path(data, SHOWN_SIDE, lambda: decode_bounded(
        bytes(data), item_id=item_id, index=index, max_side=SHOWN_SIDE))


def _text(value: Any) -> str:
    """A text box's value: a string whatever the file held."""
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _pretty(value: Any) -> str:
    """A value as indented JSON text (a letter or an answer quoted, as JSON writes a string); `–` for none."""
    return "–" if value is None else json.dumps(value, ensure_ascii=False, indent=2, default=str)


def facts_html(parsed: Any, reference: Any, score: Any) -> str:
    """Parsed, reference and score side by side, each as JSON text: every character from the run folder is
    escaped (`as_text`), so an answer is shown, never rendered."""
    cells = "".join(f"<div class='db-fact'><div class='db-fact-label'>{label}</div>"
                    f"<pre>{as_text(_pretty(value)[:20_000], lines=True)}</pre></div>"
                    for label, value in (("Parsed", parsed), ("Reference", reference), ("Score", score)))
    return f"<div class='db-facts'>{cells}</div>"


MAX_TEXT_SHOWN = 100_000  # characters of a prompt, raw answer or judge's reply drawn in the page


def _text_block(element_id: str, label: str, text: str) -> str:
    """A labelled block of text from the run folder, shown as it is (escaped, line breaks kept)."""
    more = (f"<div class='db-fact-label'>(the first {MAX_TEXT_SHOWN:,} of {len(text):,} characters)</div>"
            if len(text) > MAX_TEXT_SHOWN else "")
    # A region named by its label (read out, and found, as "Prompt sent"); its text scrolls, so it takes focus.
    return (f"<section id='{element_id}' class='db-text' aria-label='{label}'><div class='db-fact-label' "
            f"aria-hidden='true'>{label}</div><pre tabindex='0'>{as_text(text[:MAX_TEXT_SHOWN], lines=True) or '–'}"
            f"</pre>{more}</section>")


def html_lines(text: str) -> str:
    """The viewer's own Markdown lines (bold, code, `  \n` breaks), every piece from a run folder already
    escaped by `as_text`, as HTML: the tab's notes are drawn by gr.HTML, which renders no Markdown."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return "<br>".join(text.split("  \n"))


def item_html(views: list[tuple[str, str]], prompt: str, raw: str, parsed: Any, reference: Any, score: Any,
              judge: str, note: str) -> str:
    """One item as one block: the note, the views as sent, the prompt, the raw answer, parsed / reference /
    score, and the judge's reply, each only when there is something to show. One component to update per
    item keeps opening one cheap for the page (a text box or a Markdown block each cost it more)."""
    has_item = bool(prompt or raw or parsed is not None or reference is not None)
    parts = [f"<div id='db-runs-note'>{html_lines(note)}</div>"] if note else []
    if views:
        parts.append(f"<div id='db-runs-gallery'>{shown_views.strip_html(views, 'Views as sent')}</div>")
    if prompt:
        parts.append(_text_block("db-runs-prompt", "Prompt sent", prompt))
    if has_item:
        parts.append(_text_block("db-runs-raw", "Raw answer", raw))
        parts.append(f"<div id='db-runs-facts'>{facts_html(parsed, reference, score)}</div>")
    if judge:
        parts.append(_text_block("db-runs-judge", "Judge's reply", judge))
    return "".join(parts)


def folder_names(root: Path) -> dict[str, Path]:
    """The run folders under `root` by the name the page shows: their path relative to `root`."""
    root = Path(root)
    return {(p.relative_to(root).as_posix() if p != root else root.name or "."): p for p in run_folders(root)}


_LABELS: dict[str, tuple[Any, str]] = {}  # folder -> (run.json and metrics.json stat, label)
MAX_LABELS = 4096


def run_label(name: str, folder: Path) -> str:
    """`NAME · model · classification 45.00 · nutrition MAPE 38.20 · 80 items · 2026-12-02`: a run as the
    picker lists it, from run.json and metrics.json (read through the bounded reader; a file that cannot
    be read leaves its part out). Kept until either file changes."""
    signature = file_signature(folder / "run.json", folder / "metrics.json")
    cached = _LABELS.get(str(folder))
    if cached is not None and cached[0] == signature:
        return cached[1]

    def read(file: str) -> dict[str, Any]:
        try:
            found = read_json_file(folder / file) if signature[file == "metrics.json"] else {}
        except ValueError:
            found = {}
        return found if isinstance(found, dict) else {}

    info, metrics = cast(RunInfo, read("run.json")), read("metrics.json")
    parts = [name]
    model = info.get("model")
    if isinstance(model, str) and model:
        parts.append(readable(model, 60))
    items = 0
    protocol = protocol_of(info)
    for task, figures in metrics.items():
        if not isinstance(figures, dict) or not isinstance(task, str):
            continue
        # An entry as metrics.json holds it, not checked: the protocol checks each value it reads.
        known = task_named(task)
        led = protocol.headline(known, cast(TaskFigures, figures)) if known is not None else None
        if led is not None:  # the run's protocol's figure, named as its scoring names it
            what, value = f" {protocol.name} {readable(led[0], 30)}", led[1]
        else:
            key = figure_of(task) or "accuracy"
            what, value = " MAPE" if key == "avg_mape" else "", figures.get(key)
        shown = pct(value) if isinstance(value, int | float) and not isinstance(value, bool) else "–"
        parts.append(f"{readable(task, 30)}{what} {shown}")
        n = figures.get("n")
        items += n if isinstance(n, int) and not isinstance(n, bool) else 0
    if items:
        parts.append(f"{items:,} items")
    when = info.get("updated_at")
    if isinstance(when, str) and re.match(r"\d{4}-\d{2}-\d{2}", when):
        parts.append(when[:10])
    label = " · ".join(parts)
    if len(_LABELS) >= MAX_LABELS:
        _LABELS.clear()
    _LABELS[str(folder)] = (signature, label)
    return label


def run_choices(root: Path) -> list[tuple[str, str]]:
    """(label, name) of every run folder, newest first (by run.json's date, then name)."""
    found = [(run_label(name, folder), name) for name, folder in folder_names(root).items()]
    return sorted(sorted(found, key=lambda pair: pair[1]), key=lambda pair: _date_of(pair[0]), reverse=True)


def _date_of(label: str) -> str:
    found = re.search(r"· (\d{4}-\d{2}-\d{2})$", label)
    return found.group(1) if found else ""


class RunsView:
    """The tab's handlers over the run folders under `root`; `build` lays the tab out. Items are paged
    (PAGE_ROWS) and sorted on the server, so a run of thousands of items costs the page one page of rows."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def listed(self, name: str | None) -> str | None:
        # Only folders the listing finds: a client-sent path must never make the page read elsewhere.
        if not name:
            return None
        if (found := folder_names(self.root).get(name)) is None:
            raise gr.Error("unknown run folder", print_exception=False)
        return str(found)

    def _item(self, run_dir: str | None, keys: list[str], key: str | None, problems: list[str] | None = None
              ) -> tuple[Any, ...]:
        """The open item: its key, `Item i of n`, then its panel (`item_html`)."""
        views, prompt, raw, parsed, reference, score, judge, note = detail(run_dir, key, self.root, problems)
        where = f"Item {keys.index(key) + 1:,} of {len(keys):,}" if key in keys else ("No item matches." if run_dir
                                                                                      else "")
        return (key, where, item_html(views, prompt, raw, parsed, reference, score, judge, note))

    def _listing(self, run_dir: str | None, task: str, status: str, cuisine: str, search: str, sort: str,
                 descending: bool, problems: list[str] | None = None) -> tuple[list[list[str]], list[str]]:
        """`table`'s rows and keys; none when there is no usable scores.jsonl at all (why, first in `problems`)."""
        problems = [] if problems is None else problems
        try:
            return table(run_dir, task, status, cuisine, problems, search, sort if sort in SORTS else LISTED,
                         bool(descending))
        except ReportError as exc:  # say so, keep the page
            problems.insert(0, str(exc))
            return [], []

    @staticmethod
    def _page(rows: list[list[str]], page: int, key: str | None = None, sort: str = LISTED, descending: bool = False
              ) -> tuple[Any, int, str]:
        """(the table of page `page` as HTML, the page, `Rows 51–100 of 5,338`)."""
        last = max(0, (len(rows) - 1) // PAGE_ROWS)
        page = min(max(int(page or 0), 0), last)
        return (rows_html(rows[page * PAGE_ROWS:(page + 1) * PAGE_ROWS], key, sort, descending), page,
                pager_text(page, len(rows)))

    def refresh(self, name: str | None, task: str, status: str, cuisine: str, search: str = "",
                key: str | None = None, sort: str = LISTED, descending: bool = False) -> tuple[Any, ...]:
        """Summary, the page of rows holding the open item (`key` when it is listed, else the first), the
        pager and the item, in one event."""
        run_dir = self.listed(name)
        problems: list[str] = []
        rows, keys = self._listing(run_dir, task, status, cuisine, search, sort, descending, problems)
        head = html_lines(summary(run_dir, self.root) if run_dir else NO_RUNS)
        current = key if key in keys else (keys[0] if keys else None)
        shown, page, pager = self._page(rows, page_of(keys, current), current, sort, descending)
        return (head, shown, keys, page, pager, *self._item(run_dir, keys, current, problems))

    def turn(self, delta: int, name: str | None, task: str, status: str, cuisine: str, search: str, sort: str,
             descending: bool, page: int, key: str | None = None) -> tuple[Any, ...]:
        """Earlier or later rows of the list (the open item stays open)."""
        rows, _ = self._listing(self.listed(name), task, status, cuisine, search, sort, descending)
        return self._page(rows, int(page or 0) + delta, key, sort, descending)

    def clicked(self, event: Any, name: str | None, task: str, status: str, cuisine: str, search: str, sort: str,
                descending: bool, keys: list[str], key: str | None) -> tuple[Any, ...]:
        """A click in the table: on a header, the whole list sorted by it (a second click reverses), the open
        item kept; on a row, that item opened. Returns (sort, descending, table, keys, page, pager, *item)."""
        data = getattr(event, "_data", None) or {}
        column, chosen = str(data.get("sort") or "")[:40], str(data.get("key") or "")[:400]
        keys = keys or []
        if column in COLUMNS:
            descending = not descending if column == sort else False
            run_dir = self.listed(name)
            rows, keys = self._listing(run_dir, task, status, cuisine, search, column, descending)
            table_now, page, pager = self._page(rows, page_of(keys, key), key, column, descending)
            return (column, descending, table_now, keys, page, pager, *self._item(run_dir, keys, key))
        if chosen in keys:
            return (gr.skip(),) * 6 + self._item(self.listed(name), keys, chosen)
        return (gr.skip(),) * 9

    def step(self, delta: int, name: str | None, task: str, status: str, cuisine: str, search: str, sort: str,
             descending: bool, keys: list[str], key: str | None, page: int) -> tuple[Any, ...]:
        """Previous / next item of the list (staying at its ends); the rows turn to its page when it is on another."""
        keys = keys or []
        run_dir = self.listed(name)
        if not keys:
            return (*self._item(run_dir, keys, None), gr.skip(), gr.skip(), gr.skip())
        at = keys.index(key) if key in keys else -1 if delta > 0 else len(keys)
        target = keys[min(max(at + delta, 0), len(keys) - 1)]
        # The open row's mark moves with it: the page is drawn again (one page, cheap).
        rows, _ = self._listing(run_dir, task, status, cuisine, search, sort, descending)
        return (*self._item(run_dir, keys, target), *self._page(rows, page_of(keys, target), target, sort, descending))

    def reload(self, name: str | None) -> Any:
        """The run picker with the folders there are now (the chosen one kept when it still exists)."""
        choices = run_choices(self.root)
        names = [value for _, value in choices]
        return gr.update(choices=choices, value=name if name in names else (names[0] if names else None))

    def load(self, request: gr.Request = None) -> tuple[Any, ...]:  # type: ignore[assignment]
        """A page load: the folders there are now and the view the address names (`?run=…&item=…`)."""
        params = dict(getattr(request, "query_params", None) or {})
        value = {name: str(params.get(name) or "")[:300] for name in QUERY}
        choices = run_choices(self.root)
        names = [name for _, name in choices]
        unknown = bool(value["run"]) and value["run"] not in names
        # A link to a run that is not here opens none (never another run in its place) and says so.
        run = value["run"] if value["run"] in names else (None if unknown else (names[0] if names else None))
        task = value["task"] if value["task"] in TASK_CHOICES else ALL
        status = value["status"] if value["status"] in (ALL, *STATUSES) else ALL
        cuisine = value["cuisine"] if value["cuisine"] in CUISINE_CHOICES else ALL
        sort = value["sort"] if value["sort"] in SORTS else LISTED
        descending = value["desc"] == "1"
        shown = self.refresh(run, task, status, cuisine, value["q"], value["item"] or None, sort, descending)
        if unknown:
            shown = (f"No run folder named {as_text(value['run'][:80])} here: choose one from the list.", *shown[1:])
        return (gr.update(choices=choices, value=run), task, status, cuisine, value["q"], sort, descending, *shown)

    def build(self) -> tuple[Any, list[Any], list[Any]]:
        """The tab's components, inside the current Blocks; returns what a page load refreshes:
        (handler, inputs, outputs)."""
        shown_views.serve()  # the views' files, linked from the page
        gr.Markdown("A run's items one by one: filter, search or sort, click a row, and see its views, the exact "
                    "prompt sent, the raw answer, what was parsed, the reference and the score. The address bar "
                    "keeps what you chose: copy it to share this view.")
        with gr.Row(equal_height=True):
            # Every folder is in the list (the next ones appear as it is scrolled); typing filters by any part
            # of the label.
            run = gr.Dropdown([], label="Run (folder · model · headline · items · date)", scale=4,
                              elem_id="db-runs-run", filterable=True)
            reload = gr.Button("↻ Refresh list", size="sm", scale=1, min_width=120, elem_id="db-runs-reload")
        # Notes, the pager and the item are gr.HTML (the viewer writes its own few tags), not Markdown or text
        # boxes: fewer and lighter components for the page to draw at each event.
        head = gr.HTML("", elem_id="db-runs-summary", elem_classes="db-note", padding=False)
        with gr.Row():
            task = gr.Dropdown(TASK_CHOICES, value=ALL, label="Task", min_width=140)
            status = gr.Dropdown([ALL, *STATUSES], value=ALL, label="Status", min_width=140)
            cuisine = gr.Dropdown(CUISINE_CHOICES, value=ALL, label="Cuisine", min_width=140)
            search = gr.Textbox(label="Search answers and prompts", placeholder="text, then Enter", min_width=200,
                                max_length=200, elem_id="db-runs-search")
        with gr.Row():
            sort = gr.Dropdown(SORTS, value=LISTED, label="Sort the whole list by", min_width=160,
                               elem_id="db-runs-sort")
            descending = gr.Checkbox(False, label="Descending (blanks stay last)", min_width=160,
                                     elem_id="db-runs-desc")
        # One page of rows as plain HTML (a click on a row opens it, on a header sorts by it): drawing it costs
        # the page what PAGE_ROWS rows cost, whatever the run's size.
        items = gr.HTML("", elem_id="db-runs-items", js_on_load=TABLE_JS, padding=False)
        with gr.Row(elem_classes="db-nav"):
            earlier = gr.Button("‹ Earlier rows", size="sm", min_width=80, elem_id="db-runs-earlier")
            pager = gr.HTML("", elem_classes="db-where", elem_id="db-runs-pager", padding=False)
            later = gr.Button("Later rows ›", size="sm", min_width=80, elem_id="db-runs-later")
        keys, page = gr.State([]), gr.State(0)
        # The open item's key, in the page (a State stays on the server): the address is written from it.
        current = gr.Textbox(visible="hidden", elem_id="db-runs-current")
        with gr.Row(elem_classes="db-nav"):
            prev_btn = gr.Button("← Previous", size="sm", min_width=80, elem_id="db-runs-prev")
            where = gr.HTML("", elem_classes="db-where", elem_id="db-runs-where", padding=False)
            next_btn = gr.Button("Next →", size="sm", min_width=80, elem_id="db-runs-next")
        # The open item in one block: note, views (a press shows one large), prompt, answer, facts, judge's reply.
        panel = gr.HTML("", elem_id="db-runs-item", js_on_load=shown_views.STRIP_JS, padding=False)

        item_out = [current, where, panel]
        paging = [items, page, pager]
        listing = [head, items, keys, page, pager, *item_out]
        filters = [run, task, status, cuisine, search]
        ordering = [sort, descending]
        in_url = [run, task, status, cuisine, search, current, sort, descending]

        def keep(event: Any) -> None:
            event.then(None, in_url, None, js=URL_JS, api_visibility="private")

        def refresh(run: Any, task: Any, status: Any, cuisine: Any, search: Any, sort: Any, descending: Any
                    ) -> tuple[Any, ...]:
            return self.refresh(run, task, status, cuisine, search, None, sort, descending)

        for component in (run, task, status, cuisine, sort, descending):
            keep(component.input(refresh, [*filters, *ordering], listing, api_visibility="private"))
        keep(search.submit(refresh, [*filters, *ordering], listing, api_visibility="private"))
        def clicked(event: gr.EventData, *values: Any) -> tuple[Any, ...]:  # the event first: Gradio fills it in
            return self.clicked(event, *values)

        keep(items.click(clicked, [*filters, *ordering, keys, current], [*ordering, items, keys, page, pager, *item_out],
                         api_visibility="private"))
        earlier.click(lambda *a: self.turn(-1, *a), [*filters, *ordering, page, current], paging,
                      api_visibility="private")
        later.click(lambda *a: self.turn(1, *a), [*filters, *ordering, page, current], paging, api_visibility="private")
        stepping = [*filters, *ordering, keys, current, page]
        keep(prev_btn.click(lambda *a: self.step(-1, *a), stepping, [*item_out, *paging], api_visibility="private"))
        keep(next_btn.click(lambda *a: self.step(1, *a), stepping, [*item_out, *paging], api_visibility="private"))
        reload.click(self.reload, run, run, api_visibility="private")
        return self.load, [], [run, task, status, cuisine, search, sort, descending, *listing]


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
