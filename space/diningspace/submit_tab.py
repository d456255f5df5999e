"""The Submit tab (and the /submit API): a run folder in, re-scored figures beside the claimed ones out."""

from __future__ import annotations

import asyncio
import contextlib
import html
from pathlib import Path
from typing import Any

import gradio as gr

from eval import tasks

from .guard import GuardError
from .leaderboard import headline_column
from .limits import HourlyQuota, RequestSlots, VisitorJobs, client_address
from .settings import SpaceSettings
from .submissions import MAX_EPOCHS, Caps, Releases, SubmissionError, Submissions, submit
from .uploads import sweep_uploads, upload_root


def _figure(task: str) -> str:
    """The leaderboard column a task's figure goes to, and which way is better when lower is."""
    spec = tasks.get(task)
    return headline_column(spec) + (" (lower is better)" if spec.lower_is_better else "")


INTRO = ("Submit a run folder that `python -m eval run` wrote (`run.json`, `predictions.jsonl`, and the "
         "`scores.jsonl` / `metrics.json` you claim), zipped, or the id of a public Hub repo holding one. "
         "This Space believes none of your figures: it checks that the run was made on its release (dataset "
         "fingerprint, prompt version, every request hash), re-scores every raw answer with the harness's "
         "scorers, and shows its figures beside yours. Accepted rows appear on the Leaderboard as "
         "**verified**: re-scored here from the raw answers on this release, which says the answers earn "
         "the figure, not which model wrote them (a perfect figure, or answers that repeat the public "
         "references, is flagged for review). A model repo whose card has a `model-index` result on this "
         "dataset appears as **self-reported**. A row belongs to whoever first submitted it (the signed-in "
         "Hugging Face user, or the owner secret shown at the first submission): only its owner replaces "
         "it, with the history kept; anyone else's submission gets a row of its own.")


def _pct(value: Any) -> str:
    return "–" if value is None else f"{value * 100:.2f}"


def _claims(task: dict[str, Any]) -> str:
    """What the run claimed for a task: metrics.json's figure and, when it differs, the one its
    scores.jsonl gives; "not claimed" when it claims neither."""
    stated, from_scores = task.get("claimed_metrics"), task.get("claimed")
    if stated is None and from_scores is None:
        return "not claimed"
    if stated is None:
        return f"{_pct(from_scores)} (scores.jsonl)"
    if from_scores is None or abs(stated - from_scores) < 5e-5:
        return _pct(stated)
    return f"{_pct(stated)} (metrics.json) · {_pct(from_scores)} (scores.jsonl)"


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
        if not task["verified"]:
            check = "not verified (no judge here)"
        elif task["mismatch"]:
            check = f"**mismatch** ({task['differing_items']} item(s) differ)" if task["differing_items"] else "**mismatch**"
        else:
            check = "match"
        lines.append(f"| {_figure(task['task'])} | {task['items']} / {task['release_items']} | "
                     f"{_claims(task)} | {_pct(task['rescored'])} | {check} |")
    lines += ["", *[f"- {html.escape(note)}" for note in record.get("notes") or []]]
    lines += [f"- ⚑ flagged for review: {html.escape(str(flag))}" for flag in record.get("flags") or []]
    if isinstance(replaced := record.get("replaced"), dict):
        before = ", ".join(f"{_figure(t)} {_pct(v)}" for t, v in (replaced.get("tasks") or {}).items())
        lines += ["", f"This replaces your row submitted {html.escape(str(replaced.get('submitted_at') or 'earlier'))}"
                      + (" (partial)" if replaced.get("partial") else "") + (f": {before}" if before else "")
                      + f". The row's history keeps {int(replaced.get('versions') or 1)} earlier version(s)."]
    if record.get("owner_secret"):
        lines += ["", f"**Your owner secret: `{record['owner_secret']}`**. Keep it: give it with a later "
                      "submission of this model and settings to replace this row. It is shown only now."]
    return "\n".join(lines)


class SubmitTab:
    """`slots` are the Space's request slots: a submission re-judged by the operator's judge holds one
    while it runs, like an evaluation's requests."""

    def __init__(self, settings: SpaceSettings, slots: RequestSlots | None = None) -> None:
        self.settings = settings
        self.caps = Caps(zip_bytes=settings.submit_max_mb << 20, unpacked_bytes=settings.submit_unpacked_mb << 20)
        self.store = Submissions(settings.results_dir, hub_repo=settings.submit_repo)
        self.releases = Releases(settings.dataset)
        self.slots = slots or RequestSlots(settings.max_requests)
        self.jobs = VisitorJobs(per_session=1, per_address=1, noun="submission")
        self.quota = HourlyQuota(settings.submits_per_hour, settings.submits_per_hour, 0, noun="submission")

    async def submit(self, zip_file: str | None, hub_repo: str, repo_type: str, owner_secret: str = "",
                     request: gr.Request = None,  # type: ignore[assignment]
                     profile: gr.OAuthProfile | None = None) -> tuple[str, dict[str, Any]]:
        """/submit: a zip path (or a Hub repo id) in; the outcome as Markdown and as a dict. The upload
        is removed once read, whatever the outcome."""
        session = getattr(request, "session_hash", None)
        address = client_address(request, self.settings.proxy_hops)
        user = getattr(profile, "username", None)
        try:
            with self.jobs.hold(session, address):
                self.quota.take(session, address)
                work = lambda: submit(  # noqa: E731 - one call, run in a worker thread
                    zip_path=Path(zip_file) if zip_file else None, hub_repo=hub_repo, repo_type=repo_type or "model",
                    store=self.store, release_for=self.releases.get, caps=self.caps, judge=self.settings.judge,
                    dataset_id=self.settings.dataset_id, user=user, secret=owner_secret,
                    budget=self.settings.submit_seconds)
                # The judge's calls are model requests: one Space-wide slot.
                async with self.slots.slot() if self.settings.judge else contextlib.nullcontext():
                    record = await asyncio.to_thread(work)
        except (SubmissionError, GuardError) as exc:
            raise gr.Error(str(exc), print_exception=False) from None
        finally:
            if zip_file:
                Path(zip_file).unlink(missing_ok=True)
            sweep_uploads(upload_root())
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
                secret = gr.Textbox(value="", label="Owner secret (to replace your own row)", type="password",
                                    placeholder="shown at your first submission", elem_id="db-submit-secret")
        limits = (f"At most {self.settings.submit_max_mb} MB zipped, {self.settings.submit_unpacked_mb} MB "
                  f"unpacked, {MAX_EPOCHS} epochs, {self.settings.submit_seconds:g} s of checking and re-scoring, "
                  f"{self.settings.submits_per_hour} submissions per hour. "
                  + ("VQA is re-judged with this Space's judge." if self.settings.judge
                     else "This Space has no judge: VQA answers are kept but not verified."))
        gr.Markdown(limits, elem_classes="db-hint")
        button = gr.Button("Submit", variant="primary", elem_id="db-submit-button")
        outcome = gr.Markdown(elem_id="db-submit-outcome")
        with gr.Accordion("Details (what was checked, as JSON)", open=False):
            record = gr.JSON(label="Details", elem_id="db-submit-record")
        # Two at a time: one large submission (bounded by its time budget) never holds every place.
        button.click(self.submit, [zip_file, hub_repo, repo_type, secret], [outcome, record], api_name="submit",
                     concurrency_limit=2)
        zip_file.upload(lambda: sweep_uploads(upload_root()) and None, None, None, api_visibility="private")
