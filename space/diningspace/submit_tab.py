"""The Submit tab (and the /submit API): a run folder in, re-scored figures beside the claimed ones out."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import gradio as gr

from eval import tasks

from .guard import GuardError
from .leaderboard import headline_column
from .limits import HourlyQuota, VisitorJobs, client_address
from .settings import SpaceSettings
from .submissions import Caps, Releases, SubmissionError, Submissions, submit


def _figure(task: str) -> str:
    """The leaderboard column a task's figure goes to, and which way is better when lower is."""
    spec = tasks.get(task)
    return headline_column(spec) + (" (lower is better)" if spec.lower_is_better else "")


INTRO = ("Submit a run folder that `python -m eval run` wrote (`run.json`, `predictions.jsonl`, and the "
         "`scores.jsonl` / `metrics.json` you claim), zipped, or the id of a public Hub repo holding one. "
         "This Space believes none of your figures: it checks that the run was made on its release (dataset "
         "fingerprint, prompt version, every request hash), re-scores every raw answer with the harness's "
         "scorers, and shows its figures beside yours. Accepted rows appear on the Leaderboard as "
         "**verified**; a model repo whose card has a `model-index` result on this dataset appears as "
         "**self-reported**. A newer submission of the same model and settings replaces the older one.")


def _pct(value: Any) -> str:
    return "–" if value is None else f"{value * 100:.2f}"


def report_markdown(record: dict[str, Any]) -> str:
    """The outcome as the page shows it: one line, then claimed vs re-scored per task."""
    model = " ".join(str(record.get("label") or record.get("model")).replace("`", "'").split())[:160]
    if record.get("status") == "self-reported":
        return (f"**Accepted as self-reported**: `{model}` ({html.escape(str(record.get('source'))[:120])}). "
                "The figures come from the model card and were not re-scored here.")
    head = ("⚠️ **Accepted, claims differ**: the Leaderboard shows the re-scored figures"
            if record.get("mismatch") else "✅ **Accepted and verified**: every answer re-scored here")
    lines = [f"{head}: `{model}`" + (" (partial: not every item of the release)" if record.get("partial") else ""),
             "", "| Figure | Items | Claimed | Re-scored here | Check |", "|---|---|---|---|---|"]
    for task in record.get("tasks") or []:
        claimed = task["claimed"] if task["claimed"] is not None else task["claimed_metrics"]
        if not task["verified"]:
            check = "not verified (no judge here)"
        elif task["mismatch"]:
            check = f"**mismatch** ({task['differing_items']} item(s) differ)" if task["differing_items"] else "**mismatch**"
        else:
            check = "match"
        lines.append(f"| {_figure(task['task'])} | {task['items']} / {task['release_items']} | "
                     f"{_pct(claimed)} | {_pct(task['rescored'])} | {check} |")
    lines += ["", *[f"- {html.escape(note)}" for note in record.get("notes") or []]]
    return "\n".join(lines)


class SubmitTab:
    def __init__(self, settings: SpaceSettings) -> None:
        self.settings = settings
        self.caps = Caps(zip_bytes=settings.submit_max_mb << 20, unpacked_bytes=settings.submit_unpacked_mb << 20)
        self.store = Submissions(settings.results_dir, hub_repo=settings.submit_repo)
        self.releases = Releases(settings.dataset)
        self.jobs = VisitorJobs(per_session=1, per_address=1, noun="submission")
        self.quota = HourlyQuota(settings.submits_per_hour, settings.submits_per_hour, 0, noun="submission")

    def submit(self, zip_file: str | None, hub_repo: str, repo_type: str,
               request: gr.Request = None) -> tuple[str, dict[str, Any]]:  # type: ignore[assignment]
        """/submit: a zip path (or a Hub repo id) in; the outcome as Markdown and as a dict."""
        session = getattr(request, "session_hash", None)
        address = client_address(request, self.settings.proxy_hops)
        try:
            with self.jobs.hold(session, address):
                self.quota.take(session, address)
                record = submit(zip_path=Path(zip_file) if zip_file else None, hub_repo=hub_repo,
                                repo_type=repo_type or "model", store=self.store, release_for=self.releases.get,
                                caps=self.caps, judge=self.settings.judge, dataset_id=self.settings.dataset_id)
        except (SubmissionError, GuardError) as exc:
            raise gr.Error(str(exc), print_exception=False) from None
        return report_markdown(record), record

    def build(self) -> None:
        gr.Markdown(INTRO, elem_classes="db-note")
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=240):
                zip_file = gr.File(label="Run folder (.zip)", file_types=[".zip"], type="filepath",
                                   elem_id="db-submit-zip")
            with gr.Column(scale=1, min_width=240):
                hub_repo = gr.Textbox(label="…or a public Hub repo", placeholder="owner/name",
                                      elem_id="db-submit-repo")
                repo_type = gr.Radio(["model", "dataset"], value="model", label="Repo type",
                                     elem_id="db-submit-type")
        limits = (f"At most {self.settings.submit_max_mb} MB zipped, {self.settings.submit_unpacked_mb} MB "
                  f"unpacked, {self.settings.submits_per_hour} submissions per hour. "
                  + ("VQA is re-judged with this Space's judge." if self.settings.judge
                     else "This Space has no judge: VQA answers are kept but not verified."))
        gr.Markdown(limits, elem_classes="db-hint")
        button = gr.Button("Submit", variant="primary", elem_id="db-submit-button")
        outcome = gr.Markdown(elem_id="db-submit-outcome")
        with gr.Accordion("Details (what was checked, as JSON)", open=False):
            record = gr.JSON(label="Details", elem_id="db-submit-record")
        button.click(self.submit, [zip_file, hub_repo, repo_type], [outcome, record], api_name="submit",
                     concurrency_limit=1)
