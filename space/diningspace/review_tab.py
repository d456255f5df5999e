"""The Review tab: approve or reject the base dishes (before task generation) or the final items of a
construction work folder, with their photos.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gradio as gr

from diningbench import (
    MAX_PHOTO_BYTES,  # a work folder's photo file read to show it; a larger one is left out
)
from eval.images import ImageError, decode_bounded
from eval.report import shown_views
from eval.report.tables import as_text

from .catalog import DISPLAY_SIDE
from .guard import GuardError
from .render import gallery_caption

STATUSES = ("pending", "approve", "reject", "all")
PASSES = (("final items", "items"), ("base dishes", "dishes"))  # construct/review.py's two review passes
MAX_NOTE_CHARS = 2000
OPERATOR = "operator"


class ReviewAccess:
    """Who may review: named Hugging Face users signed in on a Space, or whoever holds the operator's token."""

    def __init__(self, reviewers: Sequence[str] = (), token: str | None = None, *, on_space: bool = False) -> None:
        self.reviewers = {name.lower() for name in reviewers}
        self.token, self.on_space = token, on_space

    @property
    def enabled(self) -> bool:
        """Some way in exists; without one nobody may review (the tab says how to enable it)."""
        return bool(self.token) or (self.on_space and bool(self.reviewers))

    def who(self, profile: Any, token: str | None) -> str:
        """`hf:<username>` or `operator`; a GuardError saying why not, safe to show the visitor."""
        typed = (token or "").strip()
        if typed and self.token and hmac.compare_digest(typed.encode(), self.token.encode()):
            return OPERATOR
        username = str(getattr(profile, "username", "") or "").lower() if profile is not None else ""
        if username and self.on_space and username in self.reviewers:
            return f"hf:{username}"
        if not self.enabled:
            raise GuardError("reviewing is not enabled on this Space: the operator sets "
                             "DININGBENCH_SPACE_REVIEW_TOKEN, or DININGBENCH_SPACE_REVIEWERS on a Hugging Face Space")
        if typed:
            raise GuardError("that is not the operator's review token")
        if username and self.on_space:
            raise GuardError(f"you are signed in as {username}, who is not one of this Space's reviewers")
        ways = []
        if self.on_space and self.reviewers:
            ways.append("sign in with Hugging Face as one of the reviewers the operator named")
        if self.token:
            ways.append("enter the operator's review token")
        raise GuardError("reviewing is for the operator and named reviewers only: " + " or ".join(ways))


def check_note(note: str | None) -> str:
    """The note as recorded; a longer one than MAX_NOTE_CHARS is refused in one line."""
    text = note or ""
    if len(text) > MAX_NOTE_CHARS:
        raise GuardError(f"the note is {len(text):,} characters; at most {MAX_NOTE_CHARS:,}")
    return text


def _photo(path: str, item_id: str = "", index: int = 0) -> str | None:
    """A photo of the work folder as a file to show (its pixel count checked before decoding, bounded, encoded
    once: `shown_views`, as Browse's views); None when it is too large or cannot be read or decoded."""
    try:
        file = Path(path)
        if file.stat().st_size > MAX_PHOTO_BYTES:
            return None
        data = file.read_bytes()
        return shown_views.shared().path(data, DISPLAY_SIDE, lambda: decode_bounded(
            data, item_id=item_id, index=index, max_side=DISPLAY_SIDE))
    except (ImageError, OSError, ValueError):
        return None


class ReviewTab:
    """Every handler takes the token box and the signed-in profile (Gradio injects it) last, and
    checks them before reading or writing anything."""

    def __init__(self, work: Path, access: ReviewAccess | None = None) -> None:
        self.work = Path(work)
        self.access = access or ReviewAccess()

    def _who(self, profile: Any, token: str | None) -> str:
        try:
            return self.access.who(profile, token)
        except GuardError as exc:
            raise gr.Error(as_text(str(exc)), print_exception=False) from None

    def ids(self, task: str, status: str, stage: str = "items") -> list[str]:
        from construct.review import list_items

        items = list_items(self.work, task=None if task == "all" or stage == "dishes" else task,
                           status=None if status in ("all", "pending") else status, stage=stage)
        if status == "pending":
            items = [i for i in items if i.decision is None and not i.exempt]
        return [i.item_id for i in items]

    def show(self, item_id: str | None, stage: str = "items", token: str | None = None,
             profile: gr.OAuthProfile | None = None) -> tuple[Any, str, str]:
        self._who(profile, token)
        return self._show(item_id, stage)

    def _show(self, item_id: str | None, stage: str = "items") -> tuple[Any, str, str]:
        from construct.errors import BuildError
        from construct.review import get_item

        if not item_id:
            return "", '<div class="db-empty">No item matches.</div>', ""
        try:
            item = get_item(self.work, item_id, stage=stage)
        except BuildError as exc:
            raise gr.Error(as_text(str(exc).strip("'\"")), print_exception=False) from None
        views = shown_views.strip_html([(image, gallery_caption(role, i)) for i, (path, role) in enumerate(item.photos)
                                         if (image := _photo(path, item.item_id, i)) is not None], "Photos")
        decision = item.decision or ("exempt" if item.exempt else "not reviewed yet")
        if item.decision and item.reviewer:
            decision += f" (by {item.reviewer})"
        card = (f'<div class="db-card"><div class="db-id">{as_text(item.item_id, lines=True)}</div>'
                f'<div class="db-chips"><span class="db-chip">{as_text(item.task, lines=True)}</span>'
                f'<span class="db-chip">{as_text(item.cuisine, lines=True)}</span>'
                f'<span class="db-chip">merchant {as_text(item.merchant_id, lines=True)}</span>'
                f'<span class="db-chip">dish {as_text(item.dish_id, lines=True)}</span></div>'
                f'<div class="db-prompt">{as_text(item.summary, lines=True)}</div>'
                f'<p>Decision: <b>{as_text(decision, lines=True)}</b></p></div>')
        return views, card, item.note

    def filter(self, task: str, status: str, stage: str = "items", token: str | None = None,
               profile: gr.OAuthProfile | None = None) -> tuple[Any, ...]:
        """The list and its first item; a visitor who may not review sees why, and nothing of the items."""
        try:
            who = self.access.who(profile, token)
        except GuardError as exc:
            reason = f'<div class="db-empty">{as_text(str(exc), lines=True)}</div>'
            why = f"Not signed in as a reviewer: {as_text(str(exc))}"
            return gr.update(choices=[], value=None), "", reason, "", why
        ids = self.ids(task, status, stage)
        first = ids[0] if ids else None
        return (gr.update(choices=ids, value=first), *self._show(first, stage),
                f"{len(ids)} items · reviewing as {as_text(who)}")

    def approve(self, task: str, status: str, item_id: str | None, note: str, stage: str = "items",
                token: str | None = None, profile: gr.OAuthProfile | None = None) -> tuple[Any, ...]:
        return self.decide("approve", task, status, item_id, note, stage, token, profile)

    def reject(self, task: str, status: str, item_id: str | None, note: str, stage: str = "items",
               token: str | None = None, profile: gr.OAuthProfile | None = None) -> tuple[Any, ...]:
        return self.decide("reject", task, status, item_id, note, stage, token, profile)

    def decide(self, decision: str, task: str, status: str, item_id: str | None, note: str,
               stage: str = "items", token: str | None = None, profile: Any = None) -> tuple[Any, ...]:
        from construct.review import record_decision

        who = self._who(profile, token)
        if not item_id:
            raise gr.Error("pick an item first", print_exception=False)
        try:
            record_decision(self.work, item_id, decision, check_note(note), reviewer=who, stage=stage)
        except ValueError as exc:  # the review's BuildError and GuardError are ValueErrors
            raise gr.Error(as_text(str(exc).strip("'\"")), print_exception=False) from None
        ids = self.ids(task, status, stage)
        # Move on to the next item of the list (a pending list loses the one just decided).
        following = next((i for i in ids if i > item_id), ids[0] if ids else None)
        return (gr.update(choices=ids, value=following), *self._show(following, stage),
                f"{as_text(item_id)}: **{decision}** recorded by {as_text(who)} · {len(ids)} items in this list")

    def build(self) -> None:
        from construct.review import list_items

        tasks = sorted({i.task for i in list_items(self.work)})
        shown_views.serve()  # the photos' files, linked from the page
        gr.Markdown("Items of a construction work folder, for the operator and the reviewers they name. A decision "
                    "is recorded at once with who made it (`construct/review.py`); the release keeps approved items "
                    "only.", elem_classes="db-note")
        # On a phone the photos and the card come first, the controls below them (style.css, #db-review-row).
        with gr.Row(equal_height=False, elem_id="db-review-row"):
            with gr.Column(scale=1, min_width=240, elem_classes="db-sidebar"):
                if self.access.on_space and self.access.reviewers:
                    gr.LoginButton(elem_id="db-review-login")
                token = gr.Textbox(label="Operator's review token", type="password", max_length=256,
                                   info="Enter loads the items.", visible=bool(self.access.token),
                                   elem_id="db-review-token")
                stage = gr.Radio(list(PASSES), value="items", label="Review", elem_id="db-review-stage")
                task = gr.Radio(["all", *tasks], value="all", label="Task", elem_id="db-review-task")
                status = gr.Radio(list(STATUSES), value="pending", label="Show", elem_id="db-review-status")
                item = gr.Dropdown([], label="Item", elem_id="db-review-item")
                note = gr.Textbox(label=f"Note (optional, at most {MAX_NOTE_CHARS:,} characters)", lines=2,
                                  elem_id="db-review-note")
                with gr.Row():
                    approve = gr.Button("Approve", variant="primary", min_width=80, elem_id="db-review-approve")
                    reject = gr.Button("Reject", variant="stop", min_width=80, elem_id="db-review-reject")
                where = gr.Markdown("", elem_id="db-review-where")
            with gr.Column(scale=3):
                gallery = gr.HTML("", elem_id="db-review-gallery", js_on_load=shown_views.STRIP_JS, padding=False)
                card = gr.HTML(elem_id="db-review-card")
        listed = [item, gallery, card, note, where]
        for trigger in (task.input, status.input, stage.input, token.submit):
            trigger(self.filter, [task, status, stage, token], listed, api_visibility="private")
        item.input(self.show, [item, stage, token], [gallery, card, note], api_visibility="private")
        approve.click(self.approve, [task, status, item, note, stage, token], listed, api_visibility="private")
        reject.click(self.reject, [task, status, item, note, stage, token], listed, api_visibility="private")
        self.on_load = (self.filter, [task, status, stage, token], listed)
