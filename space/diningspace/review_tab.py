"""The Review tab: approve or reject the base dishes (before task generation) or the final items of a
construction work folder, with their photos.

Shown only when the operator sets DININGBENCH_SPACE_REVIEW_WORK; decisions go through
`construct.review.record_decision`, the same log the `python -m construct review` CSV writes.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import gradio as gr
from PIL import Image

from .catalog import DISPLAY_SIDE

STATUSES = ("pending", "approve", "reject", "all")
PASSES = (("final items", "items"), ("base dishes", "dishes"))  # construct/review.py's two review passes


def _photo(path: str) -> Image.Image | None:
    try:
        with Image.open(path) as image:
            image.draft("RGB", (DISPLAY_SIDE, DISPLAY_SIDE))  # JPEGs decode at reduced scale
            shown = image.convert("RGB")
        shown.thumbnail((DISPLAY_SIDE, DISPLAY_SIDE))
        return shown
    except (OSError, ValueError, Image.DecompressionBombError):
        return None


class ReviewTab:
    def __init__(self, work: Path) -> None:
        self.work = Path(work)

    def ids(self, task: str, status: str, stage: str = "items") -> list[str]:
        from construct.review import list_items

        wanted = None if status == "all" else (None if status == "pending" else status)
        items = list_items(self.work, task=None if task == "all" or stage == "dishes" else task, status=wanted,
                           stage=stage)
        if status == "pending":
            items = [i for i in items if i.decision is None and not i.exempt]
        return [i.item_id for i in items]

    def show(self, item_id: str | None, stage: str = "items") -> tuple[Any, str, str]:
        from construct.review import get_item

        if not item_id:
            return [], '<div class="db-empty">No item matches.</div>', ""
        try:
            item = get_item(self.work, item_id, stage=stage)
        except KeyError as exc:
            raise gr.Error(str(exc).strip("'\""), print_exception=False) from None
        views = [(image, f"{role} · view {i + 1}") for i, (path, role) in enumerate(item.photos)
                 if (image := _photo(path)) is not None]
        decision = item.decision or ("exempt" if item.exempt else "not reviewed yet")
        card = (f'<div class="db-card"><div class="db-id">{html.escape(item.item_id)}</div>'
                f'<div class="db-chips"><span class="db-chip">{html.escape(item.task)}</span>'
                f'<span class="db-chip">{html.escape(item.cuisine)}</span>'
                f'<span class="db-chip">merchant {html.escape(item.merchant_id)}</span>'
                f'<span class="db-chip">dish {html.escape(item.dish_id)}</span></div>'
                f'<div class="db-prompt">{html.escape(item.summary)}</div>'
                f'<p>Decision: <b>{html.escape(decision)}</b></p></div>')
        return views, card, item.note

    def filter(self, task: str, status: str, stage: str = "items") -> tuple[Any, ...]:
        ids = self.ids(task, status, stage)
        first = ids[0] if ids else None
        return (gr.update(choices=ids, value=first), *self.show(first, stage), f"{len(ids)} items")

    def decide(self, decision: str, task: str, status: str, item_id: str | None, note: str,
               stage: str = "items") -> tuple[Any, ...]:
        from construct.review import record_decision

        if not item_id:
            raise gr.Error("pick an item first", print_exception=False)
        try:
            record_decision(self.work, item_id, decision, note or "", stage=stage)
        except (KeyError, ValueError) as exc:
            raise gr.Error(str(exc).strip("'\""), print_exception=False) from None
        ids = self.ids(task, status, stage)
        # Move on to the next item of the list (a pending list loses the one just decided).
        following = next((i for i in ids if i > item_id), ids[0] if ids else None)
        return (gr.update(choices=ids, value=following), *self.show(following, stage),
                f"{item_id}: **{decision}** recorded · {len(ids)} items in this list")

    def build(self) -> None:
        from construct.review import list_items

        tasks = sorted({i.task for i in list_items(self.work)})
        gr.Markdown(f"Items of the construction work folder `{self.work.name}`. A decision is recorded at once "
                    "(`construct/review.py`); the release keeps approved items only.", elem_classes="db-note")
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=240, elem_classes="db-sidebar"):
                stage = gr.Radio(list(PASSES), value="items", label="Review", elem_id="db-review-stage")
                task = gr.Radio(["all", *tasks], value="all", label="Task", elem_id="db-review-task")
                status = gr.Radio(list(STATUSES), value="pending", label="Show", elem_id="db-review-status")
                item = gr.Dropdown([], label="Item", elem_id="db-review-item")
                note = gr.Textbox(label="Note (optional)", lines=2, elem_id="db-review-note")
                with gr.Row():
                    approve = gr.Button("Approve", variant="primary", min_width=80, elem_id="db-review-approve")
                    reject = gr.Button("Reject", variant="stop", min_width=80, elem_id="db-review-reject")
                where = gr.Markdown("", elem_id="db-review-where")
            with gr.Column(scale=3):
                gallery = gr.Gallery(label="Photos", columns=4, height="auto", object_fit="contain", preview=False,
                                     elem_id="db-review-gallery")
                card = gr.HTML(elem_id="db-review-card")
        for trigger in (task.input, status.input, stage.input):
            trigger(self.filter, [task, status, stage], [item, gallery, card, note, where], api_visibility="private")
        item.input(self.show, [item, stage], [gallery, card, note], api_visibility="private")
        for button, decision in ((approve, "approve"), (reject, "reject")):
            button.click(lambda *a, d=decision: self.decide(d, *a), [task, status, item, note, stage],
                         [item, gallery, card, note, where], api_visibility="private")
        self.on_load = (self.filter, [task, status, stage], [item, gallery, card, note, where])
