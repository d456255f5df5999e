"""The Browse tab: pick a config, filter, step through items, see their views and ground truth."""

from __future__ import annotations

from typing import Any

import gradio as gr

from eval import tasks
from eval.report import shown_views
from eval.report.tables import as_text

from .catalog import ALL, CONFIGS, Catalog, CatalogError
from .render import gallery_caption, item_card, plain_fields

NO_ITEM = '<div class="db-empty">No item matches these filters.</div>'
NO_FACETS = "This release names no cuisine, menu category or VQA category: its items are not filtered by them."


def _filter_update(catalog: Catalog, config: str, field: str, visible: bool = True, lang: str = "zh") -> dict[str, Any]:
    """A filter's choices; hidden when the release names no value for it (the authors' release names none)."""
    values = catalog.facets(config, field, lang) if visible else []
    return gr.update(choices=[ALL, *values], value=ALL, visible=visible and bool(values))


def _facets_note(catalog: Catalog, config: str, lang: str) -> dict[str, Any]:
    """One line where the release names none of the fields Browse filters by; hidden otherwise."""
    named = any(catalog.facets(config, field, lang) for field in ("cuisine", "category", "vqa_category"))
    return gr.update(value="" if named else NO_FACETS, visible=not named)


def captioned(views: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each view's file (`Catalog.view_files`) with its caption (`gallery_caption`)."""
    return [(image, gallery_caption(role, i)) for i, (image, role) in enumerate(views)]


def _has_vqa_category(config: str) -> bool:
    """Whether the config's items are sliced by VQA category (the filter is shown for it alone)."""
    return tasks.is_task(config) and tasks.get(config).slice_field == "vqa_category"


class BrowseTab:
    """Builds the tab's components inside the current Blocks and wires their events."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    # --- handlers (plain functions of component values) -------------------------------------
    def _item(self, config: str, item_id: str, lang: str = "zh") -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """The item's row and view files; a CatalogError shown as one line."""
        try:
            return self.catalog.row(config, item_id, lang), self.catalog.view_files(config, item_id)
        except CatalogError as exc:
            raise gr.Error(as_text(str(exc))) from None

    def _ids(self, config: str, cuisine: str, category: str, vqa_category: str, lang: str) -> list[str]:
        return self.catalog.filter_ids(config, cuisine=cuisine, category=category,
                                       vqa_category=vqa_category if _has_vqa_category(config) else ALL, lang=lang)

    def show(self, config: str, item_id: str | None, ids: list[str], lang: str, show_answer: bool
             ) -> tuple[str, str, dict[str, Any], str]:
        """The views (a strip of pictures), card, fields and the 'item k of n' line for one item."""
        if not item_id:
            return "", NO_ITEM, {}, "0 items"
        row, views = self._item(config, item_id, lang)
        strip = shown_views.strip_html(captioned(views), "Views")
        card = item_card(config, row, n_images=len(views), lang=lang, show_answer=show_answer)
        where = f"Item {ids.index(item_id) + 1} of {len(ids)}" if item_id in ids else f"{len(ids)} items"
        return strip, card, plain_fields(row), where

    def api_browse(self, config: str, item_id: str) -> tuple[Any, dict[str, Any]]:
        """/browse: (config, item id) → the item's views (captioned with their role) and all its fields."""
        row, views = self._item(config, item_id)
        return captioned(views), plain_fields(row)

    def on_config(self, config: str, lang: str, show_answer: bool) -> tuple[Any, ...]:
        try:
            ids = self.catalog.filter_ids(config, lang=lang)
        except CatalogError as exc:
            raise gr.Error(as_text(str(exc))) from None
        first = ids[0] if ids else None
        return (_filter_update(self.catalog, config, "cuisine", lang=lang),
                _filter_update(self.catalog, config, "category", lang=lang),
                _filter_update(self.catalog, config, "vqa_category", visible=_has_vqa_category(config), lang=lang),
                _facets_note(self.catalog, config, lang),
                gr.update(choices=ids, value=first), *self.show(config, first, ids, lang, show_answer))

    def on_filter(self, config: str, cuisine: str, category: str, vqa_category: str, lang: str,
                  show_answer: bool) -> tuple[Any, ...]:
        ids = self._ids(config, cuisine, category, vqa_category, lang)
        first = ids[0] if ids else None
        return (gr.update(choices=ids, value=first), *self.show(config, first, ids, lang, show_answer))

    def on_item(self, config: str, cuisine: str, category: str, vqa_category: str, item_id: str | None,
                lang: str, show_answer: bool) -> tuple[Any, ...]:
        return self.show(config, item_id, self._ids(config, cuisine, category, vqa_category, lang), lang, show_answer)

    def step(self, delta: int, config: str, cuisine: str, category: str, vqa_category: str,
             item_id: str | None, lang: str, show_answer: bool) -> tuple[Any, ...]:
        """The previous/next item among the filtered ones, wrapping around at either end."""
        ids = self._ids(config, cuisine, category, vqa_category, lang)
        if not ids:
            return (gr.update(value=None), *self.show(config, None, ids, lang, show_answer))
        current = ids.index(item_id) if item_id in ids else -delta
        target = ids[(current + delta) % len(ids)]
        return (gr.update(value=target), *self.show(config, target, ids, lang, show_answer))

    # --- layout -------------------------------------------------------------------------------
    def build(self) -> None:
        shown_views.serve()  # the views' files, linked from the page
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=240, elem_classes="db-sidebar"):
                config = gr.Radio(list(CONFIGS), value=CONFIGS[0], label="Config")
                cuisine = gr.Dropdown([ALL], value=ALL, label="Cuisine")
                category = gr.Dropdown([ALL], value=ALL, label="Menu category")
                vqa_category = gr.Dropdown([ALL], value=ALL, label="VQA category", visible=False)
                facets_note = gr.Markdown("", visible=False, elem_classes="db-hint", elem_id="db-browse-facets")
                # Every id is in the list (the next ones appear as it is scrolled); typing filters them.
                item = gr.Dropdown([], label="Item id", allow_custom_value=False, elem_id="db-browse-item")
                with gr.Row(elem_classes="db-nav"):
                    prev_btn = gr.Button("← Previous", size="sm", min_width=80)
                    next_btn = gr.Button("Next →", size="sm", min_width=80)
                where = gr.Markdown("", elem_classes="db-where")
                lang = gr.Radio(["zh", "en"], value="zh", label="Language")
                show_answer = gr.Checkbox(False, label="Show answer")
            with gr.Column(scale=3):
                # Plain pictures, not a gr.Gallery: its module costs every page load ~0.6 MB of script.
                views = gr.HTML("", elem_id="db-gallery", js_on_load=shown_views.STRIP_JS, padding=False)
                card = gr.HTML(elem_id="db-card")
                with gr.Accordion("All fields (JSON)", open=False):
                    fields = gr.JSON(label="Fields")
        filters = [config, cuisine, category, vqa_category]
        shown = [views, card, fields, where]
        self.on_load = (self.on_config, [config, lang, show_answer],
                        [cuisine, category, vqa_category, facets_note, item, *shown])
        config.input(*self.on_load, api_visibility="private")
        for box in (cuisine, category, vqa_category):
            box.input(self.on_filter, [*filters, lang, show_answer], [item, *shown], api_visibility="private")
        # `.input` (user actions only): programmatic updates already render the item they select.
        stepped = [*filters, item, lang, show_answer]
        for trigger in (item.input, lang.input, show_answer.input):
            trigger(self.on_item, stepped, shown, api_visibility="private")
        prev_btn.click(lambda *a: self.step(-1, *a), stepped, [item, *shown], api_visibility="private")
        next_btn.click(lambda *a: self.step(1, *a), stepped, [item, *shown], api_visibility="private")

        # API-only endpoint for gradio_client users: hidden inputs, so any config's ids are accepted; the views
        # come back as a gallery's files (a hidden component: the page never loads its module).
        api_config, api_item = gr.Textbox(visible=False), gr.Textbox(visible=False)
        api_views = gr.Gallery(label="Views", format="jpeg", visible=False)
        api_trigger = gr.Button(visible=False)
        api_trigger.click(self.api_browse, [api_config, api_item], [api_views, fields], api_name="browse")
