"""The Leaderboard tab: reported paper figures, local runs and people, ranked by a chosen metric."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from .leaderboard import (
    COLUMNS,
    DEFAULT_RANK,
    RANKABLE,
    leaderboard_html,
    leaderboard_rows,
    leaderboard_table,
)
from .settings import SpaceSettings

NOTE = ("**Data** says what a row was measured on: *paper* (the figures the DiningBench paper reports on "
        "the full benchmark, not reproduced here), *full release*, *synthetic* (the embedded sample: its "
        "numbers say nothing about the real benchmark) or *partial* (a subset of items). Local runs are the "
        "`results/` folders written by `python -m eval run` or `sweep`, with 95% intervals clustered by "
        "merchant as `value [low, high]`. **humans** rows pool the people who took the test, per group. "
        "Hover a header or a cell for its full name.")


class LeaderboardTab:
    def __init__(self, settings: SpaceSettings) -> None:
        self.settings = settings

    def table(self, metric: str = DEFAULT_RANK) -> pd.DataFrame:
        """/leaderboard: the ranked table (re-reads results/, so new runs appear on refresh)."""
        return leaderboard_table(self.settings.reported_csv, self.settings.results_dir, metric or DEFAULT_RANK)

    def page(self, metric: str) -> str:
        metric = metric if metric in RANKABLE else DEFAULT_RANK
        return leaderboard_html(leaderboard_rows(self.settings.reported_csv, self.settings.results_dir, metric),
                                metric)

    def build(self) -> None:
        gr.Markdown(NOTE, elem_classes="db-note")
        with gr.Row(equal_height=False):
            metric = gr.Dropdown(list(RANKABLE), value=DEFAULT_RANK, label="Rank by", elem_id="db-rank-by",
                                 info="Best first; rows without this figure come last.", scale=3, min_width=200)
            refresh = gr.Button("Refresh", size="sm", scale=1, min_width=100, elem_id="db-board-refresh")
        board = gr.HTML(self.page(DEFAULT_RANK), elem_id="db-board")
        for trigger in (metric.input, refresh.click):
            trigger(self.page, metric, board, api_visibility="private")
        self.on_load = (self.page, metric, board)
        # API-only endpoint for gradio_client users: the same rows as a table, numbers as numbers.
        api_table = gr.Dataframe(headers=COLUMNS, visible=False)
        api_trigger = gr.Button(visible=False)
        api_trigger.click(self.table, None, api_table, api_name="leaderboard")
