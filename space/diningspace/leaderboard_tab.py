"""The Leaderboard tab: comparable rows ranked together, with search, filters and a column picker."""

from __future__ import annotations

from typing import Any

import gradio as gr
import pandas as pd

from eval import tasks
from eval.report.tables import as_text

from .leaderboard import (
    ANY,
    COLUMNS,
    DEFAULT_RANK,
    DEFAULT_SHOWN,
    OPTIONAL,
    RANKABLE,
    ROW_KINDS,
    SHOWN,
    SIZES,
    all_rows,
    data_source,
    filter_rows,
    leaderboard_html,
    leaderboard_table,
    order_within_groups,
    page_rows,
    rank,
)
from .settings import SpaceSettings

NOTE = ("Rows are ranked only against comparable rows: the **full release** under one prompt language "
        "(verified submissions and the operator's runs), and the paper's or model cards' figures each among "
        "themselves; a rank reads as a range (2–4) when the 95% intervals do not settle the order, and "
        "**Compare two rows** below gives the paired test. *Partial* runs (a subset of items), the *synthetic* sample, people and reference "
        "baselines are shown in their own groups, not ranked. **Status** says how far to trust a row: "
        "*verified* submissions were re-scored here from their raw answers on this release: the answers "
        "earn the figure, which does not prove which model wrote them (*claims differ* when the submitted "
        "figures did not match; *flagged for review* for a perfect figure or answers that repeat the public "
        "references), *self-reported* ones come from a model card. Identical rows are "
        "shown once, and each model + settings once: its newest run (Source names the earlier ones). Intervals "
        "are 95%, clustered by merchant (by item where the release names no merchant, as the authors' does), as "
        "`value [low, high]`, ‡ after one from fewer than 20 of them. A run under the authors' protocol shows their "
        "figure, with its interval; hover it for ours' reading of the same answers, the Protocol cell for the image "
        "indices sent and the Data cell for the release. Click a model to open its run in the Runs tab; "
        "click a header to sort by it, hover it for its full name. On a phone the table shows the rank, the "
        "model and the figure it is ranked by (**Rank by** chooses it).")
# A click on a header (`data-sort`) or Enter on a focused one sends its column to the server.
SORT_JS = """
const send = (cell) => { if (cell) trigger('click', {sort: cell.dataset.sort}); };
element.addEventListener('click', (e) => send(e.target.closest('th[data-sort]')));
element.addEventListener('keydown', (e) => { if (e.key === 'Enter') send(e.target.closest('th[data-sort]')); });
"""


class LeaderboardTab:
    def __init__(self, settings: SpaceSettings) -> None:
        self.settings = settings

    def table(self, metric: str = DEFAULT_RANK) -> pd.DataFrame:
        """/leaderboard: the grouped, ranked table (re-reads results/, so new runs appear on refresh)."""
        return leaderboard_table(self.settings.reported_csv, self.settings.results_dir, metric or DEFAULT_RANK)

    def view(self, metric: str, search: str = "", kinds: list[str] | None = None, lang: str = ANY,
             task: str = ANY, weights: str = ANY, size: str = ANY, columns: list[str] | None = None,
             order: str = "", descending: bool = False, page: int = 0) -> tuple[str, int, str]:
        """(the board's HTML for one page, that page, `Rows 1–50 of 300`)."""
        metric = metric if metric in RANKABLE else DEFAULT_RANK
        problems: list[str] = []
        rows = filter_rows(all_rows(self.settings.reported_csv, self.settings.results_dir, problems),
                           search=search or "", kinds=list(ROW_KINDS) if kinds is None else kinds, lang=lang or ANY,
                           task=task or ANY, weights=weights or ANY, size=size or ANY)
        order = order if order in SHOWN and order not in RANKABLE and order != "#" else ""
        shown, page, pager = page_rows(order_within_groups(rank(rows, metric), order, bool(descending)), page)
        board = leaderboard_html(shown, metric, DEFAULT_SHOWN if columns is None else columns, order or None,
                                 bool(descending))
        if problems:  # a run folder that cannot be read is named, never a broken page
            listed = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            board += (f"<p class='db-note'>Left out {len(problems)} run folder(s) that cannot be read: "
                      f"{as_text(listed, lines=True)}</p>")
        return board, page, pager

    def page(self, metric: str, search: str = "", kinds: list[str] | None = None, lang: str = ANY,
             task: str = ANY, weights: str = ANY, size: str = ANY, columns: list[str] | None = None) -> str:
        """The first page of the board for these choices, as HTML."""
        return self.view(metric, search, kinds, lang, task, weights, size, columns)[0]

    def sort_by(self, metric: str, order: str, descending: bool, *rest: Any, event: Any) -> tuple[Any, ...]:
        """A header clicked: a metric ranks by it (best first); another column orders each group by it, a
        second click on it reversing. Returns (Rank by, order, descending, board, page, pager)."""
        column = str((getattr(event, "_data", None) or {}).get("sort") or "")[:40]
        if column in RANKABLE:
            metric, order, descending = column, "", False
        elif column in SHOWN and column != "#":
            descending = not descending if column == order else False
            order = column
        else:
            return (gr.skip(),) * 6
        board, page, pager = self.view(metric, *rest, order=order, descending=descending)
        return metric, order, descending, board, page, pager

    def runs(self) -> list[str]:
        """The rows that have a run folder (local runs and verified submissions), by folder."""
        return sorted({str(r["Run"]) for r in all_rows(self.settings.reported_csv, self.settings.results_dir)
                       if r.get("Run")})

    def compare_choices(self) -> tuple[Any, Any]:
        choices = self.runs()
        return (gr.update(choices=choices, value=choices[0] if choices else None),
                gr.update(choices=choices, value=choices[1] if len(choices) > 1 else None))

    def compare(self, first: str | None, second: str | None) -> str:
        """/compare: the paired test of two rows' runs, per task both scored (`python -m eval compare`): on
        their protocol's reading, ours beside it when that protocol reads answers its own way."""
        from eval.compare import asked_differently, asked_note, compare_runs_task, protocol_line
        from eval.report.runs import ReportError, load_run

        known = set(self.runs())
        if not first or not second or first not in known or second not in known:
            raise gr.Error("choose two rows that have a run (the Run column)", print_exception=False)
        if first == second:
            return "Choose two different rows."
        try:  # the same checks as `python -m eval compare`: a submitted run folder may come from anywhere
            a = load_run(self.settings.results_dir / first)
            b = load_run(self.settings.results_dir / second)
            both = [task for task in tasks.all_tasks() if task.name in a.scores and task.name in b.scores]
            shared = [task.name for task in both]
            differences = asked_differently(a, b, shared)
            parts = [as_text(asked_note(differences))] if differences else []
            parts.append(f"**A** = {as_text(a.label)} · **B** = {as_text(b.label)}")
            if (named := protocol_line(a, b, both, release_of=data_source)) is not None:
                parts.append(as_text(named))  # the release by its name only: the operator's paths stay theirs
            for task in both:
                found = compare_runs_task(a, b, task, n_perm=1999).describe()
                parts.append(as_text(found, lines=True) if found else f"{task.name}: no shared scored items")
        except ReportError as exc:
            raise gr.Error(as_text(str(exc).replace(str(self.settings.results_dir), "")), print_exception=False) from None
        return "\n\n".join(parts) if shared else "These two runs share no task."

    def build(self) -> None:
        gr.Markdown(NOTE, elem_classes="db-note")
        with gr.Row(equal_height=False):
            search = gr.Textbox(label="Search models", placeholder="e.g. qwen 7b", elem_id="db-board-search",
                                scale=3, min_width=200)
            metric = gr.Dropdown(list(RANKABLE), value=DEFAULT_RANK, label="Rank by", elem_id="db-rank-by",
                                 info="Best first within each group.", scale=2, min_width=160)
            refresh = gr.Button("Refresh", size="sm", scale=1, min_width=100, elem_id="db-board-refresh")
        with gr.Accordion("Filters and columns", open=False, elem_id="db-board-filters"):
            kinds = gr.CheckboxGroup(list(ROW_KINDS), value=list(ROW_KINDS), label="Show rows",
                                     elem_id="db-board-kinds")
            with gr.Row():
                lang = gr.Dropdown([ANY, "zh", "en"], value=ANY, label="Prompt language", min_width=120)
                task = gr.Dropdown([ANY, *tasks.names()], value=ANY, label="Task",
                                   info="Rows with a figure for it", min_width=140, elem_id="db-board-task")
                weights = gr.Dropdown([ANY, "open", "closed"], value=ANY, label="Weights", min_width=120)
                size = gr.Dropdown([ANY, *SIZES, "unknown"], value=ANY, label="Model size", min_width=120)
            columns = gr.CheckboxGroup(OPTIONAL, value=DEFAULT_SHOWN, label="Columns", elem_id="db-board-columns")
        # Filled when the tab is first shown (diningspace/lazy.py), not at every page load.
        board = gr.HTML("<p class='db-note'>Loading the leaderboard…</p>", elem_id="db-board", js_on_load=SORT_JS)
        with gr.Row(elem_classes="db-nav"):
            earlier = gr.Button("‹ Earlier rows", size="sm", min_width=80, elem_id="db-board-earlier")
            pager = gr.Markdown("", elem_classes="db-where", elem_id="db-board-pager")
            later = gr.Button("Later rows ›", size="sm", min_width=80, elem_id="db-board-later")
        order, descending, page = gr.State(""), gr.State(False), gr.State(0)
        inputs = [metric, search, kinds, lang, task, weights, size, columns]
        shown = [board, page, pager]

        def turn(delta: int, *values: Any) -> tuple[str, int, str]:
            *choices, order_now, descending_now, page_now = values
            return self.view(*choices, order=order_now, descending=descending_now, page=int(page_now or 0) + delta)

        def first_page(*values: Any) -> tuple[str, int, str]:  # a new choice shows its first page
            return turn(0, *values, 0)

        def ranked(*values: Any) -> tuple[Any, ...]:  # Rank by chosen: the metric's order, first page
            return ("", False, *self.view(*values))

        search.input(first_page, [*inputs, order, descending], shown, api_visibility="private",
                     trigger_mode="always_last")
        metric.input(ranked, inputs, [order, descending, *shown], api_visibility="private")
        for trigger in (search.submit, kinds.input, lang.input, task.input, weights.input, size.input,
                        columns.input, refresh.click):
            trigger(first_page, [*inputs, order, descending], shown, api_visibility="private")
        earlier.click(lambda *a: turn(-1, *a), [*inputs, order, descending, page], shown, api_visibility="private")
        later.click(lambda *a: turn(1, *a), [*inputs, order, descending, page], shown, api_visibility="private")

        def clicked(event: gr.EventData, metric_now: str, order_now: str, descending_now: bool, *rest: Any
                    ) -> tuple[Any, ...]:  # the event first: Gradio fills it in only before `*rest`
            return self.sort_by(metric_now, order_now, descending_now, *rest, event=event)

        board.click(clicked, [metric, order, descending, *inputs[1:]], [metric, order, descending, *shown],
                    api_visibility="private")
        with gr.Accordion("Compare two rows (a paired test on the items both answered)", open=False,
                          elem_id="db-board-compare") as compare_panel:
            with gr.Row():
                first = gr.Dropdown(label="A", choices=[], elem_id="db-compare-a", min_width=200)
                second = gr.Dropdown(label="B", choices=[], elem_id="db-compare-b", min_width=200)
            go = gr.Button("Compare", size="sm", elem_id="db-compare-go")
            verdict = gr.Markdown(elem_id="db-compare-out")
        go.click(self.compare, [first, second], verdict, api_name="compare")
        # The rows to compare are listed when the panel is opened (each time: new runs appear), not when the
        # tab loads: most visitors never open it, and listing them reads every run folder again.
        compare_panel.expand(self.compare_choices, None, [first, second], api_visibility="private")
        self.on_load = (first_page, [*inputs, order, descending], shown)
        # API-only endpoint for gradio_client users: the same rows as a table, numbers as numbers.
        api_table = gr.Dataframe(headers=COLUMNS, visible=False)
        api_trigger = gr.Button(visible=False)
        api_trigger.click(self.table, None, api_table, api_name="leaderboard")
