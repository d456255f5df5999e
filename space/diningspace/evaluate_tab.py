"""The Evaluate tab: run an offered model (or the visitor's own key) on a few items, live."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import gradio as gr

from eval.redact import redact
from eval.report.tables import as_text

from .catalog import Catalog, CatalogError
from .evaluation import (
    OPERATOR_SECRETS,
    OWN_KEY,
    EvalRequest,
    EvalUpdate,
    stream_evaluation,
    supports_own_keys,
)
from .guard import REDACTED, GuardError
from .limits import EVALUATION_SECONDS, RequestSlots, VisitorJobs, client_address, within_wall_clock
from .results_view import EMPTY_RESULTS, metrics_table, results_table, summary_line, thumbnail_uri
from .settings import BASELINES, KEY_PROVIDERS, SpaceSettings

KEY_NOTE = ("Your key is sent with this one run only: it is not stored, logged or shown back, and "
            "it is removed from any error message.")


class EvaluateTab:
    def __init__(self, catalog: Catalog, settings: SpaceSettings) -> None:
        self.catalog = catalog
        self.settings = settings
        self.own_keys = False
        self.jobs = VisitorJobs(settings.jobs_per_visitor, settings.jobs_per_address)
        self.slots = RequestSlots(settings.max_requests)
        self.wall_s = EVALUATION_SECONDS

    def _thumb(self, task: str, item_id: str) -> str | None:
        try:
            views = self.catalog.images(task, item_id)
        except CatalogError:
            return None
        reference = [image for image, role in views if role == "reference"]
        return thumbnail_uri((reference or [views[0][0]])[0]) if views else None

    async def evaluate(self, task: str, model: str, n_items: float, provider: str, own_model: str, api_key: str,
                       base_url: str, lang: str, request: gr.Request = None,  # type: ignore[assignment]
                       progress: gr.Progress = gr.Progress()  # noqa: B008
                       ) -> AsyncIterator[tuple[str, str, dict[str, Any] | None, list[dict[str, Any]]]]:
        """/evaluate: stream (status, per-sample table, metrics, per-sample records); metrics at the end.

        Stop (or a cancelled API job, or a closed page) ends the run: its requests in flight are
        cancelled and no new ones are sent.
        """
        eval_request = EvalRequest(task=task, model=model, n_items=int(n_items or 0), provider=provider or KEY_PROVIDERS[0],
                                   own_model=own_model or "", api_key=api_key or "", base_url=base_url or "",
                                   lang=lang or "zh")
        secrets = [eval_request.api_key, eval_request.api_key.strip(), *(os.environ.get(n) for n in OPERATOR_SECRETS)]
        thumbs: dict[str, str] = {}
        try:
            with self.jobs.hold(getattr(request, "session_hash", None),
                                client_address(request, self.settings.proxy_hops)):
                try:
                    available = len(self.catalog.filter_ids(task))
                except CatalogError:
                    available = None  # the harness reports why the data cannot be loaded
                async with aclosing(stream_evaluation(eval_request, self.settings, self.slots,
                                                      available=available)) as updates:
                    async for update in within_wall_clock(updates, self.wall_s):
                        for result in update.results:
                            if result.id not in thumbs and (uri := await asyncio.to_thread(self._thumb, task, result.id)):
                                thumbs[result.id] = uri
                        yield self._shown(task, update, thumbs, progress)
        # gr.Error renders its message as HTML: a server's words are escaped to show as text.
        except GuardError as exc:
            raise gr.Error(as_text(redact(str(exc), secrets, mark=REDACTED)), print_exception=False) from None
        except Exception as exc:  # noqa: BLE001 - every failure reaches the visitor as one scrubbed line
            message = redact(str(exc) or exc.__class__.__name__, secrets, mark=REDACTED).splitlines()[0]
            raise gr.Error(f"evaluation failed: {as_text(message)}", print_exception=False) from None

    @staticmethod
    def _shown(task: str, update: EvalUpdate, thumbs: dict[str, str], progress: gr.Progress
               ) -> tuple[str, str, dict[str, Any] | None, list[dict[str, Any]]]:
        done = len(update.results)
        progress((done, update.total), desc="items", unit="items")
        records = [r.to_json() for r in update.results]
        table = results_table(update.task, update.results, thumbs)
        if update.metrics is not None:
            table = metrics_table(update.task, update.metrics) + table
            return summary_line(update.task, update.spec, update.metrics), table, update.metrics, records
        failed = sum(1 for r in update.results if r.error)
        status = (f"Running **{as_text(update.spec)}** on {update.total} {task} items… {done}/{update.total} done"
                  + (f" · {failed} failed" if failed else ""))
        return status, table, None, records

    def model_choices(self, task: str) -> dict[str, Any]:
        choices = [*self.settings.model_choices(task), *([OWN_KEY] if self.own_keys else [])]
        return gr.update(choices=choices, value=choices[0])

    def limits_note(self) -> str:
        s = self.settings
        per_address = f", {s.jobs_per_address} per address" if s.jobs_per_address else ""
        return (f"At most {s.jobs_per_visitor} evaluation(s) at a time per visitor{per_address}; "
                f"{s.max_requests} model requests in flight across this Space; an evaluation stops after "
                f"{self.wall_s / 60:g} minutes. **Stop** ends a run and its requests.")

    def build(self) -> None:
        s = self.settings
        # A visitor's own key is offered only where the harness's backends can take one per request.
        self.own_keys = any(supports_own_keys(p) for p in KEY_PROVIDERS)
        offered = list(dict.fromkeys([*s.models, *(b for task in s.tasks() for b in BASELINES[task]),
                                      *([OWN_KEY] if self.own_keys else [])]))
        first_task = s.tasks()[0]
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=280, elem_classes="db-sidebar"):
                task = gr.Radio(list(s.tasks()), value=first_task, label="Task", elem_id="db-eval-task")
                model = gr.Dropdown(offered, value=s.model_choices(first_task)[0], label="Model", elem_id="db-eval-model",
                                    info="Configured by this Space's operator; baselines need no key.")
                n_items = gr.Slider(1, s.max_items, value=s.default_items, step=1, label="Items",
                                    info=f"The first N items of the dataset (at most {s.max_items} here).")
                lang = gr.Radio(["zh", "en"], value="zh", label="Prompt language")
                with gr.Group(visible=False) as own_key_group:
                    provider = gr.Radio(list(KEY_PROVIDERS), value=KEY_PROVIDERS[0], label="Provider")
                    own_model = gr.Textbox(label="Model name", elem_id="db-own-model", placeholder="gpt-4o-mini or gemini-2.5-flash")
                    api_key = gr.Textbox(label="API key", type="password", elem_id="db-api-key", placeholder="sk-… / AIza…",
                                         info=KEY_NOTE)
                    base_url = gr.Textbox(label="Base URL (optional)", visible=bool(s.allowed_hosts), elem_id="db-base-url",
                                          placeholder="https://host/v1",
                                          info="Allowed hosts: " + ", ".join(s.allowed_hosts))
                with gr.Row():
                    run_btn = gr.Button("Run evaluation", variant="primary", elem_id="db-run")
                    stop_btn = gr.Button("Stop", variant="stop", elem_id="db-stop")
                gr.Markdown(self.limits_note(), elem_classes="db-hint", elem_id="db-limits")
            with gr.Column(scale=3):
                status = gr.Markdown("Pick a model and press **Run evaluation**.", elem_id="db-eval-status")
                results = gr.HTML(EMPTY_RESULTS, elem_id="db-results")
                with gr.Accordion("Metrics and per-item records (JSON)", open=False):
                    metrics = gr.JSON(label="Metrics")
                    records = gr.JSON(label="Per-item records")
        task.input(self.model_choices, task, model, api_visibility="private")
        model.change(lambda m: gr.update(visible=m == OWN_KEY), model, own_key_group, api_visibility="private")
        running = run_btn.click(self.evaluate, [task, model, n_items, provider, own_model, api_key, base_url, lang],
                                [status, results, metrics, records], api_name="evaluate",
                                concurrency_limit=s.eval_concurrency, concurrency_id="evaluate",
                                show_progress_on=[results])
        stop_btn.click(None, None, None, cancels=[running], api_visibility="private")
        self.on_load = (self.model_choices, task, model)
