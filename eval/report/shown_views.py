"""Views drawn in a page as JPEG files written once, and the strip of pictures that shows them, so no event
re-encodes a view and no page loads Gradio's Gallery (measured in bench/README.md)."""

from __future__ import annotations

import atexit
import hashlib
import html
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from eval.images import JPEG_QUALITY

if TYPE_CHECKING:
    from PIL import Image

MAX_FILES = 512  # ~5 views an item: the last ~100 items shown stay ready (~60 MB of JPEG at most)
# Gradio's route for a file it serves, relative to the page (so a Space behind a path prefix works too).
FILE_ROUTE = "gradio_api/file="


class ShownViews:
    """JPEG files of the views shown lately, bounded in number (the least recently shown removed first). The
    folder sits under the system's temporary folder, where Gradio accepts files an app returns, and is removed
    at exit. Safe to share between concurrent requests."""

    def __init__(self, folder: Path | None = None, max_files: int = MAX_FILES) -> None:
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="diningbench-views-"))
            atexit.register(shutil.rmtree, folder, True)
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_files = max(1, int(max_files))
        self._files: OrderedDict[str, Path] = OrderedDict()
        self._lock = threading.Lock()

    def path(self, stored: bytes, max_side: int, picture: Callable[[], Image.Image]) -> str:
        """The file showing `stored`; `picture()` (the bounded, decoded view) runs only the first time.
        Its errors reach the caller, and nothing is kept for a view that fails."""
        key = f"{hashlib.sha256(stored).hexdigest()[:40]}-{int(max_side)}"  # bytes, side shown
        with self._lock:
            found = self._files.get(key)
            if found is not None and found.is_file():
                self._files.move_to_end(key)
                return str(found)
        target = self.folder / f"{key}.jpg"
        image = picture()
        partial = target.with_suffix(f".{threading.get_ident()}.part")
        image.convert("RGB").save(partial, format="JPEG", quality=JPEG_QUALITY)
        partial.replace(target)  # whole or not at all: a concurrent reader never sees half a file
        with self._lock:
            self._files[key] = target
            self._files.move_to_end(key)
            while len(self._files) > self.max_files:
                _, old = self._files.popitem(last=False)
                old.unlink(missing_ok=True)
        return str(target)

    def __len__(self) -> int:
        return len(self._files)


_shared_lock = threading.Lock()
_shared: list[ShownViews] = []


def shared() -> ShownViews:
    """The process's one set of shown views (the Space's tabs and its Runs tab, or `eval view`), made at the
    first view drawn."""
    with _shared_lock:  # made under the lock: a race could make two, leaving a folder behind
        if not _shared:
            _shared.append(ShownViews())
        return _shared[0]


_served: set[Path] = set()


def serve() -> ShownViews:
    """The shared set, its folder (and nothing else) served by Gradio as static files: a page links a view
    with `file_url`. Called by whoever builds a page that shows views (the Space, `eval view`), before it
    is launched; gradio is imported here, never by the harness."""
    import gradio as gr

    views = shared()
    with _shared_lock:
        if views.folder not in _served:
            gr.set_static_paths([views.folder])
            _served.add(views.folder)
    return views


def file_url(path: str | Path) -> str:
    """The address, relative to the page, at which Gradio serves a file of a served folder."""
    return FILE_ROUTE + quote(str(path), safe="/")


# Given to a gr.HTML that shows a strip (js_on_load): a press on a view, or Enter on it, shows it large
# across the strip, and again puts it back. `element` is the component's own node, kept across values.
STRIP_JS = """
const toggle = (e) => {
  if (e.target.closest('a')) return;  // the link opens the file itself
  const view = e.target.closest('.db-view');
  if (!view || !element.contains(view)) return;
  e.preventDefault();
  const large = !view.classList.contains('db-view-large');
  element.querySelectorAll('.db-view-large').forEach((v) => v.classList.remove('db-view-large'));
  view.classList.toggle('db-view-large', large);
  view.setAttribute('aria-expanded', large ? 'true' : 'false');
};
element.addEventListener('click', toggle);
element.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') toggle(e); });
"""


def strip_html(views: Sequence[tuple[str | Path, str]], label: str) -> str:
    """A dish's views as a strip of pictures: four across on a wide screen, two by two on a phone, each whole
    (never cropped) with its caption; a press shows one large (`STRIP_JS`), its link opens the file itself.
    `views` are (file of a served folder, caption); captions and the label are escaped text. Empty for none."""
    if not views:
        return ""
    figures = []
    for i, (path, caption) in enumerate(views):
        url = html.escape(file_url(path), quote=True)
        text = html.escape(str(caption), quote=True)
        lazy = "" if i < 4 else " loading='lazy'"  # the first row at once, the rest as it is scrolled to
        figures.append(f"<figure class='db-view' tabindex='0' role='button' aria-expanded='false' "
                       f"title='press to show larger, again to put back'>"
                       f"<img src='{url}' alt='{text}' decoding='async'{lazy}>"
                       f"<figcaption>{text} · <a href='{url}' target='_blank' rel='noopener'>full size</a>"
                       f"</figcaption></figure>")
    return (f"<div class='db-views' role='group' aria-label='{html.escape(label, quote=True)}'>"
            f"{''.join(figures)}</div>")
