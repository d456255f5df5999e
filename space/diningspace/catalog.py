"""The dataset as the Browse tab sees it: metadata indexed once, images decoded one item at a time.

A release holds ~5 images an item and thousands of items, so the index holds only the text columns.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from dataset.schema import CONFIGS
from eval.images import ImageError, decode_bounded, stored_bytes
from eval.report import shown_views

from .warmup import warm_harness

IMAGE_COLUMNS = ("images",)
ALL = "All"  # the filter value that keeps every item
DISPLAY_SIDE = 1600  # long side of a view as shown: sharp when shown large, ~8 MB decoded at most


class CatalogError(ValueError):
    """A config or item the Space cannot show (one line naming it)."""


@dataclass
class ConfigIndex:
    """One config: its (image-free) rows in dataset order and where each id lives."""

    dataset: Any  # datasets.Dataset loaded with decode_images=False, or a release (`rows`, `iter_rows`)
    rows: list[dict[str, Any]]
    position: dict[str, int]

    def stored(self, position: int) -> dict[str, Any]:
        """The row at `position` with its image cells (`{bytes, path}`), read now from the Arrow table (the
        authors' layout: their images folder)."""
        if hasattr(self.dataset, "iter_rows"):
            return next(iter(self.dataset.iter_rows([position])))
        return self.dataset[position]


def is_authors_layout(source: str | None) -> bool:
    """Whether `source` is read per prompt language (the authors' release: their JSON-lines files, or their
    Hub id), as its layout says; such rows name no merchant, cuisine or category."""
    import diningbench

    try:
        return source is not None and diningbench.layout_of(source).by_language
    except ValueError:  # a Hub id with path characters: refused when it is loaded, with the reason
        return False


def _default_loader(source: str | None) -> Callable[..., Any]:
    def load(config: str, lang: str = "zh") -> Any:
        import diningbench

        warm_harness()  # datasets must not hash while the metrics' imports are half done
        if source is not None and is_authors_layout(source):
            # Their files come one per language; a folder holding only the Chinese ones is shown in Chinese.
            configs, _ = diningbench.official_configs(source, lang)
            return diningbench.read_release(config, source, lang=lang if config in configs or lang == "zh" else "zh")
        return diningbench.load(config, source=source, decode_images=False)

    return load


def decode_image(stored: Any, *, item_id: str = "?", index: int = 0) -> Image.Image:
    """A stored image ({bytes, path} as datasets keeps it, raw bytes, or PIL) as an RGB picture of at most
    DISPLAY_SIDE pixels a side. Only the release's own bytes are shown, never a file a cell names, and the
    pixel count is checked before decoding (eval/images.py), so one view costs a bounded amount of memory."""
    if isinstance(stored, Image.Image):
        picture = stored.convert("RGB")
        picture.thumbnail((DISPLAY_SIDE, DISPLAY_SIDE))
        return picture
    try:
        return decode_bounded(stored_bytes(stored, item_id=item_id, index=index), item_id=item_id, index=index,
                              max_side=DISPLAY_SIDE)
    except ImageError as exc:
        raise CatalogError(str(exc)) from None


class Catalog:
    """Lazily indexes each config on first use; safe to share between concurrent requests."""

    def __init__(self, source: str | None = None, loader: Callable[..., Any] | None = None) -> None:
        self._load = loader or _default_loader(source)
        # The authors' release is one file per prompt language; any other release holds both in each row.
        self.by_language = loader is None and source is not None and is_authors_layout(source)
        self._indexes: dict[tuple[str, str], ConfigIndex] = {}
        self._lock = threading.Lock()

    def index(self, config: str, lang: str = "zh") -> ConfigIndex:
        if config not in CONFIGS:
            raise CatalogError(f"unknown config {config!r}; choose one of {', '.join(CONFIGS)}")
        key = (config, lang if self.by_language and lang in ("zh", "en") else "zh")
        with self._lock:
            if key not in self._indexes:
                try:
                    dataset = self._load(config, key[1]) if self.by_language else self._load(config)
                except (ValueError, OSError) as exc:  # diningbench.load's one-line errors
                    raise CatalogError(f"cannot load the {config} config: {exc}") from None
                if hasattr(dataset, "iter_rows"):  # a release read by diningbench.read_release: rows read once
                    rows = [dict(row) for row in dataset.rows]
                else:
                    meta_columns = [c for c in dataset.column_names if c not in IMAGE_COLUMNS]
                    rows = dataset.select_columns(meta_columns).to_list()
                position = {str(row["id"]): i for i, row in enumerate(rows)}
                self._indexes[key] = ConfigIndex(dataset=dataset, rows=rows, position=position)
            return self._indexes[key]

    def warm(self) -> None:
        """Index every config now (at start-up, in the background), so no visitor waits for it."""
        for config in CONFIGS:
            with contextlib.suppress(CatalogError):
                self.index(config)  # reported to the visitor who opens that config, with its one-line reason

    def facets(self, config: str, field: str, lang: str = "zh") -> list[str]:
        """The distinct values of a metadata column (cuisine, category, vqa_category), sorted; [] when the
        release names none (the authors' release names no cuisine, menu category or VQA category)."""
        return sorted({str(r[field]) for r in self.index(config, lang).rows if r.get(field) not in (None, "")})

    def filter_ids(self, config: str, *, cuisine: str = ALL, category: str = ALL,
                   vqa_category: str = ALL, lang: str = "zh") -> list[str]:
        """Ids of the items that match every filter (ALL or empty = no filter), in dataset order."""
        wanted = {"cuisine": cuisine, "category": category, "vqa_category": vqa_category}
        active = {k: v for k, v in wanted.items() if v and v != ALL}
        return [str(r["id"]) for r in self.index(config, lang).rows
                if all(str(r.get(k)) == v for k, v in active.items())]

    def row(self, config: str, item_id: str, lang: str = "zh") -> dict[str, Any]:
        """The item's metadata and text fields (no images); in the authors' layout, from `lang`'s file."""
        index = self.index(config, lang)
        if item_id not in index.position:
            raise CatalogError(f"no item {item_id!r} in the {config} config")
        return dict(index.rows[index.position[item_id]])

    def _stored_views(self, config: str, item_id: str) -> list[tuple[Any, str]]:
        """The item's views as the release stores them, each with its role (`reference` or `user`)."""
        index = self.index(config)
        if item_id not in index.position:
            raise CatalogError(f"no item {item_id!r} in the {config} config")
        try:
            stored = index.stored(index.position[item_id])
        except (ValueError, OSError) as exc:  # the authors' layout: a photo missing or refused, in one line
            raise CatalogError(str(exc)) from None
        roles: Sequence[str] = stored.get("image_roles") or []
        return [(image, roles[i] if i < len(roles) else "view") for i, image in enumerate(stored.get("images") or [])]

    def images(self, config: str, item_id: str) -> list[tuple[Image.Image, str]]:
        """The item's views, decoded now, each with its role: what a model is sent."""
        return [(_decoded(image, item_id, i), role) for i, (image, role) in enumerate(self._stored_views(config, item_id))]

    def view_files(self, config: str, item_id: str) -> list[tuple[str, str]]:
        """The item's views as JPEG files to show (each decoded and bounded once, then kept while it is
        among the last ones shown), each with its role: what a strip of pictures links (`shown_views.strip_html`)."""
        out = []
        for i, (image, role) in enumerate(self._stored_views(config, item_id)):
            if isinstance(image, Image.Image):  # an injected catalog's pictures: named by their pixels
                data = f"{image.mode}{image.size}".encode() + image.tobytes()
            else:
                try:
                    data = stored_bytes(image, item_id=item_id, index=i)
                except ImageError as exc:
                    raise CatalogError(str(exc)) from None
            path = shown_views.shared().path(data, DISPLAY_SIDE, lambda image=image, i=i: _decoded(image, item_id, i))
            out.append((path, role))
        return out


def _decoded(image: Any, item_id: str, index: int) -> Image.Image:
    """`decode_image`, any decoding failure a CatalogError naming the item and the view."""
    try:
        return decode_image(image, item_id=item_id, index=index)
    except CatalogError:
        raise
    except (OSError, ValueError):
        raise CatalogError(f"item {item_id}: image {index} cannot be decoded") from None
