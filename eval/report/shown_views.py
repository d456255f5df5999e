"""Views drawn in a page as JPEG files written once, for galleries that show the same item to many visitors.

A gallery given a decoded picture re-encodes it at every event (Gradio hashes the JPEG it makes to name its
cache file): the Space's first item cost every visitor ~0.1 s of server time so. Here a picture is decoded,
bounded and encoded once, under a name derived from its stored bytes; later events hand the gallery that
file, which Gradio only hashes and links.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from eval.images import JPEG_QUALITY

if TYPE_CHECKING:
    from PIL import Image

MAX_FILES = 512  # ~5 views an item: the last ~100 items shown stay ready (~60 MB of JPEG at most)


class ShownViews:
    """JPEG files of the views shown lately, bounded in number (the least recently shown removed first).

    The folder sits under the system's temporary folder, where Gradio accepts files an app returns, and
    is removed at exit. Safe to share between concurrent requests."""

    def __init__(self, folder: Path | None = None, max_files: int = MAX_FILES) -> None:
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="diningbench-views-"))
            atexit.register(shutil.rmtree, folder, True)
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.max_files = max(1, int(max_files))
        self._files: OrderedDict[str, Path] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key_of(stored: bytes, max_side: int) -> str:
        """The file's name: the stored bytes' digest and the side they are shown at."""
        return f"{hashlib.sha256(stored).hexdigest()[:40]}-{int(max_side)}"

    def path(self, stored: bytes, max_side: int, picture: Callable[[], Image.Image]) -> str:
        """The file showing `stored`; `picture()` (the bounded, decoded view) runs only the first time.
        Its errors reach the caller, and nothing is kept for a view that fails."""
        key = self.key_of(stored, max_side)
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


@functools.cache
def _made_once() -> ShownViews:
    return ShownViews()


def shared() -> ShownViews:
    """The process's one set of shown views (the Space's tabs and its Runs tab, or `eval view`), made at the
    first view drawn."""
    with _shared_lock:  # functools.cache alone could make two under a race, leaving a folder behind
        return _made_once()
