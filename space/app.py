"""DiningBench Space: browse the benchmark, try a model on a few items, compare with the paper."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
# The repo root holds eval/, metrics/ and diningbench.py: the parent of space/ in a checkout, or
# this folder itself in a bundled Space (see space/README.md).
REPO_ROOT = HERE if (HERE / "eval").is_dir() else HERE.parent
for path in (str(HERE), str(REPO_ROOT)):
    if path not in sys.path:
        sys.path.insert(0, path)

import gradio as gr  # noqa: E402
from diningspace.browse_tab import BrowseTab  # noqa: E402
from diningspace.catalog import Catalog  # noqa: E402
from diningspace.evaluate_tab import EvaluateTab  # noqa: E402
from diningspace.human_tab import HumanTab  # noqa: E402
from diningspace.lazy import LazyTabs, OpeningTab, TabbedBlocks  # noqa: E402
from diningspace.leaderboard_tab import LeaderboardTab  # noqa: E402
from diningspace.review_tab import ReviewAccess, ReviewTab  # noqa: E402
from diningspace.settings import SpaceSettings, settings_or_exit  # noqa: E402
from diningspace.submissions import restore_results  # noqa: E402
from diningspace.submit_tab import SubmitTab  # noqa: E402
from diningspace.uploads import UploadGuard  # noqa: E402
from diningspace.warmup import warm_harness  # noqa: E402
from fastapi.middleware import Middleware  # noqa: E402

from eval.report import viewer  # noqa: E402
from eval.report.viewer import build as build_runs_tab  # noqa: E402

INTRO = ("**DiningBench** tests how well vision-language models understand food: telling near-identical "
         "dishes apart, estimating their nutrition, and reasoning about diets, from several photos of one dish.")
SYNTHETIC_BANNER = ("<div class='db-banner'>You are looking at the <b>synthetic sample</b>: dishes rendered "
                    "from recipes by a seeded generator, in the real schema. It is for trying things out; "
                    "its numbers say nothing about the real benchmark.</div>")
# The Space's own rules, then the run viewer's (its Runs tab).
CSS = (HERE / "style.css").read_text(encoding="utf-8") + viewer.STYLE.read_text(encoding="utf-8")


def build_app(settings: SpaceSettings, catalog: Catalog | None = None) -> gr.Blocks:
    """The whole Space as one Blocks; `catalog` can be injected (tests, other data sources)."""
    catalog = catalog or Catalog(source=settings.dataset)
    # Index the data and import the harness in the background, so no visitor waits for either. Not a
    # daemon: a process that ends while this thread is still importing extension modules or reading
    # Parquet aborts in interpreter shutdown ("Fatal Python error ... finalizing"), so exit waits for it.
    threading.Thread(target=lambda: (warm_harness(), catalog.warm()), name="space-warm", daemon=False).start()
    browse, evaluate, leaderboard = BrowseTab(catalog), EvaluateTab(catalog, settings), LeaderboardTab(settings)
    # No usage telemetry unless the operator opts in with Gradio's own GRADIO_ANALYTICS_ENABLED=True.
    telemetry = os.environ.get("GRADIO_ANALYTICS_ENABLED", "").lower() == "true"
    # delete_cache: uploads never submitted (and other cached files) go after half an hour, checked every 10 min.
    # TabbedBlocks: the page served for `?tab=ID` opens on that tab (diningspace/lazy.py).
    with TabbedBlocks(title="DiningBench", analytics_enabled=telemetry, delete_cache=(600, 1800)) as demo:
        gr.HTML("<div class='db-header'><h1>🍜 DiningBench</h1></div>")
        gr.Markdown(INTRO, elem_classes="db-intro")
        if settings.is_synthetic_sample:
            gr.HTML(SYNTHETIC_BANNER)
        lazy = LazyTabs()  # each tab's loading work runs when the tab is first shown (diningspace/lazy.py)
        # Every tab in the bar, on as many rows as it takes: Gradio's default puts the tabs that do not fit a
        # phone's width in a "More tabs" menu, where newcomers miss them, and a choice made there while the bar
        # is still measuring itself could be lost.
        with gr.Tabs(overflow_behavior="wrap") as tabs:
            with gr.Tab("Browse", id="browse") as tab:
                browse.build()
            lazy.add("browse", tab, browse.on_load)
            with gr.Tab("Evaluate", id="evaluate") as tab:
                evaluate.build()
            lazy.add("evaluate", tab, evaluate.on_load)
            with gr.Tab("Leaderboard", id="leaderboard") as tab:
                leaderboard.build()
            lazy.add("leaderboard", tab, leaderboard.on_load)
            with gr.Tab("Submit", id="submit") as tab:
                SubmitTab(settings, evaluate.slots).build()
            lazy.add("submit", tab)  # nothing to load: listed so that `?tab=submit` opens it
            with gr.Tab("Take the test", id="human") as tab:
                HumanTab(catalog, settings, evaluate.slots).build()
            lazy.add("human", tab)
            with gr.Tab("Runs", id="runs") as tab:
                runs_load = build_runs_tab(settings.results_dir)
            lazy.add("runs", tab, runs_load)
            if settings.review_work is not None:  # only for an operator reviewing a construction build
                review = ReviewTab(settings.review_work, ReviewAccess(
                    settings.reviewers, settings.review_token, on_space=settings.on_space))
                with gr.Tab("Review", id="review") as tab:
                    review.build()
                lazy.add("review", tab, review.on_load)
        lazy.wire(demo, tabs)  # the page opens on the tab its address names (`?tab=ID`), which alone loads
    demo.queue(default_concurrency_limit=4, max_size=64)
    return demo


def launch_options(settings: SpaceSettings | None = None) -> dict:
    """Look and feel (in Gradio 6 theme and CSS are arguments of launch()), and the middleware: the one that
    lets the page open on the tab its address names, and the one that bounds uploads where they arrive
    (bytes per address per hour, the upload folder's total)."""
    settings = settings or SpaceSettings()
    # System fonts only: the page must not fetch anything from third-party hosts.
    theme = gr.themes.Soft(primary_hue="orange", secondary_hue="amber", neutral_hue="stone",
                           font=["ui-sans-serif", "system-ui", "Segoe UI", "Noto Sans", "sans-serif"],
                           font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "monospace"])
    return {"theme": theme, "css": CSS, "footer_links": ["api"],
            "app_kwargs": {"middleware": [Middleware(OpeningTab), Middleware(
                UploadGuard, per_hour=settings.upload_mb_per_hour << 20, proxy_hops=settings.proxy_hops)]}}


def main() -> None:
    settings = settings_or_exit(REPO_ROOT)
    for line in restore_results(settings):  # submissions and people's runs kept on the Hub come back first
        print(line, flush=True)
    demo = build_app(settings)
    # A platform stops a Space with SIGTERM: close the server as Ctrl-C does, so the exit handlers run and
    # the temporary folders (the views shown, eval/report/shown_views.py) go with the process.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    wanted = os.environ.get("GRADIO_SERVER_PORT", "").strip()
    _, local_url, _ = demo.launch(**launch_options(settings), max_file_size=settings.submit_max_mb << 20,
                                  prevent_thread_lock=True)
    port = urlsplit(str(local_url)).port
    moved = f" (port {wanted} was busy, so Gradio took the next free one)" if wanted and str(port) != wanted else ""
    print(f"DiningBench Space: open {local_url} in a browser{moved}; Ctrl-C stops it", flush=True)
    demo.block_thread()


if __name__ == "__main__":
    main()
