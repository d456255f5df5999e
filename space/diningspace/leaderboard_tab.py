"""The Leaderboard tab: reported paper figures and local runs in one sortable table."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from .leaderboard import COLUMNS, DATATYPES, WIDTHS, leaderboard_table
from .settings import SpaceSettings

NOTE = ("Rows marked **reported (paper)** are the figures the DiningBench paper reports on the full "
        "benchmark; they were not reproduced here. **Local runs** are the `results/*/` folders written by "
        "`python -m eval run`, with 95% intervals clustered by merchant. Click a column header to sort.")


class LeaderboardTab:
    def __init__(self, settings: SpaceSettings) -> None:
        self.settings = settings

    def table(self) -> pd.DataFrame:
        """/leaderboard: the current table (re-reads results/, so new runs appear on refresh)."""
        return leaderboard_table(self.settings.reported_csv, self.settings.results_dir)

    def build(self) -> None:
        gr.Markdown(NOTE, elem_classes="db-note")
        table = gr.Dataframe(self.table(), headers=COLUMNS, datatype=DATATYPES, interactive=False,
                             column_widths=WIDTHS, wrap=False, max_height=640, pinned_columns=1, show_search="search",
                             elem_id="db-leaderboard", label="Leaderboard")
        refresh = gr.Button("Refresh local runs", size="sm")
        refresh.click(self.table, None, table, api_name="leaderboard")
